//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// synchronized is the plugin's log line once it is registered and
// synchronized with containerd.
var synchronized = regexp.MustCompile(`msg=synchronized`)

// cpuManager is the nri-cpumanager binary running as an external NRI
// plugin, the DaemonSet way.
type cpuManager struct {
	*harness.Process
	env      *harness.Env
	mach     *machine
	bin      string
	config   string
	stateDir string
}

// startCPUManager builds and starts the plugin against env's containerd on
// the machine mach with the given extra configuration lines, and waits
// until it is synchronized.
func startCPUManager(ctx context.Context, t *testing.T, env *harness.Env, mach *machine, extraConfig string) *cpuManager {
	t.Helper()
	bin, err := harness.GoBuild(ctx, "", "./cmd/nri-cpumanager")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := &cpuManager{env: env, mach: mach, bin: bin, config: filepath.Join(dir, "config.yaml"), stateDir: filepath.Join(dir, "state")}
	cfg := fmt.Sprintf("nriSocket: %s\nstateDir: %s\nmetricsAddress: \"\"\nhealthAddress: \"\"\nkubeletCheckpoint: \"\"\nlogLevel: debug\n%s\n",
		env.Containerd.NRISocket(), m.stateDir, extraConfig)
	if err := os.WriteFile(m.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start(ctx, t)
	return m
}

// reserve returns the configuration line that reserves cpus for the
// system.
func reserve(cpus cpuset.CPUSet) string {
	return fmt.Sprintf("reservedSystemCPUs: %q", cpus.String())
}

func (m *cpuManager) start(ctx context.Context, t *testing.T) {
	t.Helper()
	p, err := m.env.StartPlugin(harness.ProcessOptions{Path: m.bin, Args: []string{"run", "--config", m.config}})
	if err != nil {
		t.Fatal(err)
	}
	m.Process = p
	if _, err := p.WaitForLog(ctx, synchronized); err != nil {
		t.Fatal(err)
	}
}

// checkpoint reads and verifies the checkpoint the plugin keeps.
func (m *cpuManager) checkpoint(t *testing.T) *state.State {
	t.Helper()
	return readCheckpoint(t, m.stateDir, m.mach.cpus)
}

// readCheckpoint reads and verifies the checkpoint in a plugin's state
// directory.
func readCheckpoint(t *testing.T, dir string, online cpuset.CPUSet) *state.State {
	t.Helper()
	st, err := state.Inspect(dir, online)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return st
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

func burstable(milli int64) harness.Resources {
	return harness.Resources{CPURequestMilli: milli, CPULimitMilli: 2 * milli, MemoryRequest: 32 * harness.MiB, MemoryLimit: 64 * harness.MiB}
}

// waitCPUs waits a few seconds (unsolicited updates are asynchronous) for
// the container's cgroup cpuset (its cpuset.cpus, or on cgroup v2 the set
// it inherits while none was written), the kernel's effective set of the
// cgroup and the CPUs a new process inside it may use to be the same set
// and satisfy ok. It returns the last ones read.
func waitCPUs(ctx context.Context, c *harness.Container, ok func(cpuset.CPUSet) bool) (cgroupCPUs, allowed cpuset.CPUSet, err error) {
	pollCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = harness.Poll(pollCtx, func() (bool, error) {
		cg, err := c.Cgroup(ctx)
		if err != nil {
			return false, err
		}
		if cgroupCPUs, err = cg.AllowedCPUs(); err != nil {
			return false, err
		}
		effective, err := cg.EffectiveCPUs()
		if err != nil {
			return false, err
		}
		if allowed, err = c.CPUsAllowed(ctx); err != nil {
			return false, err
		}
		return cgroupCPUs.Equals(allowed) && effective.Equals(allowed) && ok(cgroupCPUs), nil
	})
	return cgroupCPUs, allowed, err
}

// wantCPUs checks, within a few seconds, that the container's cgroup
// cpuset and the CPUs a new process inside it may use are want.
func wantCPUs(ctx context.Context, t *testing.T, c *harness.Container, want cpuset.CPUSet) {
	t.Helper()
	if cgroupCPUs, allowed, err := waitCPUs(ctx, c, want.Equals); err != nil {
		t.Errorf("%s: cgroup cpuset %q, Cpus_allowed_list %q, want %q (%v)", c, cgroupCPUs, allowed, want, err)
	}
}

// wantPinned checks that c, a Guaranteed container of one whole CPU created
// while the CPUs of available were free for exclusive use, is pinned to one
// of them (in its cgroup, in the CPUs a process inside it may use, and as
// its baseline CPUs in the checkpoint), and returns it. Where the machine's
// topology lets the tests predict the plugin's choice (every machine with
// one socket and one NUMA node), it must be that CPU.
func (m *cpuManager) wantPinned(ctx context.Context, t *testing.T, c *harness.Container, available cpuset.CPUSet) cpuset.CPUSet {
	t.Helper()
	got, ok := m.mach.oneExclusive(available)
	if ok {
		wantCPUs(ctx, t, c, got)
	} else {
		t.Logf("%s: which CPU of %s the plugin picks is not predicted on this machine (%s); checking that it is one of them", c, available, m.mach.unpredictable)
		cgroupCPUs, allowed, err := waitCPUs(ctx, c, func(s cpuset.CPUSet) bool { return s.Size() == 1 && s.IsSubsetOf(available) })
		if err != nil {
			t.Fatalf("%s: cgroup cpuset %q, Cpus_allowed_list %q, want one CPU of %s (%v)", c, cgroupCPUs, allowed, available, err)
		}
		got = cgroupCPUs
	}
	if a, ok := m.checkpoint(t).Assignment(c.Pod.Spec.UID, c.Name); !ok || !a.Baseline.Equals(got) || !a.Assigned().Equals(got) {
		t.Errorf("checkpoint entry of %s: %+v (present %v), want original %s", c, a, ok, got)
	}
	return got
}

// unpinnedCPUs returns the CPUs a container runs on when no plugin sets its
// cpuset: those of the root cpuset cgroup, every online CPU.
func unpinnedCPUs(t *testing.T) cpuset.CPUSet {
	t.Helper()
	root, err := harness.NewCgroup("/")
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := root.EffectiveCPUs()
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}

func wantQuota(t *testing.T, ctx context.Context, c *harness.Container, want int64) {
	t.Helper()
	cg, err := c.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cg.Values()
	if err != nil {
		t.Fatal(err)
	}
	if v.CPUQuota != want {
		t.Errorf("%s: cpu.cfs_quota_us %d, want %d", c, v.CPUQuota, want)
	}
}

// Every scenario below reserves the machine's first CPU for the system
// (CPU 0; the plugin's default) unless it says otherwise, and derives the
// cpusets it expects from the machine's CPUs: on a 2-CPU machine the pinned
// container gets CPU 1 and the shared pool keeps CPU 0.

// needReservedAndPinned is what a scenario with a reserved CPU and a pinned
// one needs.
const needReservedAndPinned = "one reserved for the system, which stays in the shared pool, and one to pin"

// TestSharedPoolFollowsPinnedContainer: a shared container shrinks when a
// 1-CPU Guaranteed container is pinned and grows back when it goes; a
// fractional Guaranteed container stays on the shared pool.
func TestSharedPoolFollowsPinnedContainer(t *testing.T) {
	mach := readMachine(t)
	mach.needCPUs(t, 2, needReservedAndPinned)
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	reserved := mach.firstCPU()
	m := startCPUManager(ctx, t, env, mach, reserve(reserved))

	web := runPod(ctx, t, env, "web", burstable(250)).Container("app")
	wantCPUs(ctx, t, web, mach.cpus)
	pinned := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	exclusive := m.wantPinned(ctx, t, pinned.Container("app"), mach.cpus.Difference(reserved))
	shared := mach.cpus.Difference(exclusive)
	wantCPUs(ctx, t, web, shared)
	frac := runPod(ctx, t, env, "fractional", harness.Guaranteed(500, 64*harness.MiB)).Container("app")
	wantCPUs(ctx, t, frac, shared)

	st := m.checkpoint(t)
	if a, ok := st.Assignment(pinned.Spec.UID, "app"); !ok || !a.Baseline.Equals(exclusive) {
		t.Errorf("checkpoint entry of the pinned container: %+v (present %v), want original %s", a, ok, exclusive)
	}
	if !st.DefaultCPUSet().Equals(shared) {
		t.Errorf("checkpoint shared pool %q, want %s", st.DefaultCPUSet(), shared)
	}

	if err := pinned.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, web, mach.cpus)
	wantCPUs(ctx, t, frac, mach.cpus)
	if st := m.checkpoint(t); st.NumAssignments() != 0 || !st.DefaultCPUSet().Equals(mach.cpus) {
		t.Errorf("checkpoint after removal: %d entries, shared pool %q, want no entry and %s", st.NumAssignments(), st.DefaultCPUSet(), mach.cpus)
	}
}

// TestGrowthThatWouldEmptyTheSharedPoolIsRefused: without reserved CPUs, a
// 1-CPU container cannot grow to every CPU of the machine; the CRI call
// fails with the plugin's message and nothing changes.
func TestGrowthThatWouldEmptyTheSharedPoolIsRefused(t *testing.T) {
	mach := readMachine(t)
	mach.needCPUs(t, 2, "one to pin and one left in the shared pool")
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	m := startCPUManager(ctx, t, env, mach, reserve(cpuset.New()))

	web := runPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinned := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	app := pinned.Container("app")
	exclusive := m.wantPinned(ctx, t, app, mach.cpus)
	shared := mach.cpus.Difference(exclusive)
	wantCPUs(ctx, t, web, shared)

	every := int64(mach.cpus.Size())
	err := pinned.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(every*1000, 64*harness.MiB)})
	if err == nil {
		t.Fatalf("growing to every CPU (%d) succeeded", every)
	}
	t.Logf("the refused CRI call says: %v", err)
	for _, want := range []string{"Infeasible: resizeAllocateCPUsError", "would leave the shared pool empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	wantCPUs(ctx, t, app, exclusive)
	wantQuota(t, ctx, app, 100000)
	wantCPUs(ctx, t, web, shared)
	if a, _ := m.checkpoint(t).Assignment(pinned.Spec.UID, "app"); !a.Assigned().Equals(exclusive) {
		t.Errorf("checkpoint: %+v, want the container still on CPU %s", a, exclusive)
	}
}

