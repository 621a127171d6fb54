package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Simulate runs the scenario against the policy alone, on its fixture
// machine written to a temporary directory. report receives a line
// describing the machine, then one line per step.
func (f *File) Simulate(report func(string)) error {
	dir, err := os.MkdirTemp("", "nri-cpumanager-simulate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pol, err := f.Policy(dir)
	if err != nil {
		return err
	}
	report(fmt.Sprintf("machine: %s", pol.Allocator().Topology()))
	r := NewRunner(NewPolicyDriver(pol))
	r.Report = report
	return r.Run(f)
}

// RunFiles runs every scenario file matching pattern as a subtest, against
// the driver newDriver returns for the scenario's policy, and returns the
// scenarios it ran.
func RunFiles(t *testing.T, pattern string, newDriver func(t *testing.T, pol *policy.Policy) Driver) []*File {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenario files match %s (%v)", pattern, err)
	}
	var files []*File
	for _, path := range paths {
		f, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		t.Run(filepath.Base(path), func(t *testing.T) {
			pol, err := f.Policy(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r := NewRunner(newDriver(t, pol))
			r.Report = func(line string) { t.Log(line) }
			if err := r.Run(f); err != nil {
				t.Fatal(err)
			}
		})
	}
	return files
}
