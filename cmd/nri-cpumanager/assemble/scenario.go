package assemble

import (
	"fmt"
	"os"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// ScenarioPolicy writes machine t of scenario f (its topology or one of
// its machines) as a sysfs tree under dir and builds the policy the
// scenario's configuration describes on it, as the plugin would.
func ScenarioPolicy(f *scenario.File, t scenario.Topology, dir string) (*policy.Policy, error) {
	if err := t.WriteSysfs(dir); err != nil {
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

// Simulate runs scenario f against the policy alone on each of its
// machines (its topology, then its machines), each written to a temporary
// directory: what `nri-cpumanager simulate` prints. report receives a
// line describing each machine, then one line per step.
func Simulate(f *scenario.File, report func(string)) error {
	for _, t := range f.Topologies() {
		if err := simulateOn(f, t, report); err != nil {
			return err
		}
	}
	return nil
}

func simulateOn(f *scenario.File, t scenario.Topology, report func(string)) error {
	dir, err := os.MkdirTemp("", "nri-cpumanager-simulate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pol, err := ScenarioPolicy(f, t, dir)
	if err != nil {
		return err
	}
	report(fmt.Sprintf("machine %s: %s", t, pol.Allocator().Topology()))
	r := scenario.NewRunner(scenario.NewPolicyDriver(pol))
	r.Report = report
	if err := r.Run(f); err != nil {
		return fmt.Errorf("on machine %s: %w", t, err)
	}
	return nil
}
