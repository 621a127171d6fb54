package scenario

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/internal/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/test/sysfs"
)

// Machine returns the machine a scenario's topology describes.
func (t Topology) Machine() (sysfs.Machine, error) {
	switch {
	case t.Layout != "":
		return sysfs.Layout(t.Layout)
	case t.KEP == "use-cases":
		return sysfs.KEP5554UseCases().Machine()
	case t.KEP == "checkpoint":
		return sysfs.KEP5554Checkpoint().Machine()
	case t.KEP != "":
		return sysfs.Machine{}, fmt.Errorf("unknown KEP machine %q (want use-cases or checkpoint)", t.KEP)
	}
	numbering := sysfs.SiblingsAdjacent
	switch t.Numbering {
	case "", "adjacent":
	case "offset":
		numbering = sysfs.SiblingsOffset
	default:
		return sysfs.Machine{}, fmt.Errorf("unknown numbering %q (want adjacent or offset)", t.Numbering)
	}
	return sysfs.Spec{
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
	return sysfs.Write(dir, m)
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
