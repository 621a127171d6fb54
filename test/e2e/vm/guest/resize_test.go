//go:build vmguest

package guest

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// TestCreateGrowShrink: with CPU 0 reserved, a 2-CPU container is created
// on a whole core; a 1-CPU one grows 1 → 4 → 8 keeping its CPUs (staying
// on its NUMA node while the node can hold it) and shrinks back to its
// original CPU; the first cannot shrink below its baseline CPUs. A
// Burstable container follows as the shared pool.
func TestCreateGrowShrink(t *testing.T) {
	env := newEnv(t)
	ctx := harness.Context(t, timeout)
	m := startPlugin(ctx, t, env, "")

	web := runPod(ctx, t, env, "web", burstable).Container("app")
	wantCPUs(ctx, t, web, "0-15")

	a := runPod(ctx, t, env, "a", guaranteed(2))
	wantCPUs(ctx, t, a.Container("app"), "2-3") // a whole core: SMT siblings
	wantQuota(ctx, t, a.Container("app"), 2)
	wantCPUs(ctx, t, web, "0-1,4-15")

	b := runPod(ctx, t, env, "b", guaranteed(1))
	app := b.Container("app")
	wantCPUs(ctx, t, app, "1") // the free thread of the reserved CPU's core
	wantCPUs(ctx, t, web, "0,4-15")

	for _, step := range []struct {
		cpus         int64
		want, shared string
	}{
		{4, "1,4-6", "0,7-15"},   // keeps CPU 1, stays on NUMA node 0
		{8, "1,4-10", "0,11-15"}, // keeps 1,4-6; node 0 is full: on to node 1
		{1, "1", "0,4-15"},       // back to the original CPU
	} {
		if err := resize(ctx, b, step.cpus); err != nil {
			t.Fatalf("resize b to %d CPUs: %v", step.cpus, err)
		}
		wantCPUs(ctx, t, app, step.want)
		wantQuota(ctx, t, app, step.cpus)
		wantCPUs(ctx, t, web, step.shared)
		m.wantAssignment(t, app, "1", step.want)
		if step.cpus == 4 {
			wantOneNode(ctx, t, app)
		}
	}

	err := resize(ctx, a, 1)
	wantRefused(t, err, "shrinking a from 2 CPUs to 1", "Infeasible", "prohibitedCPUAllocation", "2-3")
	wantCPUs(ctx, t, a.Container("app"), "2-3")
	wantQuota(ctx, t, a.Container("app"), 2)
	wantCPUs(ctx, t, web, "0,4-15")
	m.wantAssignment(t, a.Container("app"), "2-3", "2-3")
}

// TestNUMAAwareGrowth: under topologyManagerPolicy single-numa-node, two
// 4-CPU containers land on one NUMA node each and grow within it; a growth
// that no NUMA node can hold is refused and changes nothing.
func TestNUMAAwareGrowth(t *testing.T) {
	env := newEnv(t)
	ctx := harness.Context(t, timeout)
	m := startPlugin(ctx, t, env, "topologyManagerPolicy: single-numa-node")

	web := runPod(ctx, t, env, "web", burstable).Container("app")
	c := runPod(ctx, t, env, "c", guaranteed(4))
	d := runPod(ctx, t, env, "d", guaranteed(4))
	wantCPUs(ctx, t, c.Container("app"), "2-5")  // NUMA node 0, whole cores
	wantCPUs(ctx, t, d.Container("app"), "8-11") // NUMA node 1
	wantCPUs(ctx, t, web, "0-1,6-7,12-15")

	for _, step := range []struct {
		pod          *harness.Pod
		cpus         int64
		want, shared string
	}{
		{c, 7, "1-7", "0,12-15"}, // all of node 0 but the reserved CPU
		{d, 8, "8-15", "0"},      // all of node 1
		{d, 4, "8-11", "0,12-15"},
	} {
		if err := resize(ctx, step.pod, step.cpus); err != nil {
			t.Fatalf("resize %s to %d CPUs: %v", step.pod.Spec.Name, step.cpus, err)
		}
		wantCPUs(ctx, t, step.pod.Container("app"), step.want)
		wantOneNode(ctx, t, step.pod.Container("app"))
		wantCPUs(ctx, t, web, step.shared)
	}

	err := resize(ctx, c, 8)
	wantRefused(t, err, "growing c to 8 CPUs", "Infeasible", "resizeAllocateCPUs", "single-numa-node")
	wantCPUs(ctx, t, c.Container("app"), "1-7")
	wantQuota(ctx, t, c.Container("app"), 7)
	wantCPUs(ctx, t, web, "0,12-15")
	m.wantAssignment(t, c.Container("app"), "2-5", "1-7")
}