// TestMemoryOnlyResizeKeepsCPUs: a memory resize of a pinned container
// passes and keeps its cpuset; UpdatePodSandboxResources is accepted and
// the new pod totals are recorded.
func TestMemoryOnlyResizeKeepsCPUs(t *testing.T) {
	mach := readMachine(t)
	mach.needCPUs(t, 2, needReservedAndPinned)
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	reserved := mach.firstCPU()
	m := startCPUManager(ctx, t, env, mach, reserve(reserved))

	pinned := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	app := pinned.Container("app")
	exclusive := m.wantPinned(ctx, t, app, mach.cpus.Difference(reserved))
	if err := pinned.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(1000, 128*harness.MiB)}); err != nil {
		t.Fatalf("memory resize: %v", err)
	}
	wantCPUs(ctx, t, app, exclusive)
	cg, err := app.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cg.Values(); err != nil || v.MemoryLimit != 128*harness.MiB {
		t.Errorf("memory limit %d (%v), want 128Mi", v.MemoryLimit, err)
	}
	st := m.checkpoint(t)
	if a, ok := st.Assignment(pinned.Spec.UID, "app"); !ok || !a.Baseline.Equals(exclusive) || !a.Assigned().Equals(exclusive) {
		t.Errorf("checkpoint entry after the memory resize: %+v (present %v), want original %s and nothing more", a, ok, exclusive)
	}
	pr, ok := st.PodResources(pinned.Spec.UID)
	if !ok || pr.Resources.MemoryLimit != 128*harness.MiB {
		t.Errorf("pod resources recorded from UpdatePodSandboxResources: %+v (present %v), want memory 128Mi", pr, ok)
	}
}

