package cpuallocator

import (
	"fmt"
	"strings"
)

// Whole cores under full-pcpus-only: a request is satisfiable exactly when
// it is a sum of the free parts of some cores (whole cores, cores missing
// offline threads, the rest of a core the container partly holds). On
// regular machines that is a count check and placement is the kubelet's;
// otherwise coreSizes decides the subset sum and placement runs in exact
// mode (placeUsable, picker.takeExactFrom). docs/design.md ("Whole cores
// under full-pcpus-only") has the condition and why.

// coreSizes counts the whole-core parts available to a request by size:
// coreSizes[w] is the number of cores with w CPUs to take. Index 0 is
// unused.
type coreSizes []int32

// sizesOf counts the cores of the tree by the number of their CPUs in b.
// Under full-pcpus-only b is a usable set, so each count is a whole part.
func (t *unitTree) sizesOf(b cpuBits) coreSizes {
	perCore := make([]int32, len(t.units))
	for id := range b.All() {
		perCore[t.coreOf[id]]++
	}
	s := make(coreSizes, t.threads+1)
	for _, n := range perCore {
		if n > 0 {
			s[n]++
		}
	}
	return s
}

// total returns the number of CPUs of the parts.
func (s coreSizes) total() int {
	n := 0
	for w, c := range s {
		n += w * int(c)
	}
	return n
}

// only returns the size of the parts when they all have one size, 0 when
// there are none or several sizes.
func (s coreSizes) only() int {
	size := 0
	for w, c := range s {
		if c == 0 || w == 0 {
			continue
		}
		if size != 0 {
			return 0
		}
		size = w
	}
	return size
}

// uniform reports whether making need CPUs of these parts is a matter of
// counting: every part has one size, which divides need.
func (s coreSizes) uniform(need int) bool {
	w := s.only()
	return w != 0 && need%w == 0
}

// canMake reports whether some of the parts add up to exactly r CPUs.
func (s coreSizes) canMake(r int) bool {
	switch {
	case r == 0:
		return true
	case r < 0 || r > s.total():
		return false
	case s.only() != 0:
		return r%s.only() == 0
	}
	return s.sums(r).Has(r)
}

// sums returns, as a bitmap, every total up to limit that some of the
// parts add up to (0 included). It is a bounded knapsack: the c parts of a
// size are grouped 1, 2, 4, ... so that each size costs O(log c) shifts.
func (s coreSizes) sums(limit int) cpuBits {
	b := make(cpuBits, limit/64+1)
	b.Add(0)
	for w := 1; w < len(s); w++ {
		for left, chunk := int(s[w]), 1; left > 0; chunk *= 2 {
			m := min(chunk, left)
			orShifted(b, m*w)
			left -= m
		}
	}
	return b
}

// plus returns s + o.
func (s coreSizes) plus(o coreSizes) coreSizes {
	out := append(coreSizes(nil), s...)
	for w, c := range o {
		out[w] += c
	}
	return out
}

// largestSplit returns the largest x ≤ limit that the parts of in add up
// to while the parts of out add up to r-x, or -1 when there is none. The
// parts of in and out together must add up to r. When all of them have
// one size dividing r it returns min(limit, in.total()) at once: r-x is
// then made up of the parts of in and out that x leaves, if not of out
// alone (distribute asks a node for less than r).
func largestSplit(in, out coreSizes, r, limit int) int {
	if in.plus(out).uniform(r) {
		return min(limit, in.total())
	}
	inSums, outSums := in.sums(limit), out.sums(r)
	for x := limit; x >= 0; x-- {
		if inSums.Has(x) && outSums.Has(r-x) {
			return x
		}
	}
	return -1
}

// largestAtMost returns the largest total up to limit that some of the
// parts add up to.
func (s coreSizes) largestAtMost(limit int) int {
	sums := s.sums(limit)
	for x := limit; x > 0; x-- {
		if sums.Has(x) {
			return x
		}
	}
	return 0
}

// String describes the parts for error messages, largest first: "3 of 2
// CPUs, 1 of 1 CPU".
func (s coreSizes) String() string {
	var parts []string
	for w := len(s) - 1; w > 0; w-- {
		if s[w] == 0 {
			continue
		}
		unit := "CPUs"
		if w == 1 {
			unit = "CPU"
		}
		parts = append(parts, fmt.Sprintf("%d of %d %s", s[w], w, unit))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// orShifted sets b to b ∪ (b shifted up by k), dropping what moves past
// the end.
func orShifted(b cpuBits, k int) {
	words, shift := k/64, uint(k%64)
	for i := len(b) - 1; i >= words; i-- {
		v := b[i-words] << shift
		if shift != 0 && i-words > 0 {
			v |= b[i-words-1] >> (64 - shift)
		}
		b[i] |= v
	}
}
