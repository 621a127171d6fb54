//go:build e2e

package vm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// prepare builds or reuses the assets and binaries and picks the
// accelerator; it skips when the machine cannot run the suite at all.
func prepare(t *testing.T, ctx context.Context) (*Assets, Accel, *Binaries) {
	t.Helper()
	if err := harness.RequireRoot(); err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat("/usr/bin/apt-get"); err != nil {
		t.Skip("the VM suite builds its guest from Debian packages, and this machine has no apt-get")
	}
	start := time.Now()
	a, err := EnsureAssets(ctx, AssetOptions{Logf: t.Logf})
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	bins, err := BuildBinaries(ctx, a, "", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	accel := DetectAccel(ctx, a, Production, filepath.Join(a.Dir, "runs", "kvm-probe"), t.Logf)
	t.Logf("accelerator: %s (%s); assets and binaries ready in %v", accel.Name, accel.Why, time.Since(start).Round(time.Second))
	return a, accel, bins
}

// The guest tests of each boot. The cgroupfs boot proves containerd's
// cgroupfs driver on cgroup v2 (creation, resizes and restarts, whose
// cgroups the driver places and runc writes: the scenario files written
// for this guest, TestRestarts) and the demo; the isolcpus boot, isolated
// CPUs (the scenario files written for the guest with isolcpus=12-15). The systemd driver on cgroup v2 is the kubelet's
// production setup, which TestVMKubernetes boots: its resizes, restarts
// and pod lives write and read the systemd slices, so no boot of this
// suite repeats them. Placement (NUMA, whole cores) is the allocator's,
// read from sysfs: proven on fixture trees of multi-socket SMT machines
// (the integration tests and scenarios, single-numa-node and
// full-pcpus-only included, and make placement-diff against the kubelet);
// TestTopology, in every boot, proves that this guest's real sysfs reads
// as the topology QEMU was given.
const (
	cgroupfsTests = "^(TestTopology|TestScenarios|TestRestarts|TestDemoOnCgroupV2)$"
	isolatedTests = "^(TestTopology|TestScenarios)$"
)

// TestVM boots the production-shaped guest twice and runs the guest tests
// in each: containerd's cgroupfs driver under a busybox init (with the
// demo of make demo), and a boot with isolcpus=12-15 for both
// isolatedCPUs modes.
func TestVM(t *testing.T) {
	ctx := harness.Context(t, 80*time.Minute)
	a, accel, bins := prepare(t, ctx)
	demo, err := DemoFiles(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	scenarios, err := ScenarioFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Run{
		{Name: "cgroupfs", Init: BusyboxInit, Files: demo, Tests: cgroupfsTests},
		{Name: "isolcpus", Init: BusyboxInit, Cmdline: []string{"isolcpus=12-15"}, Env: map[string]string{"NRIVM_ISOLATED": "12-15"},
			Files: scenarios, Tests: isolatedTests},
	} {
		t.Run(r.Name, func(t *testing.T) { execute(t, ctx, a, accel, bins, r) })
	}
}

// execute runs r and reports each guest test as a subtest; a failure
// carries the guest's output.
func execute(t *testing.T, ctx context.Context, a *Assets, accel Accel, bins *Binaries, r Run) {
	t.Helper()
	res, err := Execute(ctx, a, accel, bins, r, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot %s (%s, %s): %v from QEMU's start to its exit; console %s", r.Name, r.Init, accel.Name,
		res.Boot.Elapsed.Round(time.Second), filepath.Join(res.Dir, "console.log"))
	for _, tc := range res.Tests {
		t.Run(tc.Name, func(t *testing.T) {
			switch tc.Result {
			case "FAIL":
				t.Errorf("failed in the guest (%s); see the guest's output below", tc.Elapsed)
			case "SKIP":
				t.Skipf("skipped in the guest: %s", skipReason(res.Output, tc.Name))
			}
		})
	}
	if why := res.Failure(); why != "" || t.Failed() {
		t.Errorf("%s; the guest's output:\n%s\nthe console's last lines:\n%s", why, res.Output, lastLines(res.Boot.Console, 40))
	}
}

// skipReason returns the guest's skip message of a test.
func skipReason(output, name string) string {
	lines := strings.Split(output, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "--- SKIP: "+name+" ") && i+1 < len(lines) {
			return strings.TrimSpace(lines[i+1])
		}
	}
	return ""
}

// TestVMKubernetes boots the guest with systemd as init and runs a real
// single-node Kubernetes v1.36.3 in it, with the plugin as the DaemonSet
// of deploy/ (guest test TestKubernetes: resizes, then a pod's life:
// init containers, sidecars, re-created containers and sandboxes,
// restarts, a Job; then a test device plugin's device on NUMA node 1
// under the kubelet's and the plugin's single-numa-node, and on that
// policy a pod admitted whole at its sandbox and resizes of a pod whose
// container is in crash back-off).
func TestVMKubernetes(t *testing.T) {
	ctx := harness.Context(t, 110*time.Minute)
	a, accel, bins := prepare(t, ctx)
	start := time.Now()
	files, err := KubernetesFiles(ctx, a, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Kubernetes binaries and the plugin's image ready in %v", time.Since(start).Round(time.Second))
	execute(t, ctx, a, accel, bins, Run{Name: "kubernetes", Init: SystemdInit, Files: files,
		Tests: "^(TestTopology|TestKubernetes)$", Timeout: 60 * time.Minute})
}
