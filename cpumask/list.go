package cpumask

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// MaxID is the largest CPU number the project accepts anywhere (Linux
// builds with at most 8192 CPUs). Parse refuses larger ids, so that a
// hostile or damaged list such as "0-2147483647" cannot make it allocate
// without limit.
const MaxID = 1<<16 - 1

// Parse parses a Linux CPU list ("0-3,8,10-11") strictly: decimal numbers
// only, ranges written low-high, no CPU above maxID (MaxID when maxID is
// negative or larger), the empty string meaning the empty set. Unlike
// cpuset.Parse its cost is bounded by the length of the input and maxID,
// whatever the ranges say.
func Parse(s string, maxID int) (cpuset.CPUSet, error) {
	if maxID < 0 || maxID > MaxID {
		maxID = MaxID
	}
	if s == "" {
		return cpuset.New(), nil
	}
	if limit := maxListLen(maxID); len(s) > limit {
		// Longer than every CPU 0-maxID listed one by one: text that would
		// cost time and memory to split, for no CPU list.
		return cpuset.CPUSet{}, fmt.Errorf("%d bytes is longer than any list of CPUs 0-%d (%d bytes)", len(s), maxID, limit)
	}
	type span struct{ lo, hi int }
	var spans []span
	for part := range strings.SplitSeq(s, ",") {
		loText, hiText, isRange := strings.Cut(part, "-")
		lo, err := parseID(loText, maxID)
		if err != nil {
			return cpuset.CPUSet{}, fmt.Errorf("%q: %w", part, err)
		}
		hi := lo
		if isRange {
			if hi, err = parseID(hiText, maxID); err != nil {
				return cpuset.CPUSet{}, fmt.Errorf("%q: %w", part, err)
			}
			if lo > hi {
				return cpuset.CPUSet{}, fmt.Errorf("%q: range runs backwards", part)
			}
		}
		spans = append(spans, span{lo, hi})
	}
	// Overlapping spans are merged, so that building the set costs one step
	// per distinct CPU (at most maxID+1) plus one per span.
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	var cpus []int
	next := 0
	for _, sp := range spans {
		for cpu := max(sp.lo, next); cpu <= sp.hi; cpu++ {
			cpus = append(cpus, cpu)
		}
		next = max(next, sp.hi+1)
	}
	return cpuset.New(cpus...), nil
}

// maxListLen is the length of the longest CPU list without repeats of
// CPUs 0 to maxID: each one listed on its own, comma-separated.
func maxListLen(maxID int) int {
	n, width, next := 0, 1, 10
	for id := 0; id <= maxID; id++ {
		if id == next {
			width, next = width+1, next*10
		}
		n += width + 1
	}
	return n - 1
}

// parseID parses one CPU number of a CPU list.
func parseID(text string, maxID int) (int, error) {
	if text == "" {
		return 0, fmt.Errorf("missing CPU number")
	}
	if strings.TrimLeft(text, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU number", text)
	}
	id, err := strconv.Atoi(text)
	if err != nil || id > maxID {
		return 0, fmt.Errorf("CPU %s is above the largest supported CPU %d", text, maxID)
	}
	return id, nil
}

// Format returns the same text as set.String() (a Linux CPU list,
// "0-3,8,10-11") at a fraction of the cost for large sets: it marks the
// CPUs in a bitmap and reads the ranges off it instead of sorting. The
// shared pool of a big machine is formatted on nearly every commit.
func Format(set cpuset.CPUSet) string {
	var m Mask
	for _, cpu := range set.UnsortedList() {
		if cpu < 0 || cpu > MaxID {
			return set.String() // not a list Parse reads back; leave it to the library
		}
		m.Add(cpu)
	}
	return m.String()
}

// Equal compares two sets by content (cpuset.CPUSet.Equals tells the zero
// CPUSet from an empty one made by cpuset.New).
func Equal(a, b cpuset.CPUSet) bool {
	return a.Size() == b.Size() && (a.IsEmpty() || a.IsSubsetOf(b))
}
