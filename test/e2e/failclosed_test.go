//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The fail-closed opt-in of deploy/containerd-nri.toml: the plugin's
// registered name, and the annotation that exempts a pod (the plugin's own)
// from requiring it.
const (
	pluginName             = "cpumanager"
	tolerateMissingPlugins = "tolerate-missing-nri-plugins.noderesource.dev"
)

// failClosed returns the NRI default validator table of
// deploy/containerd-nri.toml with the fail-closed opt-in on.
func failClosed(t *testing.T) *harness.NRIValidator {
	return &harness.NRIValidator{Reject: shippedRejections(t), RequiredPlugins: []string{pluginName}, TolerateMissingAnnotation: tolerateMissingPlugins}
}

// TestFailClosedWhileThePluginIsAway runs containerd with the fail-closed
// opt-in: while the plugin is not registered, creating a container fails
// with containerd's validation error (a pod carrying the toleration
// annotation, like the plugin's own, is still created); once the plugin is
// back, the same container is created and pinned; when it goes again,
// creation fails again.
func TestFailClosedWhileThePluginIsAway(t *testing.T) {
	mach := readMachine(t)
	mach.needCPUs(t, 2, needReservedAndPinned)
	env := harness.NewTestEnv(t, harness.EnvOptions{Containerd: harness.ContainerdOptions{NRIValidator: failClosed(t)}})
	ctx := harness.Context(t, 5*time.Minute)
	reserved := mach.firstCPU()

	const wantErr = `required plugin "` + pluginName + `" not present`
	spec := harness.PodSpec{Name: "pinned", Containers: []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(1000, 64*harness.MiB)}}}
	pinned, err := env.CRI.RunPod(ctx, spec)
	if err == nil {
		t.Fatal("a container was created while the required plugin was away")
	}
	t.Logf("creation while the plugin is away: %v", err)
	if !strings.Contains(err.Error(), wantErr) {
		t.Errorf("error %q does not say %q", err, wantErr)
	}
	if pinned == nil || len(pinned.Containers) != 0 {
		t.Fatalf("pod %v: want the sandbox running and no container", pinned)
	}

	tolerated, err := env.CRI.RunPod(ctx, harness.PodSpec{
		Name:        "plugin-itself",
		Annotations: map[string]string{tolerateMissingPlugins: "true"},
		Containers:  []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(100, 64*harness.MiB)}},
	})
	if err != nil {
		t.Fatalf("a pod with %s: \"true\" was refused while the plugin was away: %v", tolerateMissingPlugins, err)
	}

	// The plugin comes; the kubelet would retry the creation.
	m := startCPUManager(ctx, t, env, mach, e2etest.Reserve(reserved))
	app, err := pinned.StartContainer(ctx, spec.Containers[0])
	if err != nil {
		t.Fatalf("creation with the plugin back: %v", err)
	}
	exclusive := m.wantPinned(ctx, t, app, mach.cpus.Difference(reserved))
	e2etest.WantCPUs(ctx, t, tolerated.Container("app"), mach.cpus.Difference(exclusive))

	// The plugin goes again: fail closed again.
	if err := m.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	attempt := 0
	if err := harness.Poll(ctx, func() (bool, error) {
		attempt++
		late, err := pinned.CreateContainer(ctx, harness.ContainerSpec{Name: fmt.Sprintf("late-%d", attempt), Resources: harness.Guaranteed(1000, 64*harness.MiB)})
		if err == nil {
			// containerd had not yet seen the plugin go: remove and retry.
			return false, late.Remove(ctx)
		}
		if !strings.Contains(err.Error(), wantErr) {
			t.Errorf("creation after the plugin stopped: %v, want %q", err, wantErr)
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	e2etest.WantCPUs(ctx, t, app, exclusive)
}
