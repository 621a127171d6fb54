package integration

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/test/scenariotest"
)

// TestScenariosThroughNRI runs every scenario of test/scenarios through the
// NRI runtime library and the plugin over a real socket: the cpusets are
// those the fake runtime applied, the state is the checkpoint on disk, and
// every refusal is checked to have changed neither. After each scenario the
// runtime must never have seen a CPU in two places.
func TestScenariosThroughNRI(t *testing.T) {
	scenariotest.RunFiles(t, "../scenarios/*.yaml", func(t *testing.T, pol *policy.Policy) scenario.Driver {
		d := newNRIDriver(t, pol)
		t.Cleanup(func() { noViolations(t, d.rt) })
		return d
	})
}
