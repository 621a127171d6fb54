package policy_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// isolatedNode is a policy on 8 single-threaded cores of one NUMA node
// whose CPUs in isolated are isolated (isolcpus).
// strict sets strict-cpu-reservation.
func isolatedNode(t *testing.T, isolated cpuset.CPUSet, opts policy.Options, strict bool) (*policy.Policy, error) {
	t.Helper()
	var cpus []cpuallocator.CPUInfo
	for i := 0; i < 8; i++ {
		cpus = append(cpus, cpuallocator.CPUInfo{ID: i, Core: i, Isolated: isolated.Contains(i)})
	}
	topo, err := cpuallocator.NewTopology(cpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := cpuallocator.NewAllocator(topo, cpuallocator.StaticPolicyOptions{StrictCPUReservation: strict}, cpuallocator.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts.InPlaceResize = true
	return policy.New(alloc, opts)
}

// TestIsolatedCPUsPoolBase checks which CPUs the shared pool starts from
// and which configurations leave it nothing.
func TestIsolatedCPUsPoolBase(t *testing.T) {
	tests := []struct {
		name     string
		isolated string
		opts     policy.Options
		strict   bool   // strict-cpu-reservation
		pool     string // the shared pool without exclusive containers
		err      string // the refusal to build the policy
	}{
		{"shared: isolated CPUs are in the pool", "2-7", policy.Options{Reserved: cpuset.New(0, 1)}, false, "0-7", ""},
		{"exclusive: the pool is the other CPUs, reserved ones included", "2-7", policy.Options{Reserved: cpuset.New(0, 1), IsolatedExclusive: true}, false, "0-1", ""},
		{"exclusive and strict reservation: the other unreserved CPUs", "4-7", policy.Options{Reserved: cpuset.New(0, 1), IsolatedExclusive: true}, true, "2-3", ""},
		{"exclusive without isolated CPUs changes nothing", "", policy.Options{Reserved: cpuset.New(0), IsolatedExclusive: true}, false, "0-7", ""},
		{"exclusive with isolated reserved CPUs: in neither pool", "0-1,4-7", policy.Options{Reserved: cpuset.New(0, 1), IsolatedExclusive: true}, false, "2-3", ""},
		{"exclusive with every CPU isolated", "0-7", policy.Options{Reserved: cpuset.New(0), IsolatedExclusive: true}, false, "",
			"policy: no CPU is left for the shared pool: isolatedCPUs: exclusive keeps the isolated CPUs 0-7 out of it and every online CPU (0-7) is isolated"},
		{"exclusive and strict reservation of the only other CPUs", "2-7", policy.Options{Reserved: cpuset.New(0, 1), IsolatedExclusive: true}, true, "",
			"policy: no CPU is left for the shared pool: isolatedCPUs: exclusive keeps the isolated CPUs 2-7 out of it and strict-cpu-reservation the reserved CPUs 0-1, which leaves none of the online CPUs 0-7"},
		// The layout issue 12 starts from: before isolated CPUs were in the
		// model, this refused to start.
		{"shared: isolcpus=2-N with reserved 0-1 starts", "2-7", policy.Options{Reserved: cpuset.New(0, 1)}, true, "2-7", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			isolated, _ := cpuset.Parse(tc.isolated)
			pol, err := isolatedNode(t, isolated, tc.opts, tc.strict)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("New: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pol.NewState().DefaultCPUSet().String(); got != tc.pool {
				t.Errorf("shared pool %s, want %s", got, tc.pool)
			}
		})
	}
}

// TestIsolatedCPUsExclusive checks creations, growths, shrinks and
// removals under isolatedCPUs: exclusive: isolated CPUs first, the shared
// pool never holding one, and never emptied by a placement of the other
// CPUs.
func TestIsolatedCPUsExclusive(t *testing.T) {
	pol, err := isolatedNode(t, cpuset.New(4, 5, 6, 7), policy.Options{Reserved: cpuset.New(0), IsolatedExclusive: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	m := policy.NewModel(pol.NewState())
	step := func(what string, d policy.Decision, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := pol.CheckInvariants(d.Model); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		m = d.Model
	}
	web := running(t, "web", "burstable", 500, "0-3")
	d, err := pol.CreateContainer(m, web)
	step("create web", d, err)
	a := running(t, "a", "guaranteed", 2000, "")
	d, err = pol.CreateContainer(m, a)
	step("create a", d, err)
	if got := d.Target.CPUSet().String(); got != "4-5" {
		t.Errorf("a got %s, want the isolated CPUs 4-5", got)
	}
	if d.Updates() != nil {
		t.Errorf("taking isolated CPUs updates %v, want no shared container touched", updatesOf(d))
	}
	// 4 more: the 2 isolated CPUs left, then 2 of the others.
	d, err = pol.UpdateContainer(m, a, withCPUs(6))
	step("grow a", d, err)
	if got := d.Target.CPUSet().String(); got != "1-2,4-7" {
		t.Errorf("a grew to %s, want 1-2,4-7", got)
	}
	if got := m.SharedPool().String(); got != "0,3" {
		t.Errorf("shared pool %s, want 0,3", got)
	}
	// The last unreserved shared CPU is never taken: 0 is reserved.
	b := running(t, "b", "guaranteed", 1000, "")
	d, err = pol.CreateContainer(m, b)
	step("create b", d, err)
	if got := d.Target.CPUSet().String(); got != "3" {
		t.Errorf("b got %s, want 3", got)
	}
	c := running(t, "c", "guaranteed", 1000, "")
	if _, err := pol.CreateContainer(m, c); err == nil || !strings.Contains(err.Error(), "Deferred: allocateCPUsError") {
		t.Errorf("create c with no free CPU: %v, want Deferred: allocateCPUsError", err)
	}
	// A shrink keeps the isolated CPUs and releases the others, which
	// go back to the shared pool once confirmed.
	a.Resources = withCPUs(6)
	d, err = pol.UpdateContainer(m, a, withCPUs(4))
	step("shrink a", d, err)
	if got := d.Target.CPUSet().String(); got != "4-7" {
		t.Errorf("a shrank to %s, want its isolated CPUs 4-7", got)
	}
	step("confirm", pol.Confirm(m, a.ID), nil)
	if got := m.SharedPool().String(); got != "0-2" {
		t.Errorf("shared pool %s after the shrink, want 0-2", got)
	}
	step("stop a", pol.StopContainer(m, a), nil)
	step("remove a", pol.RemoveContainer(m, a), nil)
	if got := m.SharedPool().String(); got != "0-2" {
		t.Errorf("shared pool %s after a left, want 0-2: isolated CPUs never join it", got)
	}
}

func withCPUs(n int64) policy.Resources {
	return scenario.KubeletResources("guaranteed", n*1000, n*1000, 1<<30)
}

// TestIsolatedCPUsModeChangeAtRestart: a checkpoint written under
// isolatedCPUs: shared (its shared pool holds isolated CPUs) is read under
// exclusive: Synchronize keeps the exclusive containers where they are and
// moves the shared ones off the isolated CPUs.
func TestIsolatedCPUsModeChangeAtRestart(t *testing.T) {
	pol, err := isolatedNode(t, cpuset.New(4, 5, 6, 7), policy.Options{Reserved: cpuset.New(0), IsolatedExclusive: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(cpuset.New(0, 1, 4, 5, 6, 7))
	pinned := running(t, "pinned", "guaranteed", 2000, "2-3")
	st.SetAssignment(pinned.Pod.UID, pinned.Name, state.Assignment{Baseline: cpuset.New(2, 3)})
	web := running(t, "web", "burstable", 500, "0-1,4-7")
	d := pol.Synchronize(policy.NewModel(st), nil, []policy.Container{pinned, web})
	if err := pol.CheckInvariants(d.Model); err != nil {
		t.Fatal(err)
	}
	if got := d.Model.State.DefaultCPUSet().String(); got != "0-1" {
		t.Errorf("shared pool %s, want 0-1", got)
	}
	if got := updatesOf(d); len(got) != 1 || got["web"] != "0-1" {
		t.Errorf("updates %v, want web moved to 0-1 only", got)
	}
}

// TestIsolatedCPUsPodGrowth: under isolatedCPUs: exclusive, the pod-level
// admission of a pod of several exclusive containers counts free isolated
// CPUs as costing the shared pool nothing, as the placement does: a pod may
// grow by more than the shared pool holds, into isolated CPUs.
func TestIsolatedCPUsPodGrowth(t *testing.T) {
	pol, err := isolatedNode(t, cpuset.New(2, 3, 4, 5, 6, 7), policy.Options{Reserved: cpuset.New(0), IsolatedExclusive: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	d := scenario.NewPolicyDriver(pol)
	p, _ := scenario.KubeletPod("p", "guaranteed")
	for _, name := range []string{"a", "b"} {
		if err := d.CreateContainer(p, name, withCPUs(1)); err != nil {
			t.Fatal(err)
		}
	}
	// a and b hold 2 and 3; the shared pool is 0-1 (0 is reserved but
	// shared); free are the isolated CPUs 4-7 and CPU 1. Growing the pod
	// by 5 takes 1 CPU from the pool, which keeps 0.
	if _, err := pol.UpdatePodSandbox(d.Model, p, policy.PodResources{Resources: withCPUs(7)}); err != nil {
		t.Errorf("growth into the free isolated CPUs and one shared CPU refused: %v", err)
	}
	if _, err := pol.UpdatePodSandbox(d.Model, p, policy.PodResources{Resources: withCPUs(8)}); err == nil ||
		!strings.HasPrefix(err.Error(), "Infeasible: resizeAllocateCPUsError") {
		t.Errorf("growth to every CPU: %v, want Infeasible: resizeAllocateCPUsError", err)
	}
	if err := d.UpdateContainer(p, "a", withCPUs(5)); err != nil {
		t.Fatalf("a container-level growth into the isolated CPUs: %v", err)
	}
	if cpus, _ := d.ContainerCPUs(p, "a"); cpus.String() != "2,4-7" {
		t.Errorf("a grew to %s, want 2,4-7", cpus)
	}
	if got := d.Model.SharedPool().String(); got != "0-1" {
		t.Errorf("shared pool %s, want 0-1", got)
	}
}
