//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// cpuManager is the plugin (e2etest.CPUManager) on this machine, whose
// choices the tests predict where its topology allows (wantPinned).
type cpuManager struct {
	*e2etest.CPUManager
	mach *machine
}

// startCPUManager builds the plugin and starts it against env's
// containerd on the machine mach with the given extra configuration
// lines, and waits until it is synchronized.
func startCPUManager(ctx context.Context, t *testing.T, env *harness.Env, mach *machine, extraConfig string) *cpuManager {
	t.Helper()
	bin, err := harness.GoBuild(ctx, "", "./cmd/nri-cpumanager")
	if err != nil {
		t.Fatal(err)
	}
	return &cpuManager{CPUManager: e2etest.StartCPUManager(ctx, t, env, bin, mach.cpus, extraConfig), mach: mach}
}

func burstable(milli int64) harness.Resources {
	return harness.Resources{CPURequestMilli: milli, CPULimitMilli: 2 * milli, MemoryRequest: 32 * harness.MiB, MemoryLimit: 64 * harness.MiB}
}

// wantPinned checks that c, a Guaranteed container of one whole CPU created
// while the CPUs of available were free for exclusive use, is pinned to one
// of them (in its cgroup, in the CPUs its processes may use, and as its
// baseline CPUs in the checkpoint), and returns it. Where the machine's
// topology lets the tests predict the plugin's choice (every machine with
// one socket and one NUMA node), it must be that CPU.
func (m *cpuManager) wantPinned(ctx context.Context, t *testing.T, c *harness.Container, available cpuset.CPUSet) cpuset.CPUSet {
	t.Helper()
	got, ok := m.mach.oneExclusive(available)
	if ok {
		e2etest.WantCPUs(ctx, t, c, got)
	} else {
		t.Logf("%s: which CPU of %s the plugin picks is not predicted on this machine (%s); checking that it is one of them", c, available, m.mach.unpredictable)
		got = e2etest.SettledCPUs(ctx, t, c, "one CPU of "+available.String(), func(s cpuset.CPUSet) bool { return s.Size() == 1 && s.IsSubsetOf(available) })
	}
	m.WantAssignment(t, c, got, got)
	return got
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
	m := startCPUManager(ctx, t, env, mach, e2etest.Reserve(reserved))

	web := e2etest.RunPod(ctx, t, env, "web", burstable(250)).Container("app")
	e2etest.WantCPUs(ctx, t, web, mach.cpus)
	pinned := e2etest.RunPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	exclusive := m.wantPinned(ctx, t, pinned.Container("app"), mach.cpus.Difference(reserved))
	shared := mach.cpus.Difference(exclusive)
	e2etest.WantCPUs(ctx, t, web, shared)
	frac := e2etest.RunPod(ctx, t, env, "fractional", harness.Guaranteed(500, 64*harness.MiB)).Container("app")
	e2etest.WantCPUs(ctx, t, frac, shared)

	st := m.Checkpoint(t)
	if a, ok := st.Assignment(pinned.Spec.UID, "app"); !ok || !a.Baseline.Equals(exclusive) {
		t.Errorf("checkpoint entry of the pinned container: %+v (present %v), want original %s", a, ok, exclusive)
	}
	if !st.DefaultCPUSet().Equals(shared) {
		t.Errorf("checkpoint shared pool %q, want %s", st.DefaultCPUSet(), shared)
	}

	if err := pinned.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	e2etest.WantCPUs(ctx, t, web, mach.cpus)
	e2etest.WantCPUs(ctx, t, frac, mach.cpus)
	if st := m.Checkpoint(t); st.NumAssignments() != 0 || !st.DefaultCPUSet().Equals(mach.cpus) {
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
	m := startCPUManager(ctx, t, env, mach, e2etest.Reserve(cpuset.New()))

	web := e2etest.RunPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinned := e2etest.RunPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	app := pinned.Container("app")
	exclusive := m.wantPinned(ctx, t, app, mach.cpus)
	shared := mach.cpus.Difference(exclusive)
	e2etest.WantCPUs(ctx, t, web, shared)

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
	e2etest.WantCPUs(ctx, t, app, exclusive)
	e2etest.WantQuota(ctx, t, app, 1)
	e2etest.WantCPUs(ctx, t, web, shared)
	if a, _ := m.Checkpoint(t).Assignment(pinned.Spec.UID, "app"); !a.Assigned().Equals(exclusive) {
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
	m := startCPUManager(ctx, t, env, mach, e2etest.Reserve(reserved))

	pinned := e2etest.RunPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	app := pinned.Container("app")
	exclusive := m.wantPinned(ctx, t, app, mach.cpus.Difference(reserved))
	if err := pinned.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(1000, 128*harness.MiB)}); err != nil {
		t.Fatalf("memory resize: %v", err)
	}
	e2etest.WantCPUs(ctx, t, app, exclusive)
	cg, err := app.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cg.Values(); err != nil || v.MemoryLimit != 128*harness.MiB {
		t.Errorf("memory limit %d (%v), want 128Mi", v.MemoryLimit, err)
	}
	st := m.Checkpoint(t)
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
	m := startCPUManager(ctx, t, env, mach, e2etest.Reserve(reserved))

	web := e2etest.RunPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinnedPod := e2etest.RunPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	pinned := pinnedPod.Container("app")
	exclusive := m.wantPinned(ctx, t, pinned, mach.cpus.Difference(reserved))
	shared := mach.cpus.Difference(exclusive)
	e2etest.WantCPUs(ctx, t, web, shared)

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	late := e2etest.RunPod(ctx, t, env, "late", burstable(100)).Container("app")
	e2etest.WantCPUs(ctx, t, late, e2etest.UnpinnedCPUs(t))

	m.Start(ctx, t)
	e2etest.WantCPUs(ctx, t, pinned, exclusive)
	e2etest.WantCPUs(ctx, t, web, shared)
	e2etest.WantCPUs(ctx, t, late, shared)
	st := m.Checkpoint(t)
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
	m := startCPUManager(ctx, t, env, mach, e2etest.Reserve(reserved))

	web := e2etest.RunPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinnedPod := e2etest.RunPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	pinned := pinnedPod.Container("app")
	exclusive := m.wantPinned(ctx, t, pinned, mach.cpus.Difference(reserved))

	mark := m.Mark()
	if err := env.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitForLogSince(ctx, mark, e2etest.Synchronized); err != nil {
		t.Fatalf("the plugin did not reconnect: %v", err)
	}
	e2etest.WantCPUs(ctx, t, pinned, exclusive)
	e2etest.WantCPUs(ctx, t, web, mach.cpus.Difference(exclusive))

	mark = m.Mark()
	if err := pinnedPod.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitForLogSince(ctx, mark, regexp.MustCompile(`pinned/app: stopped; its pod keeps its exclusive CPUs`)); err != nil {
		t.Fatalf("the plugin did not see the pod's container stop: %v", err)
	}
	e2etest.WantCPUs(ctx, t, web, mach.cpus.Difference(exclusive))

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	m.Start(ctx, t)
	e2etest.WantCPUs(ctx, t, web, mach.cpus)
	st := m.Checkpoint(t)
	if st.NumAssignments() != 0 {
		t.Errorf("checkpoint still holds %d entries after the pod went", st.NumAssignments())
	}
	if _, ok := st.PodResources(pinnedPod.Spec.UID); ok {
		t.Errorf("checkpoint still holds the removed pod's resources")
	}
}
