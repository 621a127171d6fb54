//go:build vmguest

package guest

import (
	"slices"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// scenarioFiles are the scenario files the boot's payload carries.
const scenarioFiles = repoRoot + "/test/scenarios/*.yaml"

// TestScenarios plays the scenario files written for this guest on its
// containerd over CRI, with the boot's cgroup driver and the payload's
// plugin (e2etest.PlayScenarios): those whose topology, or one of whose
// machines, is this node — {sockets: 2, coresPerNUMA: 4, threadsPerCore:
// 2, distances: [[10, 20], [20, 10]]}, with isolated: "12-15" in the
// isolcpus boot. A scenario's devices on NUMA node n are that node's
// disk (vm.Layout.NodeDisks); a scenario that declares pods' specs runs
// its plugin on a fake Kubernetes API server in this test process.
// Each plugin must say that it verifies cpusets in the cgroup v2 tree. The scenarios written for this guest must be among
// those played: a guest that reads otherwise than QEMU's layout says
// (TestTopology) would skip them all.
func TestScenarios(t *testing.T) {
	ctx := harness.Context(t, timeout)
	played := e2etest.PlayScenarios(ctx, t, e2etest.ScenarioOptions{
		Files:       scenarioFiles,
		Plugin:      plugin,
		NewEnv:      func(t *testing.T) *harness.Env { return newEnv(t) },
		Started:     func(t *testing.T, m *e2etest.CPUManager) { wantVerifiesOnV2(t, m) },
		NodeDevices: nodeDevicePaths(nodeDisks(t)),
	})
	want := []string{"two-sockets-grow-across-numa.yaml", "kep-e2e-multi-container-resize.yaml", "devices-two-sockets.yaml", "pod-admission-single-numa-node-two-sockets.yaml"}
	if isolated != "" {
		want = []string{"isolated-cpus-shared-two-sockets.yaml", "isolated-cpus-exclusive-two-sockets.yaml"}
	}
	for _, name := range want {
		if !slices.Contains(played, name) {
			t.Errorf("%s, written for this guest, was not played (played: %v)", name, played)
		}
	}
}
