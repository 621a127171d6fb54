package state

import (
	"encoding/json"
	"testing"

	"k8s.io/utils/cpuset"
)

// TestLooksConsistentAgreesWithValidate checks Save's quick check against
// validate on every value-level corruption of the corruption cases, and on
// states it must accept.
func TestLooksConsistentAgreesWithValidate(t *testing.T) {
	for _, tc := range corruptionCases(t) {
		var cp checkpointV1
		if json.Unmarshal(tc.file, &cp) != nil {
			continue // not a state
		}
		s, err := cp.toState()
		if err != nil {
			continue // a cpuset that does not parse: never a state
		}
		if s.looksConsistent() && s.validate(nil) != nil {
			t.Errorf("%s: looksConsistent accepts a state validate refuses: %v", tc.name, s.validate(nil))
		}
	}
	accepted := map[string]*State{
		"sample":            sampleState(t),
		"empty":             New(cpuset.New()),
		"a big machine":     benchState(200),
		"shared pool only":  New(cpus(t, "0-15")),
		"resized to itself": stateLine(t, 2)[1],
	}
	for name, s := range accepted {
		if !s.looksConsistent() {
			t.Errorf("%s: looksConsistent refuses a consistent state", name)
		}
	}
	negative := New(cpuset.New())
	negative.SetAssignment("p", "c", Assignment{Original: cpuset.New(-1)})
	if negative.looksConsistent() {
		t.Error("looksConsistent vouches for a CPU id it does not track")
	}
	if err := negative.validateForSave(); err != nil {
		t.Errorf("validateForSave refuses what validate accepts: %v", err)
	}
}
