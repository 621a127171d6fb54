package scenario

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Machine returns the machine a scenario's topology describes.
func (t Topology) Machine() (fakesysfs.Machine, error) {
	m, err := t.machine()
	if err != nil || t.Isolated == "" {
		return m, err
	}
	isolated, err := cpumask.Parse(t.Isolated, cpumask.MaxID)
	if err != nil {
		return fakesysfs.Machine{}, fmt.Errorf("isolated: %w", err)
	}
	m.Isolated = isolated.List()
	return m, m.Validate()
}

func (t Topology) machine() (fakesysfs.Machine, error) {
	switch {
	case t.Layout != "":
		return fakesysfs.Layout(t.Layout)
	case t.KEP == "use-cases":
		return fakesysfs.KEP5554UseCases().Machine()
	case t.KEP == "checkpoint":
		return fakesysfs.KEP5554Checkpoint().Machine()
	case t.KEP != "":
		return fakesysfs.Machine{}, fmt.Errorf("unknown KEP machine %q (want use-cases or checkpoint)", t.KEP)
	}
	numbering := fakesysfs.SiblingsAdjacent
	switch t.Numbering {
	case "", "adjacent":
	case "offset":
		numbering = fakesysfs.SiblingsOffset
	default:
		return fakesysfs.Machine{}, fmt.Errorf("unknown numbering %q (want adjacent or offset)", t.Numbering)
	}
	return fakesysfs.Spec{
		Sockets:        t.Sockets,
		NUMAPerSocket:  t.NUMAPerSocket,
		CoresPerNUMA:   t.CoresPerNUMA,
		ThreadsPerCore: t.ThreadsPerCore,
		L3PerNUMA:      t.L3PerNUMA,
		Numbering:      numbering,
	}.Machine()
}

// WriteSysfs writes the scenario's machine as a sysfs tree under dir.
func (f *File) WriteSysfs(dir string) error {
	m, err := f.Topology.Machine()
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	return fakesysfs.Write(dir, m)
}

// PluginConfig returns the scenario's configuration, with sysfsRoot set.
func (f *File) PluginConfig(sysfsRoot string) (*config.Config, error) {
	keys := map[string]any{}
	for k, v := range f.Config {
		keys[k] = v
	}
	keys["sysfsRoot"] = sysfsRoot
	data, err := yaml.Marshal(keys)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// Policy writes the scenario's machine under dir and builds the policy its
// configuration describes.
func (f *File) Policy(dir string) (*policy.Policy, error) {
	if err := f.WriteSysfs(dir); err != nil {
		return nil, err
	}
	cfg, err := f.PluginConfig(dir)
	if err != nil {
		return nil, err
	}
	topo, err := cpuallocator.Discover(dir)
	if err != nil {
		return nil, err
	}
	return assemble.Policy(cfg, topo)
}
