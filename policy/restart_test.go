package policy_test

import (
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// TestSynchronizeKeepsStoppedContainersCPUs: after a restart of the
// plugin, the runtime's view decides which assignments stay. A container
// that exited keeps its pod's CPUs while its pod exists (the runtime still
// reports the pod or one of its containers); the assignments of a pod the
// runtime no longer has are dropped.
func TestSynchronizeKeepsStoppedContainersCPUs(t *testing.T) {
	pol := eightCPUs(t)
	m := policy.NewModel(pol.NewState())
	for _, name := range []string{"crashed", "gone", "sandboxonly"} {
		d, err := pol.CreateContainer(m, running(t, name, "guaranteed", 2000, ""))
		if err != nil {
			t.Fatal(err)
		}
		m = d.Model
	}
	crashed := running(t, "crashed", "guaranteed", 2000, "")
	crashed.Exited = true
	sandboxOnly := running(t, "sandboxonly", "guaranteed", 2000, "")
	d := pol.Synchronize(m, []policy.Pod{sandboxOnly.Pod}, []policy.Container{crashed})
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pod  string
		kept bool
	}{
		{"crashed-uid", true},     // an exited container of the pod is reported
		{"sandboxonly-uid", true}, // only the pod's sandbox is reported
		{"gone-uid", false},       // nothing of the pod is
	}
	for _, tc := range tests {
		if _, ok := d.Model.State.Assignment(tc.pod, "app"); ok != tc.kept {
			t.Errorf("%s: assignment kept %v, want %v", tc.pod, ok, tc.kept)
		}
	}
	if got := d.Model.State.DefaultCPUSet().String(); got != "0,3-4,7" {
		t.Errorf("shared pool %s, want 0,3-4,7 (the CPUs of the gone pod back, those of the others kept)", got)
	}
	// The exited container is tracked stopped: its removal is the pod's
	// last, and releases the pod's CPUs.
	d = pol.RemoveContainer(d.Model, crashed)
	if _, ok := d.Model.State.Assignment("crashed-uid", "app"); ok {
		t.Errorf("the removal of the pod's last container kept its assignment")
	}
	if got := d.Model.State.DefaultCPUSet().String(); got != "0-4,7" {
		t.Errorf("shared pool %s after the removal, want 0-4,7", got)
	}
}

// TestStopAndRemoveOfAnotherPodsContainer: events that name a tracked
// container's id under another pod (containerd undoing a creation refused
// for reusing a running container's id) change nothing.
func TestStopAndRemoveOfAnotherPodsContainer(t *testing.T) {
	pol := eightCPUs(t)
	gu := running(t, "gu", "guaranteed", 2000, "")
	d, err := pol.CreateContainer(policy.NewModel(pol.NewState()), gu)
	if err != nil {
		t.Fatal(err)
	}
	m := d.Model
	impostor := running(t, "other", "guaranteed", 1000, "")
	impostor.ID = gu.ID
	for _, step := range []struct {
		name string
		d    policy.Decision
	}{
		{"stop", pol.StopContainer(m, impostor)},
		{"remove", pol.RemoveContainer(m, impostor)},
	} {
		if step.d.Model != m || len(step.d.Others) != 0 {
			t.Errorf("%s of %s under another pod changed the model or sent %v", step.name, gu.ID, step.d.Others)
		}
	}
	if !m.CPUsOf(gu.ID).Equals(cpuset.New(1, 2)) {
		t.Errorf("gu runs on %s, want 1-2", m.CPUsOf(gu.ID))
	}
}
