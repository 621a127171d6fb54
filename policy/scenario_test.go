package policy_test

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/test/scenariotest"
)

// TestScenarios runs every scenario of test/scenarios against the policy,
// applying each decision the way containerd does and checking the
// invariants after every single applied update.
func TestScenarios(t *testing.T) {
	scenariotest.RunFiles(t, "../test/scenarios/*.yaml", func(_ *testing.T, pol *policy.Policy) scenario.Driver {
		return scenario.NewPolicyDriver(pol)
	})
}
