//go:build vmguest

package guest

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
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

	web := e2etest.RunPod(ctx, t, env, "web", burstable).Container("app")
	wantCPUs(ctx, t, web, "0-15")

	a := e2etest.RunPod(ctx, t, env, "a", guaranteed(2))
	wantCPUs(ctx, t, a.Container("app"), "2-3") // a whole core: SMT siblings
	e2etest.WantQuota(ctx, t, a.Container("app"), 2)
	wantCPUs(ctx, t, web, "0-1,4-15")

	b := e2etest.RunPod(ctx, t, env, "b", guaranteed(1))
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
		e2etest.WantQuota(ctx, t, app, step.cpus)
		wantCPUs(ctx, t, web, step.shared)
		m.wantAssignment(t, app, "1", step.want)
		if step.cpus == 4 {
			wantOneNode(ctx, t, app)
		}
	}

	err := resize(ctx, a, 1)
	e2etest.WantRefused(t, err, "shrinking a from 2 CPUs to 1", "Infeasible", "prohibitedCPUAllocation", "2-3")
	wantCPUs(ctx, t, a.Container("app"), "2-3")
	e2etest.WantQuota(ctx, t, a.Container("app"), 2)
	wantCPUs(ctx, t, web, "0,4-15")
	m.wantAssignment(t, a.Container("app"), "2-3", "2-3")
}

// TestRestarts: pinned containers, one of them grown, keep their cpusets
// through a SIGKILL and restart of the plugin and a restart of
// containerd, and the plugin still resizes afterwards.
func TestRestarts(t *testing.T) {
	env := newEnv(t)
	ctx := harness.Context(t, timeout)
	m := startPlugin(ctx, t, env, "")

	web := e2etest.RunPod(ctx, t, env, "web", burstable).Container("app")
	a := e2etest.RunPod(ctx, t, env, "a", guaranteed(2)).Container("app")
	b := e2etest.RunPod(ctx, t, env, "b", guaranteed(1))
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
	m.Start(ctx, t)
	want("after the plugin was killed and restarted")

	mark := m.Mark()
	if err := env.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitForLogSince(ctx, mark, e2etest.Synchronized); err != nil {
		t.Fatalf("the plugin did not reconnect after containerd's restart: %v", err)
	}
	want("after containerd was restarted")

	if err := resize(ctx, b, 1); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, b.Container("app"), "1")
	wantCPUs(ctx, t, web, "0,4-15")
}
