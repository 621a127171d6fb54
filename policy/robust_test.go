package policy_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
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
		if d.Model.Owns(c.ID) || !d.Target.CPUSet().Equals(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)) {
			t.Errorf("%s: owns %v, runs on %s; want the shared pool", c.ID, d.Model.Owns(c.ID), d.Target.CPUSet())
		}
		grow := scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)
		if u, err := pol.UpdateContainer(d.Model, c, grow); err != nil || u.Target != nil || len(u.Updates()) != 0 || u.Model.Owns(c.ID) {
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
		!strings.HasPrefix(err.Error(), "Infeasible: invalidContainerIDError: container id gu of default/other/app already names running container default/gu/app") {
		t.Errorf("creation under a running container's id: %v", err)
	}
	noID := running(t, "noid", "guaranteed", 1000, "")
	noID.ID = ""
	if _, err := pol.CreateContainer(d.Model, noID); err == nil || !strings.HasPrefix(err.Error(), "Infeasible: invalidContainerIDError:") {
		t.Errorf("creation without an id: %v", err)
	}

	first.CPUs = d.Target.CPUSet()
	other.CPUs = cpuset.New(5)
	s := pol.Synchronize(d.Model, nil, []policy.Container{first, other, noID})
	saves(t, pol, "Synchronize", s.Model)
	if a, ok := s.Model.State.Assignment(first.Pod.UID, "app"); !ok || !a.Baseline.Equals(d.Target.CPUSet()) || s.Model.State.NumAssignments() != 1 {
		t.Errorf("after Synchronize: pods with assignments %v; want only gu's, on %s", s.Model.State.PodUIDs(), d.Target.CPUSet())
	}
	if s.Model.Containers.Len() != 1 || !strings.Contains(strings.Join(s.Notes, "\n"), "reports container id gu twice") {
		t.Errorf("tracked %d containers, notes %q", s.Model.Containers.Len(), s.Notes)
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
	if err == nil || !strings.HasPrefix(err.Error(), "Infeasible: invalidContainerIDError: container default/gu/app (id gu) does not hold the exclusive CPUs") {
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
	if !s.Model.Owns(twin.ID) || s.Model.Owns(first.ID) || len(s.Updates()) != 0 {
		t.Errorf("after Synchronize: twin owns %v, first owns %v, updates %v", s.Model.Owns(twin.ID), s.Model.Owns(first.ID), updatesOf(s))
	}
}

// TestPodUpdateOfAnUnknownPod: a pod update for a pod none of whose
// containers the plugin knows records nothing.
func TestPodUpdateOfAnUnknownPod(t *testing.T) {
	pol := eightCPUs(t)
	m := policy.NewModel(pol.NewState())
	pod, _ := scenario.KubeletPod("ghost", "guaranteed")
	d, err := pol.UpdatePodSandbox(m, pod, policy.PodResources{Resources: scenario.KubeletResources("guaranteed", 1000, 1000, 1<<30)})
	if _, ok := d.Model.State.PodResources(pod.UID); err != nil || ok || d.Model != m {
		t.Errorf("an unknown pod's resources were recorded (%v)", err)
	}
	pod.UID = ""
	if d, err := pol.UpdatePodSandbox(m, pod, policy.PodResources{}); err != nil || d.Model != m {
		t.Errorf("a pod update without a UID changed the model (%v)", err)
	}
}

// TestSynchronizeAfterAFailedRequest: the plugin committed a resize and
// died before the runtime applied it (a runtime that honours the failure
// policy fails the request). At Synchronize the container keeps the CPUs
// it runs on when they fit its CPU count, rather than moving to others.
func TestSynchronizeAfterAFailedRequest(t *testing.T) {
	pol := eightCPUs(t)
	for _, tc := range []struct {
		name               string
		assignment         state.Assignment // committed
		runs               string           // applied
		cpus               int64            // its resources (unchanged)
		wantAssigned       string
		wantUpdateOfItself bool
	}{
		{"a shrink never applied", state.Assignment{Baseline: cpuset.New(2, 3, 4)}, "2-4,7", 4, "2-4,7", false},
		{"a growth never applied", state.Assignment{Baseline: cpuset.New(2, 3), Resized: cpuset.New(1, 2, 3, 4)}, "2-3", 2, "2-3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := pol.NewState()
			st.SetAssignment("gu-uid", "app", tc.assignment)
			st.SetDefaultCPUSet(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7).Difference(tc.assignment.Assigned()))
			c := running(t, "gu", "guaranteed", tc.cpus*1000, tc.runs)
			web := running(t, "web", "burstable", 500, "0-7")
			web.CPUs = st.DefaultCPUSet().Difference(c.CPUs)
			d := pol.Synchronize(policy.NewModel(st), nil, []policy.Container{c, web})
			saves(t, pol, "Synchronize", d.Model)
			a, _ := d.Model.State.Assignment("gu-uid", "app")
			if a.Assigned().String() != tc.wantAssigned || !a.Baseline.Equals(tc.assignment.Baseline) {
				t.Errorf("assignment %+v, want %s keeping the baseline %s", a, tc.wantAssigned, tc.assignment.Baseline)
			}
			if _, updated := updatesOf(d)["gu"]; updated != tc.wantUpdateOfItself {
				t.Errorf("updates %v", updatesOf(d))
			}
			appliedOneByOne(t, pol, d, []policy.Container{c, web})
		})
	}
}

