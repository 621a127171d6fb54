package policy_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// saves fails the test unless m keeps the invariants and its state passes
// the checkpoint's validation (what every later commit needs).
func saves(t *testing.T, pol *policy.Policy, what string, m *policy.Model) {
	t.Helper()
	if err := pol.CheckInvariants(m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := m.State.Validate(pol.Allocator().Topology().CPUs()); err != nil {
		t.Fatalf("%s: the state would not save: %v", what, err)
	}
}

// TestUntrackableContainersRunShared: a container that asks for whole CPUs
// but has no pod UID or no name cannot be keyed in the checkpoint; it runs
// on the shared pool, at creation and at Synchronize (where it is not
// adopted though its cpuset would fit), its resizes pass through, and the
// node goes on pinning the others.
func TestUntrackableContainersRunShared(t *testing.T) {
	pol := eightCPUs(t)
	noUID := running(t, "nouid", "guaranteed", 2000, "3-4")
	noUID.Pod.UID = ""
	noName := running(t, "noname", "guaranteed", 2000, "5-6")
	noName.Name = ""
	for _, c := range []policy.Container{noUID, noName} {
		if why := policy.Untrackable(c); why == "" {
			t.Fatalf("%+v is trackable", c)
		}
		d, err := pol.CreateContainer(policy.NewModel(pol.NewState()), c)
		if err != nil {
			t.Fatalf("create %s: %v", c.ID, err)
		}
		saves(t, pol, "create "+c.ID, d.Model)
		if d.Model.Owns(c.ID) || !d.Target.CPUs.Equals(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)) {
			t.Errorf("%s: owns %v, runs on %s; want the shared pool", c.ID, d.Model.Owns(c.ID), d.Target.CPUs)
		}
		grow := scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)
		if u, err := pol.UpdateContainer(d.Model, c, grow); err != nil || u.Target != nil || len(u.Others) != 0 || u.Model.Owns(c.ID) {
			t.Errorf("%s: resize %+v %v; want it passed through", c.ID, u, err)
		}
	}

	pinned := running(t, "gu", "guaranteed", 2000, "1-2")
	d := pol.Synchronize(policy.NewModel(pol.NewState()), nil, []policy.Container{noUID, noName, pinned})
	saves(t, pol, "Synchronize", d.Model)
	if d.Model.State.NumAssignments() != 1 || !d.Model.Owns("gu") {
		t.Errorf("pods with assignments after Synchronize: %v", d.Model.State.PodUIDs())
	}
	if got := updatesOf(d); got["nouid"] != "0,3-7" || got["noname"] != "0,3-7" {
		t.Errorf("updates %v; want the untrackable containers on the shared pool 0,3-7", got)
	}
	next, err := pol.CreateContainer(d.Model, running(t, "next", "guaranteed", 1000, ""))
	if err != nil {
		t.Fatalf("a creation after Synchronize: %v", err)
	}
	saves(t, pol, "the creation after", next.Model)
}

// TestDuplicateContainerIDs: a creation under the id of a running container
// is refused (the two could not be told apart); a Synchronize that reports
// an id twice keeps the first and leaves everything else as it would be.
func TestDuplicateContainerIDs(t *testing.T) {
	pol := eightCPUs(t)
	first := running(t, "gu", "guaranteed", 2000, "")
	d, err := pol.CreateContainer(policy.NewModel(pol.NewState()), first)
	if err != nil {
		t.Fatal(err)
	}
	other := running(t, "other", "guaranteed", 1000, "")
	other.ID = first.ID
	if _, err := pol.CreateContainer(d.Model, other); err == nil ||
		!strings.HasPrefix(err.Error(), "Infeasible: invalidContainerID: container id gu of default/other/app already names running container default/gu/app") {
		t.Errorf("creation under a running container's id: %v", err)
	}
	noID := running(t, "noid", "guaranteed", 1000, "")
	noID.ID = ""
	if _, err := pol.CreateContainer(d.Model, noID); err == nil || !strings.HasPrefix(err.Error(), "Infeasible: invalidContainerID:") {
		t.Errorf("creation without an id: %v", err)
	}

	first.CPUs = d.Target.CPUs
	other.CPUs = cpuset.New(5)
	s := pol.Synchronize(d.Model, nil, []policy.Container{first, other, noID})
	saves(t, pol, "Synchronize", s.Model)
	if a, ok := s.Model.State.Assignment(first.Pod.UID, "app"); !ok || !a.Original.Equals(d.Target.CPUs) || s.Model.State.NumAssignments() != 1 {
		t.Errorf("after Synchronize: pods with assignments %v; want only gu's, on %s", s.Model.State.PodUIDs(), d.Target.CPUs)
	}
	if len(s.Model.Containers) != 1 || !strings.Contains(strings.Join(s.Notes, "\n"), "reports container id gu twice") {
		t.Errorf("tracked %d containers, notes %q", len(s.Model.Containers), s.Notes)
	}
}

