//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// TestScenarios plays the scenario files of test/scenarios written for
// this machine (its topology, or one of its machines, has this machine's
// shape) on a real containerd over CRI, with the plugin's binary, and
// checks every step in the containers' cgroup files and the checkpoint
// (e2etest.PlayScenarios); the others are skipped, saying how this
// machine differs. On this project's 2-CPU host: shared-pool.yaml,
// shared-pool-never-empty.yaml and, with the plugin on a fake Kubernetes
// API server, pod-admission-init-reuse-two-cpus.yaml.
func TestScenarios(t *testing.T) {
	harness.SkipUnlessCapable(t)
	ctx := harness.Context(t, 10*time.Minute)
	bin, err := harness.GoBuild(ctx, "", "./cmd/nri-cpumanager")
	if err != nil {
		t.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e2etest.PlayScenarios(ctx, t, e2etest.ScenarioOptions{
		Files:  filepath.Join(root, "test", "scenarios", "*.yaml"),
		Plugin: bin,
		NewEnv: func(t *testing.T) *harness.Env { return harness.NewTestEnv(t, harness.EnvOptions{}) },
	})
}
