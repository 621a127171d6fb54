//go:build vmguest

// Package guest holds the tests the VM suite runs inside its guest (see
// package vm): a statically built test binary (go test -c -tags vmguest,
// CGO_ENABLED=0) that drives the guest's containerd through CRI like the
// kubelet, with the plugin as an external NRI plugin, and checks the
// cgroup v2 files and Cpus_allowed_list inside the containers. It runs
// only in the guest (NRIVM_GUEST=1, set by the guest's boot script).
//
// The expected cpusets are exact: the guest's topology is the one the
// host's QEMU layout gives (TestTopology checks it: 16 CPUs, 2 sockets and
// NUMA nodes of 4 cores with adjacent SMT siblings), and they are what the
// plugin's allocator picks on it (the same as `nri-cpumanager simulate`
// of the steps on that topology).
package guest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The boot's settings, from the environment the boot script exports.
var (
	// driver is containerd's cgroup driver: cgroupfs with the busybox
	// init, systemd with systemd as init.
	driver = harness.CgroupDriver(os.Getenv("NRIVM_DRIVER"))
	// isolated is the boot's isolcpus= list ("" without).
	isolated = os.Getenv("NRIVM_ISOLATED")
)

// Where the boot's payload puts things.
const (
	binDir = "/vm/bin"
	// repoRoot holds the repository's files a boot's payload carries
	// (test/scenarios, deploy/).
	repoRoot = "/vm/repo"
	outDir   = "/tmp/nrivm"
	plugin   = binDir + "/nri-cpumanager"
	online   = "0-15"
	mib      = harness.MiB
	timeout  = 10 * time.Minute
)

func TestMain(m *testing.M) {
	if os.Getenv("NRIVM_GUEST") != "1" {
		fmt.Println("skipped: these tests run inside the VM suite's guest only (make e2e-vm)")
		os.Exit(0)
	}
	// Under emulation a CRI call takes seconds: the plugin's asynchronous
	// updates may too.
	e2etest.Wait = time.Minute
	os.Exit(m.Run())
}

// must parses a CPU list.
func must(s string) cpuset.CPUSet {
	set, err := cpuset.Parse(s)
	if err != nil {
		panic(err)
	}
	return set
}

// newEnv starts a throwaway containerd with the boot's cgroup driver and
// the payload's binaries, on a node with the kubelet's QoS cgroups.
func newEnv(t *testing.T) *harness.Env {
	t.Helper()
	return newEnvWith(t, harness.ContainerdOptions{})
}

// newEnvWith is newEnv with containerd options.
func newEnvWith(t *testing.T, opts harness.ContainerdOptions) *harness.Env {
	t.Helper()
	if driver != harness.CgroupfsDriver && driver != harness.SystemdDriver {
		t.Fatalf("NRIVM_DRIVER is %q, want cgroupfs or systemd", driver)
	}
	opts.SystemdCgroup = driver == harness.SystemdDriver
	if err := makeQoSCgroups(); err != nil {
		t.Fatal(err)
	}
	tools := &harness.Tools{
		Containerd: binDir + "/containerd",
		Shim:       binDir + "/containerd-shim-runc-v2",
		Ctr:        binDir + "/ctr",
		Runc:       harness.FindRunc(),
		Busybox:    harness.StaticBusybox(),
	}
	if tools.Runc == "" || tools.Busybox == "" {
		t.Fatalf("the guest's root file system lacks runc (%q) or a static busybox (%q)", tools.Runc, tools.Busybox)
	}
	return harness.NewTestEnv(t, harness.EnvOptions{OutputDir: outDir, Tools: tools, Containerd: opts})
}

// kubeletControllers are the controllers a kubelet enables for its pods.
var kubeletControllers = []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids"}

// makeQoSCgroups makes the QoS cgroups a kubelet makes before any pod,
// with the boot's driver, so that the plugin starts on a node that looks
// like one: kubepods, kubepods/burstable and kubepods/besteffort with the
// controllers enabled (cgroupfs), or the slices kubepods.slice (with the
// cpuset controller), kubepods-burstable.slice and
// kubepods-besteffort.slice (systemd).
func makeQoSCgroups() error {
	if driver == harness.SystemdDriver {
		out, err := exec.Command("systemctl", "start", "kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice").CombinedOutput()
		if err != nil {
			return fmt.Errorf("start the kubepods slices: %w: %s", err, out)
		}
		// The cpuset controller in kubepods.slice, as in the slice a
		// kubelet makes: the kubelet's static policy refuses to start
		// without it ("cgroup [kubepods] has some missing controllers:
		// cpuset"). systemd enables it for a slice that sets AllowedCPUs.
		out, err = exec.Command("systemctl", "set-property", "--runtime", "kubepods.slice", "AllowedCPUs="+online).CombinedOutput()
		if err != nil {
			return fmt.Errorf("enable the cpuset controller in kubepods.slice: %w: %s", err, out)
		}
		return nil
	}
	const root = "/sys/fs/cgroup"
	for _, dir := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
		if err := harness.EnableControllers(filepath.Join(root, filepath.Dir(dir)), kubeletControllers...); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("make the kubelet's QoS cgroup: %w", err)
		}
	}
	return nil
}

