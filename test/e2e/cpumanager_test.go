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
	bin      string
	config   string
	stateDir string
}

// startCPUManager builds and starts the plugin against env's containerd
// with the given extra configuration lines, and waits until it is
// synchronized.
func startCPUManager(ctx context.Context, t *testing.T, env *harness.Env, extraConfig string) *cpuManager {
	t.Helper()
	bin, err := harness.GoBuild(ctx, "", "./cmd/nri-cpumanager")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := &cpuManager{env: env, bin: bin, config: filepath.Join(dir, "config.yaml"), stateDir: filepath.Join(dir, "state")}
	cfg := fmt.Sprintf("nriSocket: %s\nstateDir: %s\nmetricsAddress: \"\"\nkubeletCheckpoint: \"\"\nlogLevel: debug\n%s\n",
		env.Containerd.NRISocket(), m.stateDir, extraConfig)
	if err := os.WriteFile(m.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start(ctx, t)
	return m
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
	online, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Inspect(m.stateDir, online)
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

// wantCPUs checks, within a few seconds (unsolicited updates are
// asynchronous), that the container's cgroup cpuset and the CPUs a new
// process inside it may use are want.
func wantCPUs(ctx context.Context, t *testing.T, c *harness.Container, want string) {
	t.Helper()
	var cgroupCPUs, allowed cpuset.CPUSet
	pollCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := harness.Poll(pollCtx, func() (bool, error) {
		cg, err := c.Cgroup(ctx)
		if err != nil {
			return false, err
		}
		if cgroupCPUs, err = cg.CPUs(); err != nil {
			return false, err
		}
		if allowed, err = c.CPUsAllowed(ctx); err != nil {
			return false, err
		}
		return cgroupCPUs.String() == want && allowed.String() == want, nil
	})
	if err != nil {
		t.Errorf("%s: cgroup cpuset %q, Cpus_allowed_list %q, want %q (%v)", c, cgroupCPUs, allowed, want, err)
	}
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

// TestSharedPoolFollowsPinnedContainer: a shared container shrinks when a
// 1-CPU Guaranteed container is pinned and grows back when it goes; a
// fractional Guaranteed container stays on the shared pool.
func TestSharedPoolFollowsPinnedContainer(t *testing.T) {
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	m := startCPUManager(ctx, t, env, `reservedSystemCPUs: "0"`)

	web := runPod(ctx, t, env, "web", burstable(250)).Container("app")
	wantCPUs(ctx, t, web, "0-1")
	pinned := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	wantCPUs(ctx, t, pinned.Container("app"), "1")
	wantCPUs(ctx, t, web, "0")
	frac := runPod(ctx, t, env, "fractional", harness.Guaranteed(500, 64*harness.MiB)).Container("app")
	wantCPUs(ctx, t, frac, "0")

	st := m.checkpoint(t)
	if a, ok := st.Assignment(pinned.Spec.UID, "app"); !ok || a.Original.String() != "1" {
		t.Errorf("checkpoint entry of the pinned container: %+v (present %v), want original 1", a, ok)
	}
	if st.DefaultCPUSet.String() != "0" {
		t.Errorf("checkpoint shared pool %q, want 0", st.DefaultCPUSet)
	}

	if err := pinned.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, web, "0-1")
	wantCPUs(ctx, t, frac, "0-1")
	if st := m.checkpoint(t); len(st.Entries) != 0 || st.DefaultCPUSet.String() != "0-1" {
		t.Errorf("checkpoint after removal: entries %v, shared pool %q", st.Entries, st.DefaultCPUSet)
	}
}

// TestGrowthThatWouldEmptyTheSharedPoolIsRefused: without reserved CPUs, a
// 1-CPU container cannot grow to both CPUs; the CRI call fails with the
// plugin's message and nothing changes.
func TestGrowthThatWouldEmptyTheSharedPoolIsRefused(t *testing.T) {
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	m := startCPUManager(ctx, t, env, `reservedSystemCPUs: ""`)

	web := runPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinned := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	app := pinned.Container("app")
	wantCPUs(ctx, t, app, "0")
	wantCPUs(ctx, t, web, "1")

	err := pinned.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(2000, 64*harness.MiB)})
	if err == nil {
		t.Fatal("growing to every CPU succeeded")
	}
	t.Logf("the refused CRI call says: %v", err)
	for _, want := range []string{"Infeasible: resizeAllocateCPUs", "would leave the shared pool empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	wantCPUs(ctx, t, app, "0")
	wantQuota(t, ctx, app, 100000)
	wantCPUs(ctx, t, web, "1")
	if a, _ := m.checkpoint(t).Assignment(pinned.Spec.UID, "app"); a.Assigned().String() != "0" {
		t.Errorf("checkpoint: %+v, want the container still on CPU 0", a)
	}
}

// TestMemoryOnlyResizeKeepsCPUs: a memory resize of a pinned container
// passes and keeps its cpuset; UpdatePodSandboxResources is accepted and
// the new pod totals are recorded.
func TestMemoryOnlyResizeKeepsCPUs(t *testing.T) {
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	m := startCPUManager(ctx, t, env, `reservedSystemCPUs: "0"`)

	pinned := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	app := pinned.Container("app")
	wantCPUs(ctx, t, app, "1")
	if err := pinned.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(1000, 128*harness.MiB)}); err != nil {
		t.Fatalf("memory resize: %v", err)
	}
	wantCPUs(ctx, t, app, "1")
	cg, err := app.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cg.Values(); err != nil || v.MemoryLimit != 128*harness.MiB {
		t.Errorf("memory limit %d (%v), want 128Mi", v.MemoryLimit, err)
	}
	pr, ok := m.checkpoint(t).PodResources(pinned.Spec.UID)
	if !ok || pr.Resources.MemoryLimit != 128*harness.MiB {
		t.Errorf("pod resources recorded from UpdatePodSandboxResources: %+v (present %v), want memory 128Mi", pr, ok)
	}
}

