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
// tree (v1, hybrid or v2) with containerd's cgroupfs driver:
//
//   - without a hostPath, the runtime's own cgroup mount: the container's
//     own cgroup (v1: its own cpuset cgroup; v2: its cgroup namespace),
//     not the top of the cpuset hierarchy, and no other container's cgroup
//     (the plugin could verify nothing);
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
	// cpuset.cpus; on v2 the effective set, since nothing here sets
	// cpuset.cpus.
	cpusFile := "cpuset.cpus"
	if cg.Version() == 2 {
		cpusFile = "cpuset.cpus.effective"
	}
	hostCPUs, err := cg.ReadFile("cpuset", cpusFile)
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
	// The top of the cpuset hierarchy: on v1 only the top cpuset has
	// cpuset.memory_pressure_enabled; on v2 every cgroup but the root has
	// cgroup.type.
	top, topTest, hierarchy := "/sys/fs/cgroup/cpuset/cpuset.memory_pressure_enabled", "test -e ", "/sys/fs/cgroup/cpuset"
	if cg.Version() == 2 {
		top, topTest, hierarchy = "/sys/fs/cgroup/cgroup.type", "test -e /sys/fs/cgroup/cgroup.controllers -a ! -e ", "/sys/fs/cgroup"
	}
	file := filepath.Join(hierarchy, cg.Path, cpusFile)
	succeeds := func(c *harness.Container, cmd string) bool {
		t.Helper()
		res, err := c.ExecSync(ctx, 10*time.Second, "sh", "-c", cmd)
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode == 0
	}

	plain := viewer.Container("plain")
	if succeeds(plain, topTest+top) {
		t.Errorf("without a hostPath, /sys/fs/cgroup in the container is the top of the cpuset hierarchy (cgroup v%d, %s%s)", cg.Version(), topTest, top)
	}
	if succeeds(plain, "test -e "+file) {
		t.Errorf("without a hostPath, the other container's %s is visible", file)
	}

	hostsys := viewer.Container("hostsys")
	if !succeeds(hostsys, topTest+top) {
		t.Errorf("with /sys from the host, /sys/fs/cgroup is not the host's tree (cgroup v%d, %s%s fails)", cg.Version(), topTest, top)
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
