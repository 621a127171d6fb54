package state

import (
	"strings"
	"testing"
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
	resized.DefaultCPUSet = cpus(t, "0,9-15")

	podGone := sampleState(t)
	podGone.DeletePod("pod-a")
	podGone.DefaultCPUSet = cpus(t, "0-5,8-15")

	added := sampleState(t)
	added.SetAssignment("pod-c", "web", Assignment{Original: cpus(t, "8-9")})
	added.SetContainer("c-web", ContainerRef{PodUID: "pod-c", Name: "web"})
	added.SetPodResources("pod-c", PodResources{Resources: Resources{CPUShares: 2048, CPUQuota: -1}})
	added.DefaultCPUSet = cpus(t, "0,10-15")

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
	if _, ok := s.Entries["pod-b"]; ok {
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
