package state

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// TestSaveAndMarshalRefuseCPUIDsLoadRefuses checks that what Save and
// Marshal accept, Load reads back: CPU ids outside 0-65535 are refused
// with an error naming them, and nothing is written.
func TestSaveAndMarshalRefuseCPUIDsLoadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state func() *State
		want  string
	}{
		{"a negative original CPU", func() *State {
			s := New(cpuset.New(0))
			s.SetAssignment("p", "c", Assignment{Baseline: cpuset.New(-1, 1)})
			s.SetContainer("id", ContainerRef{PodUID: "p", Name: "c"})
			return s
		}, `pod "p" container "c": original names CPUs [-1], outside the CPU ids 0-65535`},
		{"a resized CPU above the largest", func() *State {
			s := New(cpuset.New(0))
			s.SetAssignment("p", "c", Assignment{Baseline: cpuset.New(1), Resized: cpuset.New(1, cpumask.MaxID+1)})
			return s
		}, `pod "p" container "c": resized names CPUs [65536], outside the CPU ids 0-65535`},
		{"a shared pool CPU above the largest", func() *State {
			return New(cpuset.New(0, 70000))
		}, `defaultCpuSet names CPUs [70000], outside the CPU ids 0-65535`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Marshal(tc.state()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Marshal: got error %v, want one containing %q", err, tc.want)
			}
			st := newTestStore(t)
			if err := st.Save(tc.state()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Save: got error %v, want one containing %q", err, tc.want)
			}
			if files, err := stateFiles(osFS{}, st.dir); err != nil || len(files) != 0 {
				t.Errorf("Save wrote %v (err %v) for a state it refused", files, err)
			}
		})
	}
}
