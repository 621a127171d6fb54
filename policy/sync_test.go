package policy_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// eightCPUs is a policy on 8 single-threaded cores, CPU 0 reserved.
func eightCPUs(t *testing.T) *policy.Policy {
	return eightCores(t, 1, false)
}

// eightCores is a policy on 8 single-threaded cores split evenly over
// nodes NUMA nodes (each its own uncore cache), CPU 0 reserved.
func eightCores(t *testing.T, nodes int, alignMemory bool) *policy.Policy {
	return eightCoresWith(t, nodes, policy.Options{AlignMemory: alignMemory})
}

// eightCoresWith is eightCores with the policy options opts (CPU 0
// reserved and in-place resize on whatever opts says).
func eightCoresWith(t *testing.T, nodes int, opts policy.Options) *policy.Policy {
	t.Helper()
	var cpus []cpuallocator.CPUInfo
	for i := 0; i < 8; i++ {
		node := i * nodes / 8
		cpus = append(cpus, cpuallocator.CPUInfo{ID: i, Core: i, NUMANode: node, UncoreCache: node})
	}
	topo, err := cpuallocator.NewTopology(cpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Reserved, opts.InPlaceResize = cpuset.New(0), true
	return policyOn(t, topo, opts)
}

// policyOn is the policy of opts on topo, without static policy or
// topology manager options.
func policyOn(t *testing.T, topo *cpuallocator.Topology, opts policy.Options) *policy.Policy {
	t.Helper()
	alloc, err := cpuallocator.NewAllocator(topo, cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(alloc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func running(t *testing.T, name, qos string, milli int64, cpus string) policy.Container {
	t.Helper()
	pod, err := scenario.KubeletPod(name, qos)
	if err != nil {
		t.Fatal(err)
	}
	set, err := cpuset.Parse(cpus)
	if err != nil {
		t.Fatal(err)
	}
	return policy.Container{ID: name, Name: "app", Pod: pod, Resources: scenario.KubeletResources(qos, milli, milli, 1<<30), CPUs: set}
}

// createdRunning creates a running container of each name (running's, of
// qos, milli and cpus) in turn from m and returns the model after them.
func createdRunning(t *testing.T, pol *policy.Policy, m *policy.Model, qos string, milli int64, cpus string, names ...string) *policy.Model {
	t.Helper()
	for _, name := range names {
		d, err := pol.CreateContainer(m, running(t, name, qos, milli, cpus))
		if err != nil {
			t.Fatal(err)
		}
		m = d.Model
	}
	return m
}

func updatesOf(d policy.Decision) map[string]string {
	out := map[string]string{}
	for _, u := range d.Updates() {
		out[u.ContainerID] = u.CPUSet().String()
	}
	return out
}

// TestSynchronizeRebuildsFromTheRuntime: with no checkpoint, running
// exclusive containers are adopted when their cpuset is valid and re-pinned
// otherwise; shared containers are put on the pool; exited ones are
// ignored; the containers that only lose CPUs are updated first.
func TestSynchronizeRebuildsFromTheRuntime(t *testing.T) {
	pol := eightCPUs(t)
	ctrs := []policy.Container{
		running(t, "adopt", "guaranteed", 2000, "2-3"),
		running(t, "never-pinned", "guaranteed", 2000, "0-7"),
		running(t, "overlaps", "guaranteed", 1000, "3"),
		running(t, "web", "burstable", 500, "0-7"),
		running(t, "gone", "guaranteed", 1000, "4"),
	}
	ctrs[4].Exited = true
	d := pol.Synchronize(policy.NewModel(pol.NewState()), nil, ctrs)
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	st := d.Model.State
	if a, _ := st.Assignment("adopt-uid", "app"); a.Baseline.String() != "2-3" {
		t.Errorf("valid cpuset not adopted: %+v", a)
	}
	for _, name := range []string{"never-pinned", "overlaps"} {
		a, ok := st.Assignment(name+"-uid", "app")
		if !ok || a.Baseline.Intersection(cpuset.New(0, 2, 3)).Size() != 0 {
			t.Errorf("%s: re-pinned to %+v (present %v), want CPUs outside 0,2-3", name, a, ok)
		}
	}
	if _, ok := st.Assignment("gone-uid", "app"); ok {
		t.Errorf("an exited container got an assignment")
	}
	got := updatesOf(d)
	if got["web"] != st.DefaultCPUSet().String() || got["adopt"] != "" {
		t.Errorf("updates %v; want web on the pool %s and nothing for the adopted container", got, st.DefaultCPUSet())
	}
	if first := d.Updates()[0]; first.ContainerID != "never-pinned" && first.ContainerID != "web" {
		t.Errorf("first update %s: the containers that only lose CPUs come first", first.ContainerID)
	}
}

// TestSynchronizeKeepsRepairsAndDrops: a checkpointed container keeps its
// CPUs even if it drifted (it is put back), an entry without a running
// container is dropped.
func TestSynchronizeKeepsRepairsAndDrops(t *testing.T) {
	pol := eightCPUs(t)
	st := pol.NewState()
	st.SetAssignment("kept-uid", "app", state.Assignment{Baseline: cpuset.New(1, 2), Resized: cpuset.New(1, 2, 3)})
	st.SetAssignment("dead-uid", "app", state.Assignment{Baseline: cpuset.New(5)})
	st.SetDefaultCPUSet(cpuset.New(0, 4, 6, 7))
	ctrs := []policy.Container{running(t, "kept", "guaranteed", 3000, "1-4")}
	d := pol.Synchronize(policy.NewModel(st), nil, ctrs)
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	if a, _ := d.Model.State.Assignment("kept-uid", "app"); a.Assigned().String() != "1-3" || a.Baseline.String() != "1-2" {
		t.Errorf("kept entry %+v", a)
	}
	if _, ok := d.Model.State.Assignment("dead-uid", "app"); ok {
		t.Errorf("entry of a container that no longer runs was kept")
	}
	if got := updatesOf(d)["kept"]; got != "1-3" {
		t.Errorf("drifted container updated to %q, want 1-3", got)
	}
	if d.Model.State.DefaultCPUSet().String() != "0,4-7" {
		t.Errorf("shared pool %s, want 0,4-7", d.Model.State.DefaultCPUSet())
	}
}

// TestResizeWithoutBaselineCPUs: an exclusive container the plugin could
// not adopt (no CPU left) runs on the shared pool and its resize is refused
// with getBaselineCPUSetError.
func TestResizeWithoutBaselineCPUs(t *testing.T) {
	pol := eightCPUs(t)
	ctrs := []policy.Container{
		running(t, "big", "guaranteed", 6000, "1-6"),
		running(t, "late", "guaranteed", 2000, "0-7"),
	}
	d := pol.Synchronize(policy.NewModel(pol.NewState()), nil, ctrs)
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	if got := updatesOf(d)["late"]; got != d.Model.SharedPool().String() {
		t.Errorf("unadoptable container runs on %q, want the shared pool %s", got, d.Model.SharedPool())
	}
	late := ctrs[1]
	_, err := pol.UpdateContainer(d.Model, late, scenario.KubeletResources("guaranteed", 1000, 1000, 1<<30))
	if err == nil || !strings.HasPrefix(err.Error(), "Infeasible: getBaselineCPUSetError: the baseline exclusive CPUs of container default/late/app are not known") {
		t.Errorf("resize of an exclusive container without baseline CPUs: %v", err)
	}
}

// TestLentCPUsAreNotHandedOut: CPUs lent to an unsolicited update in flight
// are not free; the refusal is Deferred and names them.
func TestLentCPUsAreNotHandedOut(t *testing.T) {
	pol := eightCPUs(t)
	m := policy.NewModel(pol.NewState()).Lend(cpuset.New(1, 2, 3, 4, 5, 6))
	c := running(t, "gu", "guaranteed", 2000, "")
	_, err := pol.CreateContainer(m, c)
	if err == nil || !strings.HasPrefix(err.Error(), "Deferred: allocateCPUsError") ||
		!strings.Contains(err.Error(), "(free: 7; lent to shared containers by an update in flight: 1-6)") {
		t.Fatalf("create with CPUs lent: %v", err)
	}
	dec, err := pol.CreateContainer(m.Unlend(cpuset.New(1, 2, 3, 4, 5, 6)), c)
	if err != nil || dec.Target.CPUSet().String() != "1-2" {
		t.Errorf("create after the loan: %v %v", dec.Target, err)
	}
}

// TestSynchronizeCatchesUpMissedResizes: resizes that went through while
// the plugin was away are applied by the usual rules at Synchronize; one
// below the baseline CPUs is not, and is noted.
func TestSynchronizeCatchesUpMissedResizes(t *testing.T) {
	pol := eightCPUs(t)
	st := pol.NewState()
	st.SetAssignment("grown-uid", "app", state.Assignment{Baseline: cpuset.New(1, 2)})
	st.SetAssignment("shrunk-uid", "app", state.Assignment{Baseline: cpuset.New(3), Resized: cpuset.New(3, 4, 5)})
	st.SetAssignment("below-uid", "app", state.Assignment{Baseline: cpuset.New(6, 7)})
	st.SetDefaultCPUSet(cpuset.New(0))
	ctrs := []policy.Container{
		running(t, "grown", "guaranteed", 3000, "1-2"),
		running(t, "shrunk", "guaranteed", 2000, "3-5"),
		running(t, "below", "guaranteed", 1000, "6-7"),
	}
	d := pol.Synchronize(policy.NewModel(st), nil, ctrs)
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"grown": "1-2,5", "shrunk": "3-4", "below": "6-7"}
	for name, cpus := range want {
		if a, _ := d.Model.State.Assignment(name+"-uid", "app"); a.Assigned().String() != cpus {
			t.Errorf("%s: assigned %s, want %s", name, a.Assigned(), cpus)
		}
	}
	if d.Updates()[0].ContainerID != "shrunk" {
		t.Errorf("first update is %s: the shrink must come before the growth into its CPUs", d.Updates()[0].ContainerID)
	}
	noted := strings.Join(d.Notes, "\n")
	if !strings.Contains(noted, "default/below/app: was resized to 1 CPUs while the plugin was away: Infeasible: prohibitedCPUAllocationError: container default/below/app cannot shrink to 1 CPUs: its baseline exclusive CPUs 6-7 (2 CPUs) must be kept; it keeps 6-7") {
		t.Errorf("notes:\n%s", noted)
	}
}

// TestSynchronizeCatchUpTakesThePodsHeldCPUs: a container that restarted
// with a larger count while the plugin was away grows, at the Synchronize,
// into the CPUs held for its pod's resize first, and those CPUs are then
// its own and no longer held (a CPU both held and assigned is a state no
// checkpoint accepts: the whole Synchronize would be lost).
func TestSynchronizeCatchUpTakesThePodsHeldCPUs(t *testing.T) {
	pol := eightCPUs(t)
	st := pol.NewState()
	st.SetAssignment("grown-uid", "app", state.Assignment{Baseline: cpuset.New(1, 2)})
	st.SetHold("grown-uid", state.Hold{CPUs: cpuset.New(3, 4), Since: time.Unix(1, 0)})
	st.SetDefaultCPUSet(cpuset.New(0, 5, 6, 7))
	d := pol.Synchronize(policy.NewModel(st), nil, []policy.Container{running(t, "grown", "guaranteed", 3000, "1-2")})
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	if err := d.Model.State.Validate(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)); err != nil {
		t.Fatalf("the Synchronize's state cannot be checkpointed: %v", err)
	}
	a, _ := d.Model.State.Assignment("grown-uid", "app")
	h, held := d.Model.State.Hold("grown-uid")
	if a.Assigned().String() != "1-3" || !held || h.CPUs.String() != "4" {
		t.Errorf("assigned %s, held %s (%v); want 1-3 and 4 still held for the pod", a.Assigned(), h.CPUs, held)
	}
}

// TestSynchronizeKeepsAShrinkTheTopologyPolicyRefuses: a container that
// asks, at a Synchronize, for fewer CPUs than it holds is shrunk as a
// resize would be: under single-numa-node, to CPUs of one NUMA node, and
// when no choice of its CPUs fits one, not at all (it keeps its CPUs, as
// the kubelet keeps its entry after such a refusal), with the refusal
// noted.
func TestSynchronizeKeepsAShrinkTheTopologyPolicyRefuses(t *testing.T) {
	tests := []struct {
		name       string
		held       cpuset.CPUSet
		running    string
		milli      int64
		want, note string
	}{
		{"fits one node", cpuset.New(2, 3, 4, 5), "2-5", 2000, "2-3", "now runs on 2-3"},
		{"fits no node", cpuset.New(1, 2, 3, 4, 5, 6), "1-6", 5000, "1-6",
			"Infeasible: resizeAllocateCPUsError: cannot shrink container default/wide/app from 1-6 to 5 CPUs keeping 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol := eightCoresWith(t, 2, policy.Options{TopologyPolicy: cpuallocator.TopologySingleNUMANode})
			st := pol.NewState()
			st.SetAssignment("wide-uid", "app", state.Assignment{Baseline: cpuset.New(2), Resized: tc.held})
			st.SetDefaultCPUSet(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7).Difference(tc.held))
			d := pol.Synchronize(policy.NewModel(st), nil, []policy.Container{running(t, "wide", "guaranteed", tc.milli, tc.running)})
			if err := pol.CheckInvariants(d.Model); err != nil {
				t.Fatal(err)
			}
			if a, _ := d.Model.State.Assignment("wide-uid", "app"); a.Assigned().String() != tc.want {
				t.Errorf("assigned %s, want %s", a.Assigned(), tc.want)
			}
			if noted := strings.Join(d.Notes, "\n"); !strings.Contains(noted, tc.note) {
				t.Errorf("notes:\n%s\nwant one with %q", noted, tc.note)
			}
		})
	}
}

