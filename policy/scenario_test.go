package policy_test

import (
	"path/filepath"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/test/scenario"
)

// TestScenarios runs every scenario of test/scenarios against the policy,
// applying each decision the way containerd does and checking the
// invariants after every single applied update.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("../test/scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files found (%v)", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := scenario.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			pol, err := f.Policy(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r := scenario.NewRunner(scenario.NewPolicyDriver(pol))
			r.Report = func(line string) { t.Log(line) }
			if err := r.Run(f); err != nil {
				t.Fatal(err)
			}
		})
	}
}
