package cpumask

import (
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestListFormat(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1, 2, 3}, "0-3"},
		{[]int{0, 2}, "0,2"},
		{[]int{1, 2, 3, 8, 10, 11}, "1-3,8,10-11"},
		{[]int{62, 63, 64, 65}, "62-65"},
		{[]int{63, 128}, "63,128"},
		{[]int{65535}, "65535"},
	} {
		var m Mask
		for _, id := range tc.cpus {
			m.Add(id)
		}
		if got := m.String(); got != tc.want {
			t.Errorf("%v: String() = %q, want %q", tc.cpus, got, tc.want)
		}
	}
}

func TestOfRefusesNegativeIDs(t *testing.T) {
	m, ok := Of(cpuset.New(-1, 3))
	if ok {
		t.Error("Of accepted a negative CPU id")
	}
	if got := m.String(); got != "3" {
		t.Errorf("Of kept %q, want the valid ids only (3)", got)
	}
	if m.Has(-1) {
		t.Error("Has(-1) is true")
	}
}

// TestAgreesWithCPUSet checks every operation against cpuset.CPUSet on
// random sets of random sizes, masks of different lengths included.
func TestAgreesWithCPUSet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	randomSet := func() cpuset.CPUSet {
		highest := []int{1, 63, 64, 130, 600}[r.IntN(5)]
		var ids []int
		for id := 0; id <= highest; id++ {
			if r.IntN(3) == 0 {
				ids = append(ids, id)
			}
		}
		return cpuset.New(ids...)
	}
	for range 500 {
		a, b := randomSet(), randomSet()
		ma, _ := Of(a)
		mb, _ := Of(b)
		for _, c := range []struct {
			op   string
			got  Mask
			want cpuset.CPUSet
		}{
			{"and", ma.And(mb), a.Intersection(b)},
			{"andNot", ma.AndNot(mb), a.Difference(b)},
			{"or", ma.Or(mb), a.Union(b)},
			{"clone", ma.Clone(), a},
		} {
			if got := c.got.String(); got != c.want.String() {
				t.Fatalf("%s of %s and %s: %q, want %q", c.op, a, b, got, c.want.String())
			}
			if !c.got.CPUSet().Equals(c.want) || c.got.Count() != c.want.Size() || !slices.Equal(c.got.IDs(), c.want.List()) {
				t.Fatalf("%s of %s and %s: CPUSet/Count/IDs disagree with %s", c.op, a, b, c.want)
			}
			if c.got.IsEmpty() != c.want.IsEmpty() {
				t.Fatalf("%s of %s and %s: IsEmpty disagrees", c.op, a, b)
			}
		}
		if ma.Intersects(mb) != !a.Intersection(b).IsEmpty() {
			t.Fatalf("Intersects(%s, %s) is wrong", a, b)
		}
		if ma.Equal(mb) != a.Equals(b) {
			t.Fatalf("Equal(%s, %s) is wrong", a, b)
		}
		if ma.IsSubsetOf(mb) != a.IsSubsetOf(b) || !ma.And(mb).IsSubsetOf(ma) {
			t.Fatalf("IsSubsetOf(%s, %s) is wrong", a, b)
		}
		long := append(ma.Clone(), 0, 0)
		if !long.Equal(ma) || !ma.Equal(long) {
			t.Fatalf("a mask with trailing empty words differs from itself: %s", a)
		}
		for _, id := range a.List() {
			ma.Remove(id)
		}
		if !ma.IsEmpty() {
			t.Fatalf("removing every CPU of %s leaves %s", a, ma)
		}
	}
}

func BenchmarkList512(b *testing.B) {
	m := New(511)
	for id := range 512 {
		if id%7 != 3 {
			m.Add(id)
		}
	}
	var buf []byte
	for b.Loop() {
		buf = m.AppendList(buf[:0])
	}
}