// TestAlignMemory: with alignMemory an exclusive container's memory nodes
// follow its CPUs' NUMA nodes, across a growth that widens them; shared
// containers' memory nodes are left alone; without it nothing is set.
func TestAlignMemory(t *testing.T) {
	for _, align := range []bool{true, false} {
		pol := eightCores(t, 2, align) // CPUs 0-3 on node 0, 4-7 on node 1
		m := policy.NewModel(pol.NewState())
		want := func(what string, u *policy.Update, cpus, mems string) {
			t.Helper()
			if !align {
				mems = ""
			}
			if u.CPUSet().String() != cpus || u.Mems.String() != mems {
				t.Errorf("alignMemory=%v, %s: cpus %q mems %q, want %q and %q", align, what, u.CPUSet(), u.Mems, cpus, mems)
			}
		}
		gu := running(t, "gu", "guaranteed", 2000, "")
		d, err := pol.CreateContainer(m, gu)
		if err != nil {
			t.Fatal(err)
		}
		want("creation", d.Target, "1-2", "0")
		gu.CPUs = d.Target.CPUSet()
		d, err = pol.UpdateContainer(d.Model, gu, scenario.KubeletResources("guaranteed", 5000, 5000, 1<<30))
		if err != nil {
			t.Fatal(err)
		}
		want("growth onto node 1", d.Target, "1-5", "0-1")
		d, err = pol.CreateContainer(d.Model, running(t, "web", "burstable", 500, ""))
		if err != nil {
			t.Fatal(err)
		}
		want("shared container", d.Target, "0,6-7", "")
	}
}

