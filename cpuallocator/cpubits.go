package cpuallocator

import (
	"iter"
	"math/bits"

	"k8s.io/utils/cpuset"
)

// cpuBits is a set of CPU ids as a bitmap. The allocator works on bitmaps
// because cpuset.CPUSet, a map, is too slow for thousands of CPUs; it
// converts at the API boundary only.
type cpuBits []uint64

func newCPUBits(maxID int) cpuBits { return make(cpuBits, maxID/64+1) }

func (b cpuBits) has(id int) bool {
	w := id / 64
	return id >= 0 && w < len(b) && b[w]&(1<<uint(id%64)) != 0
}

func (b cpuBits) set(id int)   { b[id/64] |= 1 << uint(id%64) }
func (b cpuBits) clear(id int) { b[id/64] &^= 1 << uint(id%64) }

func (b cpuBits) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

func (b cpuBits) clone() cpuBits { return append(cpuBits(nil), b...) }

// and returns b ∩ o (o must have b's length).
func (b cpuBits) and(o cpuBits) cpuBits {
	r := make(cpuBits, len(b))
	for i := range b {
		r[i] = b[i] & o[i]
	}
	return r
}

// andNot returns b − o (o must have b's length).
func (b cpuBits) andNot(o cpuBits) cpuBits {
	r := make(cpuBits, len(b))
	for i := range b {
		r[i] = b[i] &^ o[i]
	}
	return r
}

// or returns b ∪ o (o must have b's length).
func (b cpuBits) or(o cpuBits) cpuBits {
	r := make(cpuBits, len(b))
	for i := range b {
		r[i] = b[i] | o[i]
	}
	return r
}

func (b cpuBits) intersects(o cpuBits) bool {
	for i := range b {
		if b[i]&o[i] != 0 {
			return true
		}
	}
	return false
}

// all iterates over the members, ascending.
func (b cpuBits) all() iter.Seq[int] {
	return func(yield func(int) bool) {
		for w, word := range b {
			for ; word != 0; word &= word - 1 {
				if !yield(w*64 + bits.TrailingZeros64(word)) {
					return
				}
			}
		}
	}
}

// ids returns the members, ascending.
func (b cpuBits) ids() []int {
	out := make([]int, 0, b.count())
	for id := range b.all() {
		out = append(out, id)
	}
	return out
}

func (b cpuBits) cpuSet() cpuset.CPUSet { return cpuset.New(b.ids()...) }
