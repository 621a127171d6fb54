package integration

import (
	"path/filepath"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/test/scenario"
)

// TestScenariosThroughNRI runs every scenario of test/scenarios through the
// NRI runtime library and the plugin over a real socket: the cpusets are
// those the fake runtime applied, the state is the checkpoint on disk, and
// every refusal is checked to have changed neither.
func TestScenariosThroughNRI(t *testing.T) {
	files, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files (%v)", err)
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
			d := newNRIDriver(t, pol)
			r := scenario.NewRunner(d)
			r.Report = func(line string) { t.Log(line) }
			if err := r.Run(f); err != nil {
				t.Fatal(err)
			}
			noViolations(t, d.rt)
		})
	}
}