// TestRecreatedContainerKeepsItsCPUs: a container created again under the
// same pod and name while its predecessor's stop was never seen keeps the
// assignment when it asks for as many CPUs, and grows it, keeping its
// baseline CPUs, when it asks for more.
// The predecessor, which may still run (a twin), loses its claim and is
// sent to the shared pool before the new container starts: no CPU is ever
// in both.
func TestRecreatedContainerKeepsItsCPUs(t *testing.T) {
	pol := eightCPUs(t)
	first := running(t, "gu", "guaranteed", 2000, "")
	d, err := pol.CreateContainer(policy.NewModel(pol.NewState()), first)
	if err != nil {
		t.Fatal(err)
	}
	again := first
	again.ID = "gu-again"
	d2, err := pol.CreateContainer(d.Model, again)
	if err != nil {
		t.Fatal(err)
	}
	if err := pol.CheckInvariants(d2.Model); err != nil {
		t.Fatal(err)
	}
	if !d2.Target.CPUSet().Equals(d.Target.CPUSet()) || !d2.Model.Owns("gu-again") || d2.Model.Owns(first.ID) || d2.Model.Containers.Get(first.ID).Exclusive {
		t.Errorf("re-created container: cpus %s (first had %s), owns %v, predecessor owns %v, predecessor exclusive %v",
			d2.Target.CPUSet(), d.Target.CPUSet(), d2.Model.Owns("gu-again"), d2.Model.Owns(first.ID), d2.Model.Containers.Get(first.ID).Exclusive)
	}
	if len(d2.Updates()) != 1 || d2.Updates()[0].ContainerID != first.ID || !d2.Updates()[0].CPUSet().Equals(d2.Model.SharedPool()) ||
		!d2.Updates()[0].CPUSet().Intersection(d2.Target.CPUSet()).IsEmpty() {
		t.Errorf("updates before the re-created container starts: %+v; want the predecessor on the shared pool %s", d2.Updates(), d2.Model.SharedPool())
	}
	bigger := running(t, "gu", "guaranteed", 3000, "")
	bigger.ID = "gu-bigger"
	d3, err := pol.CreateContainer(d2.Model, bigger)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := d3.Model.State.Assignment("gu-uid", "app"); !a.Baseline.Equals(d.Target.CPUSet()) || a.Resized.Size() != 3 || !d3.Target.CPUSet().Equals(a.Resized) {
		t.Errorf("re-created with 3 CPUs: %+v, target %s; want the baseline %s kept and grown to 3", a, d3.Target.CPUSet(), d.Target.CPUSet())
	}
	if err := pol.CheckInvariants(d3.Model); err != nil {
		t.Error(err)
	}
}

