package policy_test

import (
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// TestSynchronizeKeepsStoppedContainersCPUs: after a restart of the
// plugin, the runtime's view decides which assignments stay. A container
// that exited keeps its pod's CPUs while its pod exists (the runtime still
// reports the pod or one of its containers); the assignments of a pod the
// runtime no longer has are dropped. A pod of which nothing runs, whose
// sandbox the runtime may never report removed (a containerd restarted
// since it ran), gives its CPUs back after the orphan timeout, unless the
// Kubernetes API says it is active; with the API, a pod it does not list
// ends at once.
func TestSynchronizeKeepsStoppedContainersCPUs(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pol := eightCoresWith(t, 1, policy.Options{Now: func() time.Time { return now }})
	m := createdRunning(t, pol, policy.NewModel(pol.NewState()), "guaranteed", 2000, "", "crashed", "gone", "sandboxonly")
	crashed := running(t, "crashed", "guaranteed", 2000, "")
	crashed.Exited = true
	sandboxOnly := running(t, "sandboxonly", "guaranteed", 2000, "")
	crashedPod, sandboxPod := crashed.Pod, sandboxOnly.Pod
	crashedPod.SandboxID, sandboxPod.SandboxID = "sb-crashed", "sb-sandboxonly"
	d := pol.Synchronize(m, []policy.Pod{crashedPod, sandboxPod}, []policy.Container{crashed})
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
	// The removal of the exited container, the pod's last, keeps its
	// CPUs: the kubelet may re-create it (a crash loop backs off).
	d = pol.RemoveContainer(d.Model, crashed)
	if _, ok := d.Model.State.Assignment("crashed-uid", "app"); !ok {
		t.Errorf("the removal of the pod's last container dropped its assignment")
	}
	// With the Kubernetes API, an idle pod its synced view no longer lists
	// ends at once, as the kubelet's removeStaleState drops it; one it
	// lists keeps its CPUs, past the orphan timeout too.
	active := func(uid string) bool { return uid == "sandboxonly-uid" }
	withAPI := pol.ExpireOrphans(d.Model, active)
	if _, ok := withAPI.Model.State.Assignment("crashed-uid", "app"); ok {
		t.Errorf("with the API, an idle pod it does not list kept its assignment")
	}
	now = now.Add(policy.DefaultOrphanTimeout - time.Second)
	if e := pol.ExpireOrphans(d.Model, nil); e.Model != d.Model {
		t.Errorf("pods ended before the orphan timeout: %v", e.Notes)
	}
	now = now.Add(time.Second)
	d = pol.ExpireOrphans(d.Model, nil)
	for _, uid := range []string{"crashed-uid", "sandboxonly-uid"} {
		if _, ok := d.Model.State.Assignment(uid, "app"); ok {
			t.Errorf("without the API, idle pod %s kept its assignment past the orphan timeout", uid)
		}
	}
	if got := d.Model.State.DefaultCPUSet().String(); got != "0-7" {
		t.Errorf("shared pool %s after the orphan timeout, want 0-7", got)
	}
	now = now.Add(time.Hour)
	withAPI = pol.ExpireOrphans(withAPI.Model, active)
	if _, ok := withAPI.Model.State.Assignment("sandboxonly-uid", "app"); !ok {
		t.Errorf("a pod the API says is active lost its assignment")
	}
	if got := withAPI.Model.State.DefaultCPUSet().String(); got != "0-4,7" {
		t.Errorf("shared pool %s with the API, want 0-4,7", got)
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
		if step.d.Model != m || len(step.d.Updates()) != 0 {
			t.Errorf("%s of %s under another pod changed the model or sent %v", step.name, gu.ID, step.d.Updates())
		}
	}
	if !m.CPUsOf(gu.ID).Equals(cpuset.New(1, 2)) {
		t.Errorf("gu runs on %s, want 1-2", m.CPUsOf(gu.ID))
	}
}

// TestHoldExpires: CPUs held for a pod whose resize never completes (the
// kubelet never sends the pod's new total, or the spec is never put back)
// return to the shared pool after the hold timeout, not before.
func TestHoldExpires(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	pol := holdPolicy(t, func() time.Time { return now })
	pod, err := scenario.KubeletPod("gu", "guaranteed")
	if err != nil {
		t.Fatal(err)
	}
	pod.Resources = scenario.KubeletResources("guaranteed", 4000, 4000, 0)
	c := policy.Container{ID: "c1", Name: "c1", Pod: pod, Resources: scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)}
	d, err := pol.CreateContainer(policy.NewModel(pol.NewState()), c)
	if err != nil {
		t.Fatal(err)
	}
	c2 := c
	c2.ID, c2.Name = "c2", "c2"
	if d, err = pol.CreateContainer(d.Model, c2); err != nil {
		t.Fatal(err)
	}
	// c2 grows with its pod's total (UpdatePodSandbox first, as the
	// kubelet sends it), then the decrease of a resize whose increase
	// never comes.
	grown := c2
	grown.Resources = scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)
	d, err = pol.UpdatePodSandbox(d.Model, pod, policy.PodResources{Resources: scenario.KubeletResources("guaranteed", 6000, 6000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if d, err = pol.UpdateContainer(d.Model, grown, scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)); err != nil {
		t.Fatal(err)
	}
	grown.Resources = scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)
	if d, err = pol.UpdateContainer(d.Model, grown, scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)); err != nil {
		t.Fatal(err)
	}
	m := pol.Confirm(d.Model, grown.ID).Model
	h, ok := m.State.Hold(pod.UID)
	if !ok || h.CPUs.Size() != 2 || !h.Since.Equal(now) {
		t.Fatalf("hold after the decrease: %+v (present %v), want 2 CPUs since %s", h, ok, now)
	}
	pool := m.State.DefaultCPUSet()
	tests := []struct {
		after time.Duration
		held  bool
	}{
		{policy.DefaultHoldTimeout - time.Second, true},
		{policy.DefaultHoldTimeout, false},
	}
	for _, tc := range tests {
		now = h.Since.Add(tc.after)
		e := pol.ExpireHolds(m)
		if err := pol.CheckInvariants(e.Model); err != nil {
			t.Fatal(err)
		}
		_, held := e.Model.State.Hold(pod.UID)
		if held != tc.held {
			t.Errorf("after %s: held %v, want %v", tc.after, held, tc.held)
		}
		if want := pool.Union(h.CPUs); !tc.held && !e.Model.State.DefaultCPUSet().Equals(want) {
			t.Errorf("after %s: shared pool %s, want %s", tc.after, e.Model.State.DefaultCPUSet(), want)
		}
	}
}

// holdPolicy is a policy on 8 single-threaded cores, CPU 0 reserved, with
// a clock of the test's.
func holdPolicy(t *testing.T, now func() time.Time) *policy.Policy {
	return eightCoresWith(t, 1, policy.Options{Now: now})
}
