//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// TestPodSeesHostCgroupsThroughSysHostPath checks what the plugin sees at
// /sys/fs/cgroup when it runs in a DaemonSet pod, on this machine's cgroup
// v1 (hybrid) tree with containerd's cgroupfs driver:
//
//   - without a hostPath, the runtime's own cgroup mount: the container's
//     own cgroup, not the top of the cpuset hierarchy, and no other
//     container's cgroup (the plugin could verify nothing);
//   - with the host's /sys mounted read-only at /sys, as deploy/ mounts it,
//     the host's tree: containerd puts hostPath mounts after its own
//     /sys/fs/cgroup mount, so the host's /sys and its submounts cover
//     it; another container's cpuset is found at the path the plugin
//     derives from the cgroups path NRI delivers, with the content the
//     host has.
func TestPodSeesHostCgroupsThroughSysHostPath(t *testing.T) {
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	target, err := env.CRI.RunPod(ctx, harness.PodSpec{
		Name:       "target",
		Containers: []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(1000, 64*harness.MiB)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cg, err := target.Container("app").Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hostCPUs, err := cg.ReadFile("cpuset", "cpuset.cpus")
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := env.CRI.RunPod(ctx, harness.PodSpec{
		Name: "viewer",
		Containers: []harness.ContainerSpec{
			{Name: "plain", Resources: harness.Guaranteed(100, 32*harness.MiB)},
			{Name: "hostsys", Resources: harness.Guaranteed(100, 32*harness.MiB),
				Mounts: []harness.Mount{{HostPath: "/sys", ContainerPath: "/sys", ReadOnly: true}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	top := "/sys/fs/cgroup/cpuset/cpuset.memory_pressure_enabled" // only the top cpuset has it
	file := filepath.Join("/sys/fs/cgroup/cpuset", cg.Path, "cpuset.cpus")
	exists := func(c *harness.Container, path string) bool {
		t.Helper()
		res, err := c.ExecSync(ctx, 10*time.Second, "sh", "-c", "test -e "+path)
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode == 0
	}

	plain := viewer.Container("plain")
	if exists(plain, top) {
		t.Errorf("without a hostPath, %s exists in the container: the runtime's cgroup mount shows the top cpuset", top)
	}
	if exists(plain, file) {
		t.Errorf("without a hostPath, the other container's %s is visible", file)
	}

	hostsys := viewer.Container("hostsys")
	if !exists(hostsys, top) {
		t.Errorf("with /sys from the host, %s is missing: /sys/fs/cgroup is not the host's tree", top)
	}
	got, err := hostsys.Exec(context.WithoutCancel(ctx), "cat", file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(got) != hostCPUs {
		t.Errorf("%s reads %q in the pod, %q on the host", file, strings.TrimSpace(got), hostCPUs)
	}
	t.Logf("in the pod with /sys from the host: %s = %s (cgroups path %s)", file, strings.TrimSpace(got), cg.Path)
}
