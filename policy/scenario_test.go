package policy_test

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/test/scenario"
)

// TestScenarios runs every scenario of test/scenarios against the policy,
// applying each decision the way containerd does and checking the
// invariants after every single applied update.
func TestScenarios(t *testing.T) {
	scenario.RunFiles(t, "../test/scenarios/*.yaml", func(_ *testing.T, pol *policy.Policy) scenario.Driver {
		return scenario.NewPolicyDriver(pol)
	})
}