// TestPluginKilledAndRestartedKeepsCPUs kills the plugin with SIGKILL,
// starts a shared container while it is down (it gets every CPU), and
// restarts it: every pinned cpuset is kept and the new container is put
// back on the shared pool.
func TestPluginKilledAndRestartedKeepsCPUs(t *testing.T) {
	mach := readMachine(t)
	mach.needCPUs(t, 2, needReservedAndPinned)
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	reserved := mach.firstCPU()
	m := startCPUManager(ctx, t, env, mach, reserve(reserved))

	web := runPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinnedPod := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	pinned := pinnedPod.Container("app")
	exclusive := m.wantPinned(ctx, t, pinned, mach.cpus.Difference(reserved))
	shared := mach.cpus.Difference(exclusive)
	wantCPUs(ctx, t, web, shared)

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	late := runPod(ctx, t, env, "late", burstable(100)).Container("app")
	wantCPUs(ctx, t, late, unpinnedCPUs(t))

	m.start(ctx, t)
	wantCPUs(ctx, t, pinned, exclusive)
	wantCPUs(ctx, t, web, shared)
	wantCPUs(ctx, t, late, shared)
	st := m.checkpoint(t)
	if a, _ := st.Assignment(pinnedPod.Spec.UID, "app"); !a.Baseline.Equals(exclusive) {
		t.Errorf("checkpoint after restart: %+v, want original %s", a, exclusive)
	}
	if !st.DefaultCPUSet().Equals(shared) {
		t.Errorf("checkpoint shared pool after restart %q, want %s", st.DefaultCPUSet(), shared)
	}
}

