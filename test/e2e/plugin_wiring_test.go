//go:build e2e

package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
	"k8s.io/utils/cpuset"
)

// TestPluginWiring checks that an external NRI plugin started through the
// harness reaches containerd: it registers and synchronizes, its cpuset
// adjustment lands in the container's cgroup and affinity, and it receives
// the container and pod updates the CRI helpers send.
func TestPluginWiring(t *testing.T) {
	env := harness.NewTestEnv(t, harness.EnvOptions{Containerd: harness.ContainerdOptions{
		LogLevel:                     "debug",
		NRIPluginRequestTimeout:      3 * time.Second,
		NRIPluginRegistrationTimeout: 6 * time.Second,
	}})
	ctx := harness.Context(t, 5*time.Minute)
	bin, err := harness.GoBuild(ctx, "", "./test/e2e/internal/pinall")
	if err != nil {
		t.Fatal(err)
	}
	online, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	pin := cpuset.New(online.List()[online.Size()-1]) // the last CPU: not where an unpinned container would be
	plugin, err := env.StartPlugin(harness.ProcessOptions{
		Path: bin,
		Args: []string{"-socket", env.Containerd.NRISocket(), "-cpus", pin.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The request timeout the harness configured reached the plugin.
	if _, err := plugin.WaitForLog(ctx, regexp.MustCompile(`synchronized pods=0 containers=0 request-timeout=3s$`)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(env.Containerd.LogTail(1000), "level=debug") {
		t.Error("containerd does not log at the debug level it was configured with")
	}

	pod, err := env.CRI.RunPod(ctx, harness.PodSpec{
		Name:       "pinned",
		Containers: []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(1000, 64*harness.MiB)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	app := pod.Container("app")
	cg, err := app.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cpus, err := cg.CPUs(); err != nil || !cpus.Equals(pin) {
		t.Errorf("cpuset.cpus = %s (%v), want the plugin's %s", cpus, err, pin)
	}
	for name, read := range map[string]func() (cpuset.CPUSet, error){
		"new process":       func() (cpuset.CPUSet, error) { return app.CPUsAllowed(ctx) },
		"container command": func() (cpuset.CPUSet, error) { return app.InitCPUsAllowed(ctx) },
	} {
		if got, err := read(); err != nil || !got.Equals(pin) {
			t.Errorf("%s may run on %s (%v), want %s", name, got, err, pin)
		}
	}

	mark := plugin.Mark()
	if err := pod.Resize(ctx, map[string]harness.Resources{"app": harness.Guaranteed(1000, 96*harness.MiB)}); err != nil {
		t.Fatal(err)
	}
	wantMemory := strconv.FormatInt(96*harness.MiB, 10)
	for _, line := range []string{
		"update pod=pinned container=app quota=100000 memory=" + wantMemory,
		"update-pod pod=pinned quota=100000 memory=" + wantMemory,
	} {
		if _, err := plugin.WaitForLogSince(ctx, mark, regexp.MustCompile(regexp.QuoteMeta(line))); err != nil {
			t.Error(err)
		}
	}
	if limit, err := cg.MemoryLimit(); err != nil || limit != 96*harness.MiB {
		t.Errorf("memory.limit_in_bytes = %d (%v), want %d", limit, err, 96*harness.MiB)
	}

	// A plugin that stops is gone from containerd; a new one is synchronized
	// with the running pod.
	if err := plugin.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	again, err := env.StartPlugin(harness.ProcessOptions{
		Path: bin,
		Args: []string{"-socket", env.Containerd.NRISocket(), "-cpus", pin.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.WaitForLog(ctx, regexp.MustCompile(`synchronized pods=1 containers=1`)); err != nil {
		t.Fatal(err)
	}
}
