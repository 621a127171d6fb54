package scenario

import (
	"fmt"
	"os"
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
