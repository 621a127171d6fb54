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
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
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
	binDir  = "/vm/bin"
	outDir  = "/tmp/nrivm"
	plugin  = binDir + "/nri-cpumanager"
	online  = "0-15"
	mib     = harness.MiB
	timeout = 10 * time.Minute
)

func TestMain(m *testing.M) {
	if os.Getenv("NRIVM_GUEST") != "1" {
		fmt.Println("skipped: these tests run inside the VM suite's guest only (make e2e-vm)")
		os.Exit(0)
	}
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
// controllers enabled (cgroupfs), or the slices kubepods.slice,
// kubepods-burstable.slice and kubepods-besteffort.slice (systemd).
func makeQoSCgroups() error {
	if driver == harness.SystemdDriver {
		out, err := exec.Command("systemctl", "start", "kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice").CombinedOutput()
		if err != nil {
			return fmt.Errorf("start the kubepods slices: %w: %s", err, out)
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

// cpuManager is the plugin running as an external NRI plugin.
type cpuManager struct {
	*harness.Process
	env      *harness.Env
	config   string
	stateDir string
}

// startPlugin writes the plugin's configuration (reserving CPU 0, the
// default, plus extra lines) and starts it, waiting until it is
// synchronized; it checks that the plugin verifies cpusets in the cgroup
// v2 tree.
func startPlugin(ctx context.Context, t *testing.T, env *harness.Env, extra string) *cpuManager {
	t.Helper()
	dir := t.TempDir()
	m := &cpuManager{env: env, config: filepath.Join(dir, "config.yaml"), stateDir: filepath.Join(dir, "state")}
	cfg := fmt.Sprintf("nriSocket: %s\nstateDir: %s\nmetricsAddress: \"\"\nhealthAddress: \"\"\ndebugAddress: \"\"\nkubeletCheckpoint: \"\"\nlogLevel: debug\nreservedSystemCPUs: \"0\"\n%s\n",
		env.Containerd.NRISocket(), m.stateDir, extra)
	if err := os.WriteFile(m.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start(ctx, t)
	if log, err := m.Log(); err != nil || !verifiesOnV2.MatchString(log) {
		t.Errorf("the plugin does not say that it verifies cpusets in the cgroup v2 tree (%v); its log:\n%s", err, m.LogTail(30))
	}
	t.Cleanup(func() { m.noDrift(t) })
	return m
}

// verifiesOnV2 is the plugin's start-up line when it finds the cgroup v2
// tree and the kubelet's cgroups in it.
var verifiesOnV2 = regexp.MustCompile(`cpusets are verified in their cgroups.*cgroup v2 \(unified\)`)

var synchronized = regexp.MustCompile(`msg=synchronized`)

func (m *cpuManager) start(ctx context.Context, t *testing.T) {
	t.Helper()
	p, err := m.env.StartPlugin(harness.ProcessOptions{Path: plugin, Args: []string{"run", "--config", m.config}})
	if err != nil {
		t.Fatal(err)
	}
	m.Process = p
	if _, err := p.WaitForLog(ctx, synchronized); err != nil {
		t.Fatal(err)
	}
}

// verificationWarnings are the plugin's warnings when it finds a
// container's cgroup cpuset different from what the runtime was given
// (drift), or cannot read or parse it.
var verificationWarnings = []string{
	"differs from what the runtime was given",
	"cannot read the container's cpuset",
	"cannot parse the container's cgroup cpuset",
}

// verificationWarning reports whether a line of the plugin's log is one of
// verificationWarnings. None is tolerated: a cpuset.cpus read between the
// cgroup v2 creation and runc writing it (empty) must not be one either.
func verificationWarning(line string) bool {
	for _, w := range verificationWarnings {
		if strings.Contains(line, w) {
			return true
		}
	}
	return false
}

// noDrift checks that the plugin read every container's cpuset from its
// cgroup and found what it had the runtime apply: on cgroup v2, with
// either driver, it reads the same cpuset.cpus runc (or systemd) wrote.
func (m *cpuManager) noDrift(t *testing.T) {
	t.Helper()
	log, err := m.Log()
	if err != nil {
		t.Error(err)
		return
	}
	for _, line := range strings.Split(log, "\n") {
		if verificationWarning(line) {
			t.Errorf("warning in the plugin's log: %s", line)
		}
	}
}

// checkpoint reads and verifies the plugin's checkpoint.
func (m *cpuManager) checkpoint(t *testing.T) *state.State {
	t.Helper()
	st, err := state.Inspect(m.stateDir, must(online))
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return st
}

// wantAssignment checks a container's checkpoint entry.
func (m *cpuManager) wantAssignment(t *testing.T, c *harness.Container, original, assigned string) {
	t.Helper()
	a, ok := m.checkpoint(t).Assignment(c.Pod.Spec.UID, c.Name)
	if !ok || !a.Baseline.Equals(must(original)) || !a.Assigned().Equals(must(assigned)) {
		t.Errorf("checkpoint entry of %s: %+v (present %v), want original %s, assigned %s", c, a, ok, original, assigned)
	}
}

// runPod starts a pod with one container "app".
func runPod(ctx context.Context, t *testing.T, env *harness.Env, name string, r harness.Resources) *harness.Pod {
	t.Helper()
	pod, err := env.CRI.RunPod(ctx, harness.PodSpec{Name: name, Containers: []harness.ContainerSpec{{Name: "app", Resources: r}}})
	if err != nil {
		t.Fatalf("run pod %s: %v", name, err)
	}
	return pod
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

// cpusOf reads what a container runs on: cpuset.cpus and
// cpuset.cpus.effective of its cgroup v2 directory, and the
// Cpus_allowed_list of a new process and of the container's own command.
type cpusOf struct {
	cpus, effective, newProcess, command cpuset.CPUSet
}

func (c cpusOf) all(want cpuset.CPUSet) bool {
	return c.cpus.Equals(want) && c.effective.Equals(want) && c.newProcess.Equals(want) && c.command.Equals(want)
}

func (c cpusOf) String() string {
	return fmt.Sprintf("cpuset.cpus %q, cpuset.cpus.effective %q, Cpus_allowed_list %q (new process) and %q (the container's command)",
		c.cpus, c.effective, c.newProcess, c.command)
}

func readCPUs(ctx context.Context, c *harness.Container) (cpusOf, *harness.Cgroup, error) {
	var r cpusOf
	cg, err := c.Cgroup(ctx)
	if err != nil {
		return r, nil, err
	}
	if cg.Version() != 2 {
		return r, cg, fmt.Errorf("%s: cgroup %s read as cgroup v%d, want v2", c, cg.Path, cg.Version())
	}
	if r.cpus, err = cg.CPUs(); err != nil {
		return r, cg, err
	}
	if r.effective, err = cg.EffectiveCPUs(); err != nil {
		return r, cg, err
	}
	if r.newProcess, err = c.CPUsAllowed(ctx); err != nil {
		return r, cg, err
	}
	if r.command, err = c.InitCPUsAllowed(ctx); err != nil {
		return r, cg, err
	}
	return r, cg, nil
}

// wantCPUs checks, waiting up to a minute for the plugin's asynchronous
// updates (the emulated guest is slow), that the container runs on
// exactly want: its cgroup's cpuset.cpus and cpuset.cpus.effective, and
// Cpus_allowed_list inside it. It also checks that the cgroup is where the
// boot's driver puts it.
func wantCPUs(ctx context.Context, t *testing.T, c *harness.Container, want string) {
	t.Helper()
	w := must(want)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var got cpusOf
	var cg *harness.Cgroup
	err := harness.Poll(ctx, func() (bool, error) {
		var err error
		got, cg, err = readCPUs(ctx, c)
		return err == nil && got.all(w), err
	})
	if err != nil {
		t.Errorf("%s: %s; want %s everywhere (%v)", c, got, want, err)
	}
	if cg != nil {
		wantDriverPath(t, c, cg.Path)
	}
}

// wantDriverPath checks that a container's cgroup is where the kubelet's
// driver and containerd put it: /kubepods/…/<id> with cgroupfs,
// /kubepods.slice/…/cri-containerd-<id>.scope with systemd.
func wantDriverPath(t *testing.T, c *harness.Container, path string) {
	t.Helper()
	want := c.Pod.CgroupParent + "/" + c.ID
	if driver == harness.SystemdDriver {
		want = c.Pod.CgroupParent + "/cri-containerd-" + c.ID + ".scope"
	}
	if path != want {
		t.Errorf("%s: cgroup %s, want %s (%s driver)", c, path, want, driver)
	}
}

// wantQuota checks cpu.max of the container's cgroup: cpus whole CPUs
// over the kubelet's 100 ms period.
func wantQuota(ctx context.Context, t *testing.T, c *harness.Container, cpus int64) {
	t.Helper()
	cg, err := c.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cg.ReadFile("cpu", "cpu.max")
	if want := fmt.Sprintf("%d 100000", cpus*100000); err != nil || got != want {
		t.Errorf("%s: cpu.max %q (%v), want %q", c, got, err, want)
	}
}

// wantRefused checks that err is the plugin's refusal: its kind and the
// stem of its reason (KEP-5554's names, with or without their "Error"
// suffix, in any case: smtAlignment or the kubelet's SMTAlignmentError),
// and that its explanation mentions detail (a cpuset or a policy's name;
// "" for none).
func wantRefused(t *testing.T, err error, what, kind, reason, detail string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s succeeded, want it refused with %s: %s…", what, kind, reason)
		return
	}
	t.Logf("%s refused: %v", what, err)
	re := regexp.MustCompile(regexp.QuoteMeta(kind+": ") + `(?i:` + regexp.QuoteMeta(reason) + `)(Error)?: .*` + regexp.QuoteMeta(detail))
	if !re.MatchString(err.Error()) {
		t.Errorf("%s: error %q does not match %q", what, err, re)
	}
}

// nodesOf returns the NUMA nodes the CPUs of set belong to, from sysfs.
func nodesOf(t *testing.T, set cpuset.CPUSet) []int {
	t.Helper()
	var nodes []int
	for n := 0; ; n++ {
		data, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", n))
		if os.IsNotExist(err) {
			return nodes
		}
		if err != nil {
			t.Fatal(err)
		}
		if !must(strings.TrimSpace(string(data))).Intersection(set).IsEmpty() {
			nodes = append(nodes, n)
		}
	}
}

// wantOneNode checks that a container's CPUs sit on one NUMA node.
func wantOneNode(ctx context.Context, t *testing.T, c *harness.Container) {
	t.Helper()
	got, _, err := readCPUs(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if nodes := nodesOf(t, got.cpus); len(nodes) != 1 {
		t.Errorf("%s: CPUs %s on NUMA nodes %v, want one", c, got.cpus, nodes)
	}
}