// TestFullPCPUsOnly: with full-pcpus-only, containers get whole cores of
// real SMT siblings; an odd CPU count is refused at creation and at
// resize.
func TestFullPCPUsOnly(t *testing.T) {
	env := newEnv(t)
	ctx := harness.Context(t, timeout)
	m := startPlugin(ctx, t, env, "cpuManagerPolicyOptions: {full-pcpus-only: \"true\"}")

	web := runPod(ctx, t, env, "web", burstable).Container("app")
	odd, err := env.CRI.RunPod(ctx, harness.PodSpec{Name: "odd", Containers: []harness.ContainerSpec{{Name: "app", Resources: guaranteed(3)}}})
	wantRefused(t, err, "creating a 3-CPU container", "Infeasible", "smtAlignment", "")
	if odd != nil && len(odd.Containers) != 0 {
		t.Errorf("the 3-CPU container was created")
	}

	e := runPod(ctx, t, env, "e", guaranteed(2))
	app := e.Container("app")
	wantCPUs(ctx, t, app, "2-3")
	if got := readSys(t, "/sys/devices/system/cpu/cpu2/topology/thread_siblings_list"); got != "2-3" {
		t.Errorf("the pinned CPUs 2-3 are not one core: cpu2's siblings are %s", got)
	}
	wantRefused(t, resize(ctx, e, 3), "growing e to 3 CPUs", "Infeasible", "smtAlignment", "")
	wantCPUs(ctx, t, app, "2-3")

	if err := resize(ctx, e, 4); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, app, "2-5") // two whole cores
	wantCPUs(ctx, t, web, "0-1,6-15")
	if err := resize(ctx, e, 2); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, app, "2-3")
	wantCPUs(ctx, t, web, "0-1,4-15")
	m.wantAssignment(t, app, "2-3", "2-3")
}

// TestRestarts: pinned containers, one of them grown, keep their cpusets
// through a SIGKILL and restart of the plugin and a restart of
// containerd, and the plugin still resizes afterwards.
func TestRestarts(t *testing.T) {
	env := newEnv(t)
	ctx := harness.Context(t, timeout)
	m := startPlugin(ctx, t, env, "")

	web := runPod(ctx, t, env, "web", burstable).Container("app")
	a := runPod(ctx, t, env, "a", guaranteed(2)).Container("app")
	b := runPod(ctx, t, env, "b", guaranteed(1))
	if err := resize(ctx, b, 4); err != nil {
		t.Fatal(err)
	}
	want := func(when string) {
		t.Helper()
		t.Logf("checking the cpusets %s", when)
		wantCPUs(ctx, t, a, "2-3")
		wantCPUs(ctx, t, b.Container("app"), "1,4-6")
		wantCPUs(ctx, t, web, "0,7-15")
		m.wantAssignment(t, a, "2-3", "2-3")
		m.wantAssignment(t, b.Container("app"), "1", "1,4-6")
	}
	want("before the restarts")

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	m.start(ctx, t)
	want("after the plugin was killed and restarted")

	mark := m.Mark()
	if err := env.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitForLogSince(ctx, mark, synchronized); err != nil {
		t.Fatalf("the plugin did not reconnect after containerd's restart: %v", err)
	}
	want("after containerd was restarted")

	if err := resize(ctx, b, 1); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, b.Container("app"), "1")
	wantCPUs(ctx, t, web, "0,4-15")
}
