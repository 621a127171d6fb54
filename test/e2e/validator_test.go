//go:build e2e

package e2e

import (
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
