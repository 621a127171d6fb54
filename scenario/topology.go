package scenario

import (
	"fmt"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// Machine returns the machine a scenario's topology describes.
func (t Topology) Machine() (fakesysfs.Machine, error) {
	m, err := t.machine()
	if err != nil {
		return m, err
	}
	if t.Distances != nil {
		m.Distances = t.Distances
		if err := m.Validate(); err != nil {
			return fakesysfs.Machine{}, fmt.Errorf("distances: %w", err)
		}
	}
	if t.Isolated == "" {
		return m, nil
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

// WriteSysfs writes the machine as a sysfs tree under dir.
func (t Topology) WriteSysfs(dir string) error {
	m, err := t.Machine()
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	return fakesysfs.Write(dir, m)
}
