package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// stateChanges are pairs of states the journal must carry a change
// between, with the number of ops the change takes.
func stateChanges(t *testing.T) []struct {
	name     string
	from, to *State
	ops      int
} {
	resized := sampleState(t)
	resized.SetAssignment("pod-b", "db", Assignment{Original: cpus(t, "6-7"), Resized: cpus(t, "6-8")})
	resized.defaultCPUSet = cpus(t, "0,9-15")

	podGone := sampleState(t)
	podGone.DeletePod("pod-a")
	podGone.defaultCPUSet = cpus(t, "0-5,8-15")

	added := sampleState(t)
	added.SetAssignment("pod-c", "web", Assignment{Original: cpus(t, "8-9")})
	added.SetContainer("c-web", ContainerRef{PodUID: "pod-c", Name: "web"})
	added.SetPodResources("pod-c", PodResources{Resources: Resources{CPUShares: 2048, CPUQuota: -1}})
	added.defaultCPUSet = cpus(t, "0,10-15")

	renamed := sampleState(t)
	renamed.DeleteContainer("c-db")
	renamed.SetContainer("c-db-restarted", ContainerRef{PodUID: "pod-b", Name: "db"})

	escaped := New(cpus(t, "0"))
	escaped.SetAssignment(`p"<&>`+"\u00e9\x00", "c\n\t", Assignment{Original: cpus(t, "1")})
	escaped.SetContainer("id é", ContainerRef{PodUID: `p"<&>` + "\u00e9\x00", Name: "c\n\t"})

	return []struct {
		name     string
		from, to *State
		ops      int
	}{
		{"nothing changes", sampleState(t), sampleState(t), 0},
		{"a container grows", sampleState(t), resized, 2},
		{"a pod goes away", sampleState(t), podGone, 6},
		{"a pod arrives", sampleState(t), added, 4},
		{"a container restarts under a new id", sampleState(t), renamed, 2},
		{"from the empty state", New(cpus(t, "")), sampleState(t), 8},
		{"to the empty state", sampleState(t), New(cpus(t, "")), 8},
		{"names that need escaping", sampleState(t), escaped, 10},
	}
}

func TestDiffThenApplyGivesTheTarget(t *testing.T) {
	for _, tc := range stateChanges(t) {
		t.Run(tc.name, func(t *testing.T) {
			ops := diff(tc.from, tc.to)
			if len(ops) != tc.ops {
				t.Errorf("diff has %d ops, want %d: %+v", len(ops), tc.ops, ops)
			}
			got := tc.from.Clone()
			for _, o := range ops {
				o.apply(got)
			}
			if !got.Equal(tc.to) {
				t.Error("applying the diff does not give the target state")
			}
		})
	}
}

// TestReplayOverAStateThatHoldsTheOpsChangesNothing checks what makes the
// ops absolute: applying them to a state that already holds them, once or
// again, leaves it as it is.
func TestReplayOverAStateThatHoldsTheOpsChangesNothing(t *testing.T) {
	for _, tc := range stateChanges(t) {
		t.Run(tc.name, func(t *testing.T) {
			ops := diff(tc.from, tc.to)
			got := tc.to.Clone()
			for range 2 {
				for _, o := range ops {
					o.apply(got)
				}
				if !got.Equal(tc.to) {
					t.Fatal("replaying the diff over its own result changed the state")
				}
			}
		})
	}
}

func TestDiffIsSortedAndStable(t *testing.T) {
	from, to := sampleState(t), New(cpus(t, "0-15"))
	first := appendPayload(nil, 1, diff(from, to))
	for range 20 { // map order differs from run to run
		if again := appendPayload(nil, 1, diff(from, to)); string(again) != string(first) {
			t.Fatal("the same change encodes to different records")
		}
	}
	ops := diff(from, to)
	for i := 1; i < len(ops); i++ {
		if ops[i-1].kind > ops[i].kind || (ops[i-1].kind == ops[i].kind && ops[i-1].key > ops[i].key) {
			t.Fatalf("ops %d and %d are out of order: %+v", i-1, i, ops)
		}
	}
}

func TestDeleteAssignmentOpTouchesOneKey(t *testing.T) {
	s := sampleState(t)
	op{kind: opDeleteAssignment, key: "pod-b", name: "db"}.apply(s)
	if _, ok := s.Assignment("pod-b", "db"); ok {
		t.Error("the assignment is still there")
	}
	if _, ok := s.entries["pod-b"]; ok {
		t.Error("the pod's empty entry map is still there")
	}
	if _, ok := s.Container("c-db"); !ok {
		t.Error("deleting an assignment also deleted the container id that points at it")
	}
	op{kind: opDeleteAssignment, key: "pod-x", name: "none"}.apply(s) // absent: no panic, no change
}

