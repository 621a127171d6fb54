//go:build vmguest

package guest

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// needIsolated skips a test on a boot without the isolcpus= these tests
// are written for.
func needIsolated(t *testing.T) {
	t.Helper()
	if isolated != "12-15" {
		t.Skipf("needs the boot with isolcpus=12-15 (this boot's: %q)", isolated)
	}
	if got := readSys(t, "/sys/devices/system/cpu/isolated"); got != isolated {
		t.Fatalf("the kernel isolates %q, want %s", got, isolated)
	}
}

// TestIsolatedCPUsShared: with isolatedCPUs: shared (the kubelet's way),
// the kernel's isolated CPUs 12-15 are ordinary CPUs: in the shared pool,
// and exclusive containers are placed as on any machine.
func TestIsolatedCPUsShared(t *testing.T) {
	needIsolated(t)
	env := newEnv(t)
	ctx := harness.Context(t, timeout)
	m := startPlugin(ctx, t, env, "isolatedCPUs: shared")

	web := e2etest.RunPod(ctx, t, env, "web", burstable).Container("app")
	wantCPUs(ctx, t, web, "0-15")
	g := e2etest.RunPod(ctx, t, env, "g", guaranteed(2))
	h := e2etest.RunPod(ctx, t, env, "h", guaranteed(1))
	wantCPUs(ctx, t, g.Container("app"), "2-3")
	wantCPUs(ctx, t, h.Container("app"), "1")
	wantCPUs(ctx, t, web, "0,4-15")
	if err := resize(ctx, g, 4); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, g.Container("app"), "2-5")
	wantCPUs(ctx, t, web, "0,6-15")
	m.wantAssignment(t, g.Container("app"), "2-3", "2-5")
}

// TestIsolatedCPUsExclusive: with isolatedCPUs: exclusive, the isolated
// CPUs 12-15 serve exclusive containers only, first: the shared pool is
// the other CPUs; a growth beyond them takes other CPUs and a shrink gives
// those back first.
func TestIsolatedCPUsExclusive(t *testing.T) {
	needIsolated(t)
	env := newEnv(t)
	ctx := harness.Context(t, timeout)
	m := startPlugin(ctx, t, env, "isolatedCPUs: exclusive")

	web := e2etest.RunPod(ctx, t, env, "web", burstable).Container("app")
	wantCPUs(ctx, t, web, "0-11")
	g := e2etest.RunPod(ctx, t, env, "g", guaranteed(2))
	h := e2etest.RunPod(ctx, t, env, "h", guaranteed(1))
	wantCPUs(ctx, t, g.Container("app"), "12-13") // an isolated core
	wantCPUs(ctx, t, h.Container("app"), "14")
	wantCPUs(ctx, t, web, "0-11")
	if err := resize(ctx, g, 4); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, g.Container("app"), "8,12-13,15") // the last isolated CPU, then NUMA node 1
	wantCPUs(ctx, t, web, "0-7,9-11")
	if err := resize(ctx, g, 2); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, g.Container("app"), "12-13")
	wantCPUs(ctx, t, web, "0-11")
	m.wantAssignment(t, g.Container("app"), "12-13", "12-13")
	m.wantAssignment(t, h.Container("app"), "14", "14")
}
