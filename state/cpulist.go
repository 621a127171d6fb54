package state

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/internal/cpumask"
)

// maxCPUID is the largest CPU number a checkpoint may name. Linux builds
// with at most 8192 CPUs; the bound keeps a hostile or damaged file such as
// "0-2147483647" from making the parser allocate without limit.
const maxCPUID = 1<<16 - 1

// parseCPUList parses a Linux CPU list ("0-3,8,10-11") strictly: decimal
// numbers only, ranges written low-high, no CPU above maxCPUID, the empty
// string meaning the empty set. Unlike cpuset.Parse its cost is bounded by
// the length of the input, whatever the ranges say.
func parseCPUList(s string) (cpuset.CPUSet, error) {
	if s == "" {
		return cpuset.New(), nil
	}
	type span struct{ lo, hi int }
	var spans []span
	for part := range strings.SplitSeq(s, ",") {
		loText, hiText, isRange := strings.Cut(part, "-")
		lo, err := parseCPUID(loText)
		if err != nil {
			return cpuset.CPUSet{}, fmt.Errorf("%q: %w", part, err)
		}
		hi := lo
		if isRange {
			if hi, err = parseCPUID(hiText); err != nil {
				return cpuset.CPUSet{}, fmt.Errorf("%q: %w", part, err)
			}
			if lo > hi {
				return cpuset.CPUSet{}, fmt.Errorf("%q: range runs backwards", part)
			}
		}
		spans = append(spans, span{lo, hi})
	}
	// Merge overlapping spans so that building the set costs at most one
	// step per distinct CPU (≤ maxCPUID+1) plus one per span.
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

// parseCPUID parses one CPU number of a CPU list.
func parseCPUID(text string) (int, error) {
	if text == "" {
		return 0, fmt.Errorf("missing CPU number")
	}
	for _, r := range text {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a CPU number", text)
		}
	}
	id, err := strconv.Atoi(text)
	if err != nil || id > maxCPUID {
		return 0, fmt.Errorf("CPU %s is above the largest supported CPU %d", text, maxCPUID)
	}
	return id, nil
}

// FormatCPUList returns the same text as set.String() (a Linux CPU list,
// "0-3,8,10-11") at a fraction of the cost for large sets: the shared pool
// of a big machine is written on nearly every commit and sent to every
// shared container. It marks the CPUs in a bitmap and reads the ranges off
// it, instead of sorting.
func FormatCPUList(set cpuset.CPUSet) string {
	cpus := set.UnsortedList()
	var m cpumask.Mask
	for _, cpu := range cpus {
		if cpu < 0 || cpu > maxCPUID {
			return set.String() // not a CPU list this package reads back; leave it to the library
		}
		m.Add(cpu)
	}
	return m.String()
}
