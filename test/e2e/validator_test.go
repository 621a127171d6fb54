//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// shippedRejections returns the default validator's rejection keys that
// deploy/containerd-nri.toml turns on.
func shippedRejections(t *testing.T) []string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "containerd-nri.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "[plugins.'io.containerd.nri.v1.nri'.default_validator]":
			in = true
		case strings.HasPrefix(l, "["):
			in = false
		case in && strings.HasPrefix(l, "reject_") && strings.HasSuffix(l, "= true"):
			keys = append(keys, strings.TrimSpace(strings.TrimSuffix(l, "= true")))
		}
	}
	return keys
}

// TestValidatorRejectsWhatThePluginNeverAdjusts runs containerd with the
// default validator as deploy/containerd-nri.toml configures it, the
// plugin and a plugin that overreaches (internal/overreach): a pinned
// container is created and pinned (the plugin's adjustments pass), and
// each adjustment the plugin never makes — an OCI hook, a namespace, a
// sysctl, a seccomp policy — has its container refused with the
// validator's reason.
func TestValidatorRejectsWhatThePluginNeverAdjusts(t *testing.T) {
	mach := readMachine(t)
	mach.needCPUs(t, 2, needReservedAndPinned)
	rejections := shippedRejections(t)
	t.Logf("deploy/containerd-nri.toml rejects: %s", strings.Join(rejections, ", "))
	env := harness.NewTestEnv(t, harness.EnvOptions{Containerd: harness.ContainerdOptions{NRIValidator: &harness.NRIValidator{Reject: rejections}}})
	ctx := harness.Context(t, 5*time.Minute)
	bin, err := harness.GoBuild(ctx, "", "./test/e2e/internal/overreach")
	if err != nil {
		t.Fatal(err)
	}
	overreach, err := env.StartPlugin(harness.ProcessOptions{Path: bin, Args: []string{"-socket", env.Containerd.NRISocket()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := overreach.WaitForLog(ctx, regexp.MustCompile(`synchronized pods=0`)); err != nil {
		t.Fatal(err)
	}
	reserved := mach.firstCPU()
	m := startCPUManager(ctx, t, env, mach, e2etest.Reserve(reserved))

	pinned, err := env.CRI.RunPod(ctx, harness.PodSpec{Name: "pinned", Containers: []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(1000, 64*harness.MiB)}}})
	if err != nil {
		t.Fatalf("the plugin's adjustment was refused: %v", err)
	}
	m.wantPinned(ctx, t, pinned.Container("app"), mach.cpus.Difference(reserved))

	for _, tc := range []struct{ adjust, want string }{
		{"hook", `plugin "40-overreach" attempted restricted OCI hook injection`},
		{"namespace", `attempted restricted namespace adjustment by plugin(s) "40-overreach"`},
		{"sysctl", "attempted restricted sysctl adjustment by plugin(s) 40-overreach"},
		{"seccomp", "attempted restricted  unconfined seccomp policy adjustment"},
	} {
		pod, err := env.CRI.RunPod(ctx, harness.PodSpec{
			Name:        "overreach-" + tc.adjust,
			Annotations: map[string]string{"overreach.test/adjust": tc.adjust},
			Containers:  []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(100, 64*harness.MiB)}},
		})
		if err == nil {
			t.Errorf("%s: a container adjusted so was created", tc.adjust)
			continue
		}
		if !strings.Contains(err.Error(), "validation error") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: creation failed with %q, want the validator's %q", tc.adjust, err, tc.want)
		}
		if pod == nil || len(pod.Containers) != 0 {
			t.Errorf("%s: pod %v, want the sandbox and no container", tc.adjust, pod)
		}
	}
}

// validatorName is the name nri-cpumanager validate-adjustments registers
// with NRI by default: what required_plugins lists to require it.
const validatorName = "cpumanager-validator"

