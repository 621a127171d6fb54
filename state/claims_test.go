package state

import (
	"bytes"
	"fmt"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// sameClaims compares claims, ignoring trailing empty words.
func sameClaims(a, b claims) bool {
	trim := func(c claims) claims {
		for len(c) > 0 && c[len(c)-1] == 0 {
			c = c[:len(c)-1]
		}
		return c
	}
	return slices.Equal(trim(a), trim(b))
}

// randomChange changes a clone of s the way a decision might, or breaks
// it the way a bug might, and says which.
func randomChange(r *rand.Rand, s *State) (*State, string) {
	n := s.Clone()
	pods := slices.Sorted(maps.Keys(n.entries))
	ids := slices.Sorted(maps.Keys(n.containers))
	cpu := func() int { return r.IntN(70) } // beyond 64: a second word
	set := func() cpuset.CPUSet {
		c := cpuset.New()
		for range 1 + r.IntN(3) {
			c = c.Union(cpuset.New(cpu()))
		}
		return c
	}
	switch k := r.IntN(10); {
	case k == 0:
		n.defaultCPUSet = n.defaultCPUSet.Union(set())
		return n, "the shared pool takes CPUs"
	case k == 1:
		n.defaultCPUSet = n.defaultCPUSet.Difference(set())
		return n, "the shared pool gives CPUs"
	case k == 2 && len(pods) > 0:
		pod := pods[r.IntN(len(pods))]
		for name, a := range n.entries[pod] {
			a.Resized = a.Assigned().Union(set())
			n.SetAssignment(pod, name, a)
			return n, "an assignment grows"
		}
	case k == 3 && len(pods) > 0:
		pod := pods[r.IntN(len(pods))]
		for name, a := range n.entries[pod] {
			a.Resized = set() // may no longer hold the original
			n.SetAssignment(pod, name, a)
			return n, "an assignment is resized"
		}
	case k == 4:
		pod := fmt.Sprintf("pod-%d", r.IntN(8))
		name := []string{"app", "db", ""}[r.IntN(3)]
		n.SetAssignment(pod, name, Assignment{Original: set()})
		if r.IntN(2) == 0 {
			n.SetContainer(fmt.Sprintf("c-%d", r.IntN(100)), ContainerRef{PodUID: pod, Name: name})
		}
		return n, "an assignment is made"
	case k == 5 && len(pods) > 0:
		pod := pods[r.IntN(len(pods))]
		for name := range n.entries[pod] {
			n.DeleteAssignment(pod, name) // cascades to the ids
			return n, "an assignment is deleted"
		}
	case k == 6 && len(pods) > 0:
		pod := pods[r.IntN(len(pods))]
		for name := range n.entries[pod] {
			c := maps.Clone(n.entries[pod])
			delete(c, name) // leaves the ids pointing at it
			n.entries[pod] = c
			return n, "an assignment is dropped under its ids"
		}
	case k == 7 && len(ids) > 0:
		ref := n.containers[ids[r.IntN(len(ids))]]
		n.SetContainer(fmt.Sprintf("c-%d", r.IntN(100)), ref)
		return n, "a second id points at an entry"
	case k == 8 && len(ids) > 0:
		n.DeleteContainer(ids[r.IntN(len(ids))])
		return n, "an id is forgotten"
	case k == 9:
		n.SetAssignment(fmt.Sprintf("pod-%d", r.IntN(8)), "app", Assignment{Original: cpuset.New(cpumask.MaxID + 1)})
		return n, "an assignment names a CPU beyond the largest"
	}
	return n, "nothing changes"
}

// TestClaimsAfterAgreesWithAFullCheck walks random chains of changes, good
// and bad: checking only what a change touches must accept exactly the
// states the full check accepts, with the same claims.
func TestClaimsAfterAgreesWithAFullCheck(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		s := New(cpuset.New(0, 1, 2, 3))
		c, ok := claimsOf(s)
		if !ok {
			t.Fatal("an empty state does not look consistent")
		}
		accepted := 0
		for step := 0; step < 200; step++ {
			next, what := randomChange(r, s)
			got, gotOK := c.after(s, next, diff(s, next))
			want, wantOK := claimsOf(next)
			if gotOK != wantOK || (gotOK && !sameClaims(got, want)) {
				t.Fatalf("seed %d step %d (%s): incremental check %v %x, full check %v %x",
					seed, step, what, gotOK, got, wantOK, want)
			}
			if wantOK { // go on from consistent states only, as the Store does
				s, c = next, want
				accepted++
			}
		}
		if accepted == 0 {
			t.Fatalf("seed %d: no change was consistent; the walk tests nothing", seed)
		}
	}
}

// TestSaveRefusesInconsistentChanges saves a state twice (so that the
// Store knows its claims) and then each kind of inconsistent change: every
// one is refused with the full check's message and writes nothing.
func TestSaveRefusesInconsistentChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *State)
		want   string
	}{
		{"overlap with another assignment", func(s *State) {
			s.SetAssignment("pod-x", "x", Assignment{Original: cpus(t, "6")})
		}, `pod "pod-b" container "db" (CPUs "6-7") and pod "pod-x" container "x" (CPUs "6") overlap on CPUs "6"`},
		{"overlap with the shared pool", func(s *State) {
			s.defaultCPUSet = s.defaultCPUSet.Union(cpus(t, "5"))
		}, `overlaps defaultCpuSet`},
		{"resized without its original", func(s *State) {
			s.SetAssignment("pod-b", "db", Assignment{Original: cpus(t, "6-7"), Resized: cpus(t, "7")})
		}, `pod "pod-b" container "db"`},
		{"empty original", func(s *State) {
			s.SetAssignment("pod-b", "db", Assignment{})
		}, `pod "pod-b" container "db"`},
		{"an id pointing at nothing", func(s *State) {
			s.SetContainer("c-ghost", ContainerRef{PodUID: "pod-z", Name: "z"})
		}, `c-ghost`},
		{"two ids for one entry", func(s *State) {
			s.SetContainer("c-db-2", ContainerRef{PodUID: "pod-b", Name: "db"})
		}, `c-db`},
		{"an entry dropped under its id", func(s *State) {
			s.entries["pod-b"] = map[string]Assignment{}
		}, `c-db`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newTestStore(t)
			first := sampleState(t)
			second := first.Clone()
			second.defaultCPUSet = cpus(t, "0,9-15")
			for _, s := range []*State{first, second} {
				if err := st.Save(s); err != nil {
					t.Fatal(err)
				}
			}
			if st.claimsFor != second || st.claims == nil {
				t.Fatal("the Store does not know the claims of its base; the incremental check is not exercised")
			}
			before := readStateFiles(t, st.dir)
			bad := second.Clone()
			tc.change(bad)
			err := st.Save(bad)
			if err == nil || !strings.Contains(err.Error(), "refusing to write an inconsistent state") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Save: %v, want a refusal naming %s", err, tc.want)
			}
			if after := readStateFiles(t, st.dir); !maps.EqualFunc(before, after, bytes.Equal) {
				t.Error("a refused Save changed the state files")
			}
		})
	}
}