// appliedOneByOne applies a Synchronize's updates to the containers'
// cpusets one at a time and fails the test if any moment has a CPU in two
// exclusive sets or in an exclusive and a shared one.
func appliedOneByOne(t *testing.T, pol *policy.Policy, d policy.Decision, containers []policy.Container) {
	t.Helper()
	applied := map[string]cpuset.CPUSet{}
	for _, c := range containers {
		applied[c.ID] = c.CPUs
	}
	for i, u := range d.Updates() {
		applied[u.ContainerID] = u.CPUSet()
		if err := policy.CheckApplied(applied, d.Model.Owns); err != nil {
			t.Fatalf("after update %d of %d (%s → %s): %v", i+1, len(d.Updates()), u.ContainerID, u.CPUSet(), err)
		}
	}
}

// TestSynchronizeOrdersUpdates: whatever the containers run on (pinned
// ones moved behind the plugin's back, the shared ones on the rest),
// Synchronize's updates, applied one at a time, never put a CPU in two
// exclusive sets or in an exclusive and a shared one, unless it says it
// could not order them, which it does for few.
func TestSynchronizeOrdersUpdates(t *testing.T) {
	pol := eightCPUs(t)
	seed := uint64(1)
	rnd := func(n int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	ordered := 0
	for run := 0; run < 500; run++ {
		// A checkpoint with up to three pinned containers.
		st := pol.NewState()
		free := []int{1, 2, 3, 4, 5, 6, 7}
		var containers []policy.Container
		for i := 0; i < 1+rnd(3); i++ {
			n := 1 + rnd(2)
			if len(free) < n+1 {
				break
			}
			cpus := cpuset.New(free[:n]...)
			free = free[n:]
			name := string(rune('a' + i))
			st.SetAssignment(name+"-uid", "app", state.Assignment{Baseline: cpus})
			c := running(t, name, "guaranteed", int64(n)*1000, "")
			containers = append(containers, c)
		}
		st.SetDefaultCPUSet(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7).Difference(st.ExclusiveCPUs()))
		// What the runtime shows: pinned containers on disjoint random
		// CPUs of their size, the shared ones on the rest.
		perm := []int{1, 2, 3, 4, 5, 6, 7}
		for i := len(perm) - 1; i > 0; i-- {
			j := rnd(i + 1)
			perm[i], perm[j] = perm[j], perm[i]
		}
		used := cpuset.New()
		for i := range containers {
			a, _ := st.Assignment(containers[i].Pod.UID, "app")
			containers[i].CPUs = cpuset.New(perm[:a.Baseline.Size()]...)
			perm = perm[a.Baseline.Size():]
			used = used.Union(containers[i].CPUs)
		}
		for i := 0; i < 2; i++ {
			web := running(t, string(rune('v'+i)), "burstable", 500, "")
			web.CPUs = cpuset.New(0, 1, 2, 3, 4, 5, 6, 7).Difference(used)
			containers = append(containers, web)
		}
		d := pol.Synchronize(policy.NewModel(st), nil, containers)
		saves(t, pol, "Synchronize", d.Model)
		if strings.Contains(strings.Join(d.Notes, "\n"), "could not be ordered") {
			continue
		}
		ordered++
		appliedOneByOne(t, pol, d, containers)
	}
	// (What is left are pinned containers that swapped single CPUs: one
	// update each cannot undo that without a CPU free for the swap.)
	if ordered < 450 {
		t.Errorf("only %d of 500 Synchronizes could be ordered", ordered)
	}
}