// TestContainerdRestartKeepsCPUs restarts containerd under running pods:
// the plugin reconnects and synchronizes, every cpuset is kept. A pod that
// existed before the restart never gets StopPodSandbox or RemovePodSandbox
// events: when it is removed, it keeps its CPUs (the plugin cannot tell it
// from a pod whose containers crash-loop; the API server, or else the
// orphan timeout, ends it, docs/design.md "A pod's life"), and the
// plugin's next synchronization, which no longer lists it, gives them
// back at once.
func TestContainerdRestartKeepsCPUs(t *testing.T) {
	mach := readMachine(t)
	mach.needCPUs(t, 2, needReservedAndPinned)
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	reserved := mach.firstCPU()
	m := startCPUManager(ctx, t, env, mach, reserve(reserved))

	web := runPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinnedPod := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	pinned := pinnedPod.Container("app")
	exclusive := m.wantPinned(ctx, t, pinned, mach.cpus.Difference(reserved))

	mark := m.Mark()
	if err := env.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitForLogSince(ctx, mark, synchronized); err != nil {
		t.Fatalf("the plugin did not reconnect: %v", err)
	}
	wantCPUs(ctx, t, pinned, exclusive)
	wantCPUs(ctx, t, web, mach.cpus.Difference(exclusive))

	mark = m.Mark()
	if err := pinnedPod.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitForLogSince(ctx, mark, regexp.MustCompile(`pinned/app: stopped; its pod keeps its exclusive CPUs`)); err != nil {
		t.Fatalf("the plugin did not see the pod's container stop: %v", err)
	}
	wantCPUs(ctx, t, web, mach.cpus.Difference(exclusive))

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	m.start(ctx, t)
	wantCPUs(ctx, t, web, mach.cpus)
	st := m.checkpoint(t)
	if st.NumAssignments() != 0 {
		t.Errorf("checkpoint still holds %d entries after the pod went", st.NumAssignments())
	}
	if _, ok := st.PodResources(pinnedPod.Spec.UID); ok {
		t.Errorf("checkpoint still holds the removed pod's resources")
	}
}
