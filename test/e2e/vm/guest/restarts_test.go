//go:build vmguest

package guest

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

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