func TestPayloadRoundTrip(t *testing.T) {
	for _, tc := range stateChanges(t) {
		t.Run(tc.name, func(t *testing.T) {
			ops := diff(tc.from, tc.to)
			payload := appendPayload(nil, 1<<40+7, ops)
			seq, decoded, err := decodePayload(payload)
			if err != nil {
				t.Fatalf("decodePayload: %v", err)
			}
			if seq != 1<<40+7 {
				t.Errorf("sequence %d, want %d", seq, uint64(1<<40+7))
			}
			got := tc.from.Clone()
			for _, o := range decoded {
				o.apply(got)
			}
			if !got.Equal(tc.to) {
				t.Error("the decoded ops do not give the target state")
			}
			if again := appendPayload(nil, seq, decoded); string(again) != string(payload) {
				t.Error("decoded ops encode differently")
			}
		})
	}
}

func TestDecodePayloadRefuses(t *testing.T) {
	valid := appendPayload(nil, 3, []op{{kind: opSetAssignment, key: "p", name: "c",
		assignment: Assignment{Original: cpus(t, "1-2")}}})
	tests := []struct {
		name    string
		payload []byte
		reason  string
	}{
		{"empty", nil, "sequence number: truncated"},
		{"unknown kind", append(appendPayload(nil, 1, nil), 99), "operation 1: unknown kind 99"},
		{"truncated string", valid[:len(valid)-3], "operation 1: truncated"},
		{"string longer than the payload", []byte{1, byte(opDeleteContainer), 50, 'x'}, "operation 1: truncated"},
		{"cpuset that does not parse", append(appendPayload(nil, 1, nil), byte(opSetDefault), 3, '3', '-', '1'),
			`operation 1: defaultCpuSet "3-1" does not parse`},
		{"huge CPU number", append(appendPayload(nil, 1, nil), byte(opSetDefault), 7, '1', '0', '0', '0', '0', '0', '0'),
			"above the largest supported CPU"},
		{"truncated resources", append(appendPayload(nil, 1, nil), byte(opSetPod), 1, 'p', 0x80), "operation 1: truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ops, err := decodePayload(tc.payload)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("decodePayload error %v, want one containing %q", err, tc.reason)
			}
			if ops != nil {
				t.Error("ops returned along with an error")
			}
		})
	}
}

// fingerprint prints every value of a state in a fixed order.
func fingerprint(s *State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "default %s\n", s.defaultCPUSet)
	for _, pod := range slices.Sorted(maps.Keys(s.entries)) {
		for _, name := range slices.Sorted(maps.Keys(s.entries[pod])) {
			a := s.entries[pod][name]
			fmt.Fprintf(&b, "entry %s/%s %s %s\n", pod, name, a.Original, a.Resized)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.containers)) {
		fmt.Fprintf(&b, "id %s %v\n", id, s.containers[id])
	}
	for _, pod := range slices.Sorted(maps.Keys(s.pods)) {
		fmt.Fprintf(&b, "pod %s %v\n", pod, s.pods[pod])
	}
	return b.String()
}

// mutate changes s through one of its methods, at random.
func mutate(r *rand.Rand, s *State) {
	pod, name, id := fmt.Sprintf("pod-%d", r.IntN(4)), fmt.Sprintf("c%d", r.IntN(2)), fmt.Sprintf("id-%d", r.IntN(6))
	switch r.IntN(9) {
	case 0:
		s.SetAssignment(pod, name, Assignment{Original: cpuset.New(r.IntN(16))})
	case 1:
		s.DeleteAssignment(pod, name)
	case 2:
		s.SetContainer(id, ContainerRef{PodUID: pod, Name: name})
	case 3:
		s.DeleteContainer(id)
	case 4:
		s.SetPodResources(pod, PodResources{Resources: Resources{CPUShares: uint64(r.IntN(3))}})
	case 5:
		s.DeletePodResources(pod)
	case 6:
		s.DeletePod(pod)
	case 7:
		s.DeleteContainers()
	case 8:
		s.defaultCPUSet = cpuset.New(r.IntN(16))
	}
}

// TestClonesShareMapsSafely walks random chains of clones changed through
// every method, the clone or the original first: a change never shows in
// the other state, and the journal's diff between them still carries
// every change (it skips maps the two states share).
func TestClonesShareMapsSafely(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	s := New(cpuset.New(0))
	for step := range 3000 {
		c := s.Clone()
		first, second := s, c
		if r.IntN(2) == 0 {
			first, second = c, s
		}
		before := fingerprint(second)
		for range 1 + r.IntN(3) {
			mutate(r, first)
		}
		if got := fingerprint(second); got != before {
			t.Fatalf("step %d: changing one state changed its clone:\nbefore\n%s\nafter\n%s", step, before, got)
		}
		replayed := New(cpuset.New())
		for _, o := range diff(replayed, second) {
			o.apply(replayed)
		}
		for _, o := range diff(second, first) {
			o.apply(replayed)
		}
		if fingerprint(replayed) != fingerprint(first) {
			t.Fatalf("step %d: the diff from the clone's twin does not give the changed state:\n%s\nwant\n%s", step, fingerprint(replayed), fingerprint(first))
		}
		s = first
	}
}