// TestSynchronizeDoesNotAdoptLentCPUs: a Synchronize that comes while an
// unsolicited update lends CPUs to the shared containers does not make
// those CPUs a container's exclusive ones; the container is re-pinned.
func TestSynchronizeDoesNotAdoptLentCPUs(t *testing.T) {
	pol := eightCPUs(t)
	m := policy.NewModel(pol.NewState()).Lend(cpuset.New(2, 3))
	d := pol.Synchronize(m, nil, []policy.Container{running(t, "gu", "guaranteed", 2000, "2-3")})
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	a, ok := d.Model.State.Assignment("gu-uid", "app")
	if !ok || !a.Baseline.Intersection(cpuset.New(2, 3)).IsEmpty() {
		t.Errorf("assignment %+v (present %v), want two CPUs other than the lent 2-3", a, ok)
	}
}

// TestFreeAmong: of the CPUs an unsolicited update carries, only those free
// for exclusive use must be lent — not reserved, exclusive, releasing or
// already lent ones, nor CPUs the machine does not have.
func TestFreeAmong(t *testing.T) {
	pol := eightCPUs(t) // CPU 0 reserved
	d := pol.Synchronize(policy.NewModel(pol.NewState()), nil, []policy.Container{running(t, "gu", "guaranteed", 2000, "2-3")})
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	m := d.Model.Clone() // the test's own model, to set up a release in flight
	m.Releasing["gone"] = cpuset.New(5)
	m = m.Lend(cpuset.New(7))
	for _, tc := range []struct {
		carried []cpuset.CPUSet
		want    string
	}{
		{[]cpuset.CPUSet{cpuset.New(0, 1, 4, 5, 6, 7)}, "1,4,6"},
		{[]cpuset.CPUSet{cpuset.New(1), cpuset.New(1, 2), cpuset.New(6, 9)}, "1,6"},
		{[]cpuset.CPUSet{cpuset.New(2, 3, 5, 7)}, ""},
		{nil, ""},
	} {
		var carried []cpumask.Mask
		for _, set := range tc.carried {
			mask, _ := cpumask.Of(set)
			carried = append(carried, mask)
		}
		if got := pol.FreeAmong(m, carried...); got.String() != tc.want || !got.Equals(pol.Free(m).Intersection(cpuset.New().Union(tc.carried...))) {
			t.Errorf("FreeAmong(%v) = %q, want %q (Free ∩ carried)", tc.carried, got, tc.want)
		}
	}
}