// TestTwinsNeverShareCPUs: a second live container of one pod and name
// takes the name's CPUs over and the first moves to the shared pool (see
// TestRecreatedContainerKeepsItsCPUs); a resize of the first is then
// refused, as it holds no exclusive CPUs.
func TestTwinsNeverShareCPUs(t *testing.T) {
	pol := eightCPUs(t)
	first := running(t, "gu", "guaranteed", 2000, "")
	d, err := pol.CreateContainer(policy.NewModel(pol.NewState()), first)
	if err != nil {
		t.Fatal(err)
	}
	twin := first
	twin.ID = "gu-twin"
	d2, err := pol.CreateContainer(d.Model, twin)
	if err != nil {
		t.Fatal(err)
	}
	saves(t, pol, "twin", d2.Model)
	if own, shared := d2.Model.CPUsOf(twin.ID), d2.Model.CPUsOf(first.ID); !own.Intersection(shared).IsEmpty() {
		t.Errorf("twins on %s and %s", own, shared)
	}
	_, err = pol.UpdateContainer(d2.Model, first, scenario.KubeletResources("guaranteed", 3000, 3000, 1<<30))
	if err == nil || !strings.HasPrefix(err.Error(), "Infeasible: invalidContainerID: container default/gu/app (id gu) does not hold the exclusive CPUs") {
		t.Errorf("resize of the first twin: %v", err)
	}
	if u, err := pol.UpdateContainer(d2.Model, twin, scenario.KubeletResources("guaranteed", 3000, 3000, 1<<30)); err != nil {
		t.Errorf("resize of the twin that holds the CPUs: %v", err)
	} else {
		saves(t, pol, "resize of the twin", u.Model)
	}
	// A Synchronize keeps the CPUs with the twin that holds them, though
	// the other one's id sorts first.
	first.CPUs, twin.CPUs = d2.Model.CPUsOf(first.ID), d2.Model.CPUsOf(twin.ID)
	s := pol.Synchronize(d2.Model, nil, []policy.Container{first, twin})
	saves(t, pol, "Synchronize", s.Model)
	if !s.Model.Owns(twin.ID) || s.Model.Owns(first.ID) || len(s.Others) != 0 {
		t.Errorf("after Synchronize: twin owns %v, first owns %v, updates %v", s.Model.Owns(twin.ID), s.Model.Owns(first.ID), updatesOf(s))
	}
}

// TestPodUpdateOfAnUnknownPod: a pod update for a pod none of whose
// containers the plugin knows records nothing.
func TestPodUpdateOfAnUnknownPod(t *testing.T) {
	pol := eightCPUs(t)
	m := policy.NewModel(pol.NewState())
	pod, _ := scenario.KubeletPod("ghost", "guaranteed")
	d, err := pol.UpdatePodSandbox(m, pod, state.PodResources{Resources: scenario.KubeletResources("guaranteed", 1000, 1000, 1<<30)})
	if _, ok := d.Model.State.PodResources(pod.UID); err != nil || ok || d.Model != m {
		t.Errorf("an unknown pod's resources were recorded (%v)", err)
	}
	pod.UID = ""
	if d, err := pol.UpdatePodSandbox(m, pod, state.PodResources{}); err != nil || d.Model != m {
		t.Errorf("a pod update without a UID changed the model (%v)", err)
	}
}