// cpuManager is the plugin on this node (e2etest.CPUManager).
type cpuManager struct{ *e2etest.CPUManager }

// startPlugin starts the payload's plugin (reserving CPU 0, the default,
// plus extra configuration lines), waiting until it is synchronized; it
// checks that the plugin verifies cpusets in the cgroup v2 tree, and when
// the test ends that it found no drift.
func startPlugin(ctx context.Context, t *testing.T, env *harness.Env, extra string) *cpuManager {
	t.Helper()
	m := &cpuManager{e2etest.StartCPUManager(ctx, t, env, plugin, must(online), "reservedSystemCPUs: \"0\"\n"+extra)}
	wantVerifiesOnV2(t, m.CPUManager)
	t.Cleanup(func() { m.NoDrift(t) })
	return m
}

// verifiesOnV2 is the plugin's start-up line when it finds the cgroup v2
// tree and the kubelet's cgroups in it.
var verifiesOnV2 = regexp.MustCompile(`cpusets are verified in their cgroups.*cgroup v2 \(unified\)`)

// wantVerifiesOnV2 checks that the plugin says it verifies cpusets in the
// cgroup v2 tree.
func wantVerifiesOnV2(t testing.TB, m *e2etest.CPUManager) {
	t.Helper()
	if log, err := m.Log(); err != nil || !verifiesOnV2.MatchString(log) {
		t.Errorf("the plugin does not say that it verifies cpusets in the cgroup v2 tree (%v); its log:\n%s", err, m.LogTail(30))
	}
}

// wantAssignment checks a container's checkpoint entry.
func (m *cpuManager) wantAssignment(t *testing.T, c *harness.Container, original, assigned string) {
	t.Helper()
	m.WantAssignment(t, c, must(original), must(assigned))
}

// guaranteed is a Guaranteed container of whole CPUs.
func guaranteed(cpus int64) harness.Resources { return harness.Guaranteed(cpus*1000, 64*mib) }

// burstable is the shared pod's container: 250m requested, 500m limit.
var burstable = harness.Resources{CPURequestMilli: 250, CPULimitMilli: 500, MemoryRequest: 32 * mib, MemoryLimit: 64 * mib}

// resize resizes the pod's container "app" to cpus whole CPUs the
// kubelet's way (UpdateContainerResources, then
// UpdatePodSandboxResources).
func resize(ctx context.Context, pod *harness.Pod, cpus int64) error {
	return pod.Resize(ctx, map[string]harness.Resources{"app": guaranteed(cpus)})
}

// wantCPUs is e2etest.WantCPUs (the container's cgroup cpuset and
// effective set, and the CPUs a new process and its command may use) on
// this node: the cgroup is a cgroup v2 directory where the boot's driver
// puts it, and its cpuset.cpus itself was written (not inherited).
func wantCPUs(ctx context.Context, t *testing.T, c *harness.Container, want string) {
	t.Helper()
	cg := e2etest.WantCPUs(ctx, t, c, must(want))
	if cg == nil {
		return
	}
	if cg.Version() != 2 {
		t.Errorf("%s: cgroup %s read as cgroup v%d, want v2", c, cg.Path, cg.Version())
	}
	if cpus, err := cg.CPUs(); err != nil || !cpus.Equals(must(want)) {
		t.Errorf("%s: cpuset.cpus %q (%v), want %s written", c, cpus, err, want)
	}
	e2etest.WantDriverPath(t, c, driver, cg.Path)
}

// exclusiveCPUs waits until the container runs on n CPUs (the same set
// everywhere it is read) and returns them.
func exclusiveCPUs(ctx context.Context, t *testing.T, c *harness.Container, n int) cpuset.CPUSet {
	t.Helper()
	return e2etest.SettledCPUs(ctx, t, c, fmt.Sprintf("%d CPUs", n), func(set cpuset.CPUSet) bool { return set.Size() == n })
}