// TestRecreationReleasesThePredecessorsShrink: a container that shrank
// (not confirmed yet) and is created again under the same name, its stop
// never seen, does not keep the CPUs its shrink released out of the shared
// pool: its process is gone, so they go to the shared containers at once.
func TestRecreationReleasesThePredecessorsShrink(t *testing.T) {
	pol := eightCPUs(t) // CPU 0 reserved
	pod, _ := scenario.KubeletPod("gu", "guaranteed")
	two, four := scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30), scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)
	old := policy.Container{ID: "old", Name: "app", Pod: pod, Resources: two}
	m := policy.NewModel(pol.NewState())
	for _, step := range []func(*policy.Model) (policy.Decision, error){
		func(m *policy.Model) (policy.Decision, error) {
			return pol.CreateContainer(m, running(t, "web", "burstable", 500, ""))
		},
		func(m *policy.Model) (policy.Decision, error) { return pol.CreateContainer(m, old) },
		func(m *policy.Model) (policy.Decision, error) { return pol.UpdateContainer(m, old, four) },
		func(m *policy.Model) (policy.Decision, error) {
			grown := old
			grown.Resources = four
			return pol.UpdateContainer(m, grown, two) // released CPUs wait for the confirmation
		},
	} {
		d, err := step(m)
		if err != nil {
			t.Fatal(err)
		}
		m = d.Model
	}
	if len(m.Releasing) != 1 {
		t.Fatalf("releasing %v, want the shrink's CPUs", m.Releasing)
	}
	again := old
	again.ID = "again"
	d, err := pol.CreateContainer(m, again)
	if err != nil {
		t.Fatal(err)
	}
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	if len(d.Model.Releasing) != 0 {
		t.Errorf("the predecessor still holds %v out of the shared pool", d.Model.Releasing)
	}
	// 8 CPUs minus the re-created container's 2: the reserved CPU 0 is
	// shared, and the predecessor's released ones are back.
	if got, want := updatesOf(d)["web"], d.Model.SharedPool().String(); got != want || d.Model.SharedPool().Size() != 6 {
		t.Errorf("the shared container gets %q, want the whole pool of 6 CPUs (%s)", got, want)
	}
}
