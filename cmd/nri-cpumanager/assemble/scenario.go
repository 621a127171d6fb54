package assemble

import (
	"fmt"
	"os"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// ScenarioPolicy writes the machine of scenario f as a sysfs tree under
// dir and builds the policy the scenario's configuration describes on it,
// as the plugin would.
func ScenarioPolicy(f *scenario.File, dir string) (*policy.Policy, error) {
	if err := f.Topology.WriteSysfs(dir); err != nil {
		return nil, err
	}
	data, err := f.ConfigFile(map[string]any{"sysfsRoot": dir})
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	topo, err := cpuallocator.Discover(dir)
	if err != nil {
		return nil, err
	}
	return Policy(cfg, topo)
}

// Simulate runs scenario f against the policy alone, on its machine
// written to a temporary directory: what `nri-cpumanager simulate`
// prints. report receives a line describing the machine, then one line
// per step.
func Simulate(f *scenario.File, report func(string)) error {
	dir, err := os.MkdirTemp("", "nri-cpumanager-simulate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pol, err := ScenarioPolicy(f, dir)
	if err != nil {
		return err
	}
	report(fmt.Sprintf("machine: %s", pol.Allocator().Topology()))
	r := scenario.NewRunner(scenario.NewPolicyDriver(pol))
	r.Report = report
	return r.Run(f)
}
