// Package cpumask is a set of CPU ids as a bitmap, for the hot paths where
// k8s.io/utils/cpuset.CPUSet (a map, rebuilt by every set operation) costs
// too much on machines with hundreds of CPUs: the policy's free CPUs, the
// allocator's placement, the checkpoint's consistency checks and CPU lists,
// and the shared pool, which a decision changes on every creation. Values
// cross package APIs as cpuset.CPUSet, except the shared pool: the state
// keeps it as a mask and hands it out as one (State.SharedMask).
package cpumask

import (
	"iter"
	"math/bits"
	"strconv"

	"k8s.io/utils/cpuset"
)

// Mask is a set of non-negative CPU ids, bit i%64 of word i/64 for CPU i.
// The zero value is the empty set. Binary operations accept masks of any
// lengths.
type Mask []uint64

// New returns an empty mask with room for CPUs 0 to maxID without growing.
func New(maxID int) Mask { return make(Mask, max(maxID, 0)/64+1) }

// Of returns the mask of s, or false if s holds a negative CPU id.
func Of(s cpuset.CPUSet) (Mask, bool) {
	var m Mask
	ok := m.AddSet(s)
	return m, ok
}

// Add adds CPU id, growing the mask as needed. id must not be negative.
func (m *Mask) Add(id int) {
	w := id / 64
	if w >= len(*m) {
		*m = append(*m, make(Mask, w+1-len(*m))...)
	}
	(*m)[w] |= 1 << uint(id%64)
}

// AddSet adds every CPU of s; it returns false, adding none of the
// negative ids, if s holds any.
func (m *Mask) AddSet(s cpuset.CPUSet) bool {
	ok := true
	for _, id := range s.UnsortedList() {
		if id < 0 {
			ok = false
			continue
		}
		m.Add(id)
	}
	return ok
}

// Remove removes CPU id, if present.
func (m Mask) Remove(id int) {
	if m.Has(id) {
		m[id/64] &^= 1 << uint(id%64)
	}
}

// Has reports whether CPU id is in the mask.
func (m Mask) Has(id int) bool {
	w := id / 64
	return id >= 0 && w < len(m) && m[w]&(1<<uint(id%64)) != 0
}

// Count returns the number of CPUs in the mask.
func (m Mask) Count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty reports whether the mask holds no CPU.
func (m Mask) IsEmpty() bool {
	for _, w := range m {
		if w != 0 {
			return false
		}
	}
	return true
}

// Clone returns a copy that does not share m's words.
func (m Mask) Clone() Mask { return append(Mask(nil), m...) }

// And returns m ∩ o.
func (m Mask) And(o Mask) Mask {
	r := make(Mask, min(len(m), len(o)))
	for i := range r {
		r[i] = m[i] & o[i]
	}
	return r
}

// AndNot returns m − o.
func (m Mask) AndNot(o Mask) Mask {
	r := m.Clone()
	for i := range min(len(r), len(o)) {
		r[i] &^= o[i]
	}
	return r
}

// Or returns m ∪ o.
func (m Mask) Or(o Mask) Mask {
	long, short := m, o
	if len(o) > len(m) {
		long, short = o, m
	}
	r := long.Clone()
	for i, w := range short {
		r[i] |= w
	}
	return r
}

// Intersects reports whether m and o share a CPU.
func (m Mask) Intersects(o Mask) bool {
	for i := range min(len(m), len(o)) {
		if m[i]&o[i] != 0 {
			return true
		}
	}
	return false
}

// IsSubsetOf reports whether every CPU of m is in o.
func (m Mask) IsSubsetOf(o Mask) bool {
	for i, w := range m {
		var in uint64
		if i < len(o) {
			in = o[i]
		}
		if w&^in != 0 {
			return false
		}
	}
	return true
}

// Equal reports whether m and o hold the same CPUs.
func (m Mask) Equal(o Mask) bool {
	long, short := m, o
	if len(o) > len(m) {
		long, short = o, m
	}
	for i, w := range long {
		if i < len(short) {
			if w != short[i] {
				return false
			}
		} else if w != 0 {
			return false
		}
	}
	return true
}

// All iterates over the CPUs, ascending.
func (m Mask) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for w, word := range m {
			for ; word != 0; word &= word - 1 {
				if !yield(w*64 + bits.TrailingZeros64(word)) {
					return
				}
			}
		}
	}
}

// IDs returns the CPUs, ascending.
func (m Mask) IDs() []int {
	out := make([]int, 0, m.Count())
	for id := range m.All() {
		out = append(out, id)
	}
	return out
}

// CPUSet returns the mask as a cpuset.
func (m Mask) CPUSet() cpuset.CPUSet { return cpuset.New(m.IDs()...) }

// String returns the CPUs in the Linux list format ("0-3,8,10-11"), the
// text cpuset.CPUSet.String gives for the same CPUs.
func (m Mask) String() string { return string(m.AppendList(nil)) }

// AppendList appends the CPUs in the Linux list format to b.
func (m Mask) AppendList(b []byte) []byte {
	first := true
	start, last := -1, -1
	flush := func() {
		if start < 0 {
			return
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendInt(b, int64(start), 10)
		if last > start {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(last), 10)
		}
	}
	for id := range m.All() {
		if id == last+1 && start >= 0 {
			last = id
			continue
		}
		flush()
		start, last = id, id
	}
	flush()
	return b
}