// TestValidateAdjustmentsBoundsThePlugin runs containerd as
// deploy/containerd-nri.toml configures it with the fail-closed opt-in
// requiring the plugin and the validating plugin (docs/install.md, "What
// the validators bound"), the plugin, nri-cpumanager validate-adjustments
// on the plugin's own configuration file, as the DaemonSet's second
// container runs it, and overreach registered under the plugin's name
// (40-cpumanager), as a compromised or buggy plugin that keeps its name:
// a pinned container is created and pinned (the plugin's cpusets pass);
// an environment variable or a mount, which the default validator lets
// any plugin add, has its container refused with the validating plugin's
// reason naming the field; and with the validating plugin gone, no
// container is created.
func TestValidateAdjustmentsBoundsThePlugin(t *testing.T) {
	mach := readMachine(t)
	mach.needCPUs(t, 2, needReservedAndPinned)
	validator := failClosed(t)
	validator.RequiredPlugins = append(validator.RequiredPlugins, validatorName)
	env := harness.NewTestEnv(t, harness.EnvOptions{Containerd: harness.ContainerdOptions{NRIValidator: validator}})
	ctx := harness.Context(t, 5*time.Minute)
	bin, err := harness.GoBuild(ctx, "", "./test/e2e/internal/overreach")
	if err != nil {
		t.Fatal(err)
	}
	overreach, err := env.StartPlugin(harness.ProcessOptions{Path: bin, Args: []string{"-socket", env.Containerd.NRISocket(), "-name", pluginName, "-index", "40"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := overreach.WaitForLog(ctx, regexp.MustCompile(`synchronized pods=0`)); err != nil {
		t.Fatal(err)
	}
	reserved := mach.firstCPU()
	m := startCPUManager(ctx, t, env, mach, e2etest.Reserve(reserved))
	guard, err := env.StartPlugin(harness.ProcessOptions{Path: m.Bin, Args: []string{"validate-adjustments", "--config", m.Config},
		LogPath: filepath.Join(env.Containerd.Dir(), "validate-adjustments.log")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := guard.WaitForLog(ctx, regexp.MustCompile(`msg="synchronized: validating every container creation"`)); err != nil {
		t.Fatalf("the validating plugin did not synchronize: %v; its log:\n%s", err, guard.LogTail(30))
	}

	pinned, err := env.CRI.RunPod(ctx, harness.PodSpec{Name: "pinned", Containers: []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(1000, 64*harness.MiB)}}})
	if err != nil {
		t.Fatalf("the plugin's adjustment was refused: %v", err)
	}
	m.wantPinned(ctx, t, pinned.Container("app"), mach.cpus.Difference(reserved))

	for _, tc := range []struct{ adjust, want string }{
		{"env", `plugin "40-cpumanager" adjusted Env "OVERREACH" of container app of pod default/overreach-env`},
		{"mount", `plugin "40-cpumanager" adjusted Mounts "/overreach" of container app of pod default/overreach-mount`},
	} {
		pod, err := env.CRI.RunPod(ctx, harness.PodSpec{
			Name:        "overreach-" + tc.adjust,
			Annotations: map[string]string{"overreach.test/adjust": tc.adjust},
			Containers:  []harness.ContainerSpec{{Name: "app", Resources: harness.Guaranteed(100, 64*harness.MiB)}},
		})
		if err == nil {
			t.Errorf("%s: a container the plugin adjusted so was created", tc.adjust)
			continue
		}
		t.Logf("%s: %v", tc.adjust, err)
		if !strings.Contains(err.Error(), `validator "99-`+validatorName+`" rejected container adjustment`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: creation failed with %q, want the validating plugin's %q", tc.adjust, err, tc.want)
		}
		if pod == nil || len(pod.Containers) != 0 {
			t.Errorf("%s: pod %v, want the sandbox and no container", tc.adjust, pod)
		}
	}
	if _, err := guard.WaitForLog(ctx, regexp.MustCompile(`level=warning msg="refused a container's creation".*Mounts`)); err != nil {
		t.Errorf("the validating plugin did not log its refusal: %v", err)
	}

	// The validating plugin goes: required, so nothing is created.
	if err := guard.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	const wantErr = `required plugin "` + validatorName + `" not present`
	attempt := 0
	if err := harness.Poll(ctx, func() (bool, error) {
		attempt++
		late, err := pinned.CreateContainer(ctx, harness.ContainerSpec{Name: fmt.Sprintf("late-%d", attempt), Resources: harness.Guaranteed(100, 64*harness.MiB)})
		if err == nil {
			// containerd had not yet seen the validator go: remove and retry.
			return false, late.Remove(ctx)
		}
		if strings.Contains(err.Error(), `validator plugin 99-`+validatorName+` failed`) {
			// Refused too: containerd asked the validator as it went,
			// and drops it now.
			return false, nil
		}
		if !strings.Contains(err.Error(), wantErr) {
			t.Errorf("creation without the validating plugin: %v, want %q", err, wantErr)
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
}
