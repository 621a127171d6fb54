//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"
)

// TestSmoke checks the harness against a real containerd without any NRI
// plugin: kubelet-like pods get the cgroup values the kubelet expects, the
// resize calls succeed, containers survive a containerd restart, and the
// environment leaves nothing behind.
func TestSmoke(t *testing.T) {
	harness.SkipUnlessCapable(t)
	ctx := harness.Context(t, 10*time.Minute)
	env, err := harness.NewEnv(ctx, harness.EnvOptions{Logf: t.Logf})
	if err != nil {
		t.Fatalf("set up: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("containerd log, last lines:\n%s", env.Containerd.LogTail(60))
		}
		if err := env.Close(context.Background()); err != nil {
			t.Errorf("clean up: %v", err)
		}
	})

	guaranteed, err := env.CRI.RunPod(ctx, harness.PodSpec{
		Name:       "guaranteed",
		Containers: []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(1000, 64*harness.MiB)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	burstable, err := env.CRI.RunPod(ctx, harness.PodSpec{
		Name: "burstable",
		Containers: []harness.ContainerSpec{{Name: "app", Resources: harness.Resources{
			CPURequestMilli: 250, CPULimitMilli: 500, MemoryRequest: 32 * harness.MiB, MemoryLimit: 64 * harness.MiB,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if guaranteed.QOS != harness.QOSGuaranteed || !strings.HasPrefix(guaranteed.CgroupParent, "/kubepods/pod") {
		t.Errorf("guaranteed pod: QoS %s, cgroup parent %s", guaranteed.QOS, guaranteed.CgroupParent)
	}
	if burstable.QOS != harness.QOSBurstable || !strings.HasPrefix(burstable.CgroupParent, "/kubepods/burstable/pod") {
		t.Errorf("burstable pod: QoS %s, cgroup parent %s", burstable.QOS, burstable.CgroupParent)
	}

	gApp, bApp := guaranteed.Container("app"), burstable.Container("app")
	checkCgroup(ctx, t, gApp, harness.CgroupValues{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 64 * harness.MiB})
	checkCgroup(ctx, t, bApp, harness.CgroupValues{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 * harness.MiB})
	for _, c := range []*harness.Container{gApp, bApp} {
		checkAffinity(ctx, t, c)
	}

	// A memory update of one container, then the pod totals.
	if err := gApp.Update(ctx, harness.Guaranteed(1000, 128*harness.MiB)); err != nil {
		t.Fatal(err)
	}
	checkCgroup(ctx, t, gApp, harness.CgroupValues{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 128 * harness.MiB})
	if err := guaranteed.UpdateResources(ctx, guaranteed.Resources()); err != nil {
		t.Fatal(err)
	}
	// A CPU resize the kubelet way: container update, then pod update.
	if err := burstable.Resize(ctx, map[string]harness.Resources{"app": {
		CPURequestMilli: 500, CPULimitMilli: 1000, MemoryRequest: 32 * harness.MiB, MemoryLimit: 64 * harness.MiB,
	}}); err != nil {
		t.Fatal(err)
	}
	checkCgroup(ctx, t, bApp, harness.CgroupValues{CPUShares: 512, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 64 * harness.MiB})

	pidBefore, err := gApp.PID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*harness.Container{gApp, bApp} {
		state, err := c.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("%s after containerd restart: state %s, want running", c, state)
		}
	}
	if pidAfter, err := gApp.PID(ctx); err != nil || pidAfter != pidBefore {
		t.Errorf("%s after containerd restart: pid %d (%v), want the same process %d", gApp, pidAfter, err, pidBefore)
	}
	checkAffinity(ctx, t, gApp)

	// Removing a pod removes its pod cgroup too.
	podCgroup, err := burstable.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	if err := burstable.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := podCgroup.CPUs(); err == nil {
		t.Errorf("pod cgroup %s still exists after the pod was removed", podCgroup.Path)
	}

	if err := env.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.Containerd.CheckGone(); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// checkCgroup compares the container's CPU and memory cgroup files with
// want; want.CPUs is ignored (no plugin pins anything here), but the cpuset
// must be readable and not empty.
func checkCgroup(ctx context.Context, t *testing.T, c *harness.Container, want harness.CgroupValues) {
	t.Helper()
	cg, err := c.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cg.Path, c.Pod.CgroupParent+"/") {
		t.Errorf("%s: cgroup %s is not under the pod's cgroup parent %s", c, cg.Path, c.Pod.CgroupParent)
	}
	got, err := cg.Values()
	if err != nil {
		t.Fatal(err)
	}
	if cpus, err := cg.AllowedCPUs(); err != nil || cpus.IsEmpty() {
		t.Errorf("%s: cpuset %q (%v), want CPUs", c, cpus, err)
	}
	shares, weight, err := cg.SharesMatch(want.CPUShares)
	if err != nil {
		t.Fatal(err)
	}
	if !shares || got.CPUQuota != want.CPUQuota || got.CPUPeriod != want.CPUPeriod || got.MemoryLimit != want.MemoryLimit {
		t.Errorf("%s (cgroup v%d): %s quota %d period %d memory %d, want shares %d quota %d period %d memory %d", c, cg.Version(),
			weight, got.CPUQuota, got.CPUPeriod, got.MemoryLimit,
			want.CPUShares, want.CPUQuota, want.CPUPeriod, want.MemoryLimit)
	}
}

// checkAffinity checks that the CPUs a process inside the container may use
// are readable and match the container's cpuset cgroup.
func checkAffinity(ctx context.Context, t *testing.T, c *harness.Container) {
	t.Helper()
	cpus, err := c.CgroupCPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func(context.Context) (cpuset.CPUSet, error){
		"new process": c.CPUsAllowed, "container command": c.InitCPUsAllowed,
	} {
		allowed, err := read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !allowed.Equals(cpus) {
			t.Errorf("%s: %s may run on CPUs %s, cgroup cpuset is %s", c, name, allowed, cpus)
		}
	}
}

// TestCloseRemovesLeftovers checks the clean-up of a run that failed
// half-way: containerd is stopped with a pod still running, so CRI cannot
// remove it; closing must still leave no process, mount or directory.
func TestCloseRemovesLeftovers(t *testing.T) {
	harness.SkipUnlessCapable(t)
	ctx := harness.Context(t, 5*time.Minute)
	env, err := harness.NewEnv(ctx, harness.EnvOptions{Logf: t.Logf})
	if err != nil {
		t.Fatalf("set up: %v", err)
	}
	t.Cleanup(func() { env.Close(context.Background()) })
	pod, err := env.CRI.RunPod(ctx, harness.PodSpec{
		Name:       "left-behind",
		Containers: []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(1000, 64*harness.MiB)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	podCgroup, err := pod.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Containerd.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := env.Containerd.Close(); err != nil {
		t.Fatalf("close with a pod left running: %v", err)
	}
	if err := env.Containerd.CheckGone(); err != nil {
		t.Errorf("after Close: %v", err)
	}
	// Env.Close cannot reach containerd any more, but removes the pod cgroup.
	if err := env.Close(ctx); err != nil {
		t.Errorf("Env.Close after Containerd.Close: %v", err)
	}
	if _, err := podCgroup.CPUs(); err == nil {
		t.Errorf("pod cgroup %s still exists", podCgroup.Path)
	}
}