// TestPluginKilledAndRestartedKeepsCPUs kills the plugin with SIGKILL,
// starts a shared container while it is down (it gets every CPU), and
// restarts it: every pinned cpuset is kept and the new container is put
// back on the shared pool.
func TestPluginKilledAndRestartedKeepsCPUs(t *testing.T) {
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	m := startCPUManager(ctx, t, env, `reservedSystemCPUs: "0"`)

	web := runPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinned := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB)).Container("app")
	wantCPUs(ctx, t, pinned, "1")
	wantCPUs(ctx, t, web, "0")

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	late := runPod(ctx, t, env, "late", burstable(100)).Container("app")
	wantCPUs(ctx, t, late, "0-1")

	m.start(ctx, t)
	wantCPUs(ctx, t, pinned, "1")
	wantCPUs(ctx, t, web, "0")
	wantCPUs(ctx, t, late, "0")
	if a, _ := m.checkpoint(t).Assignment(pinned.Pod.Spec.UID, "app"); a.Original.String() != "1" {
		t.Errorf("checkpoint after restart: %+v", a)
	}
}

// TestContainerdRestartKeepsCPUs restarts containerd under running pods:
// the plugin reconnects and synchronizes, every cpuset is kept, and a pod
// that existed before the restart (which never gets StopPodSandbox or
// RemovePodSandbox events) still releases its CPUs with its last container.
func TestContainerdRestartKeepsCPUs(t *testing.T) {
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	m := startCPUManager(ctx, t, env, `reservedSystemCPUs: "0"`)

	web := runPod(ctx, t, env, "web", burstable(250)).Container("app")
	pinnedPod := runPod(ctx, t, env, "pinned", harness.Guaranteed(1000, 64*harness.MiB))
	pinned := pinnedPod.Container("app")
	wantCPUs(ctx, t, pinned, "1")

	mark := m.Mark()
	if err := env.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitForLogSince(ctx, mark, synchronized); err != nil {
		t.Fatalf("the plugin did not reconnect: %v", err)
	}
	wantCPUs(ctx, t, pinned, "1")
	wantCPUs(ctx, t, web, "0")

	if err := pinnedPod.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	wantCPUs(ctx, t, web, "0-1")
	st := m.checkpoint(t)
	if len(st.Entries) != 0 {
		t.Errorf("checkpoint still holds %v after the pod went", st.Entries)
	}
	if _, ok := st.PodResources(pinnedPod.Spec.UID); ok {
		t.Errorf("checkpoint still holds the removed pod's resources")
	}
}
