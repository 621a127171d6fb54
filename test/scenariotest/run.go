// Package scenariotest runs scenario files as subtests: the *testing.T glue
// around package scenario, for the suites that run scenarios on fixture
// machines.
package scenariotest

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// RunFiles runs every scenario file matching pattern as a subtest, against
// the driver newDriver returns for the scenario's policy, on the
// scenario's topology and, in subtests, on each of its machines.
func RunFiles(t *testing.T, pattern string, newDriver func(t *testing.T, pol *policy.Policy) scenario.Driver) {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenario files match %s (%v)", pattern, err)
	}
	for _, path := range paths {
		f, err := scenario.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			run(t, f, f.Topology, newDriver)
			for i, m := range f.Machines {
				t.Run(fmt.Sprintf("machine %d", i+1), func(t *testing.T) { run(t, f, m, newDriver) })
			}
		})
	}
}

// run plays f on machine m.
func run(t *testing.T, f *scenario.File, m scenario.Topology, newDriver func(t *testing.T, pol *policy.Policy) scenario.Driver) {
	t.Helper()
	pol, err := assemble.ScenarioPolicy(f, m, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("machine %s", m)
	r := scenario.NewRunner(newDriver(t, pol))
	r.Report = func(line string) { t.Log(line) }
	if err := r.Run(f); err != nil {
		t.Fatal(err)
	}
}
