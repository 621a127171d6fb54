package assemble

import (
	"fmt"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// CPUUse is what a configuration makes of a machine's CPUs, told to
// operators by validate-config, topology and the start-up log.
type CPUUse struct {
	Isolated cpuset.CPUSet
	// Mode is the isolatedCPUs setting.
	Mode config.IsolatedCPUs
	// Exclusive are the CPUs containers may get exclusively; Pool is the
	// shared pool while no container holds exclusive CPUs.
	Exclusive, Pool cpuset.CPUSet
	// NeverPinned are exclusive CPUs full-pcpus-only can never give: a
	// sibling of theirs is reserved, so their core is never whole.
	NeverPinned cpuset.CPUSet
	// Warnings are settings that work but probably not as meant.
	Warnings []string
}

// DescribeCPUs tells what the configuration of pol makes of the machine's
// CPUs.
func DescribeCPUs(cfg *config.Config, pol *policy.Policy) CPUUse {
	topo := pol.Allocator().Topology()
	reserved := pol.Options().Reserved
	u := CPUUse{
		Isolated:    topo.Isolated(),
		Mode:        cfg.IsolatedCPUs,
		Exclusive:   pol.Allocatable(),
		Pool:        pol.PoolBase(),
		NeverPinned: cpuset.New(),
	}
	var split, mixed []string
	if cfg.CPUManagerPolicyOptions.FullPCPUsOnly {
		for _, id := range topo.CPUs().List() {
			core := topo.CoreSiblings(id)
			if id != core.List()[0] {
				continue
			}
			inReserved, isolated := core.Intersection(reserved), core.Intersection(u.Isolated)
			if !inReserved.IsEmpty() {
				if lost := core.Difference(reserved); !lost.IsEmpty() {
					u.NeverPinned = u.NeverPinned.Union(lost)
					split = append(split, fmt.Sprintf("core %s (%s reserved)", core, inReserved))
				}
				continue
			}
			if other := core.Difference(isolated); u.Mode == config.IsolatedCPUsExclusive && !isolated.IsEmpty() && !other.IsEmpty() {
				mixed = append(mixed, fmt.Sprintf("%s (%s not isolated)", core, other))
			}
		}
	}
	if len(split) > 0 {
		u.Warnings = append(u.Warnings, fmt.Sprintf(
			"full-pcpus-only gives whole cores only and the reservation splits %s: CPUs %s can never be exclusive; reserve whole cores (their siblings too) to use them, or leave them to the shared pool",
			strings.Join(split, ", "), u.NeverPinned))
	}
	if len(mixed) > 0 {
		u.Warnings = append(u.Warnings, fmt.Sprintf(
			"cores %s mix isolated and other CPUs: under full-pcpus-only pinning one takes its other CPUs out of the shared pool too (cores of isolated CPUs only are taken first)",
			strings.Join(mixed, ", ")))
	}
	switch {
	case u.Isolated.IsEmpty():
	case u.Mode == config.IsolatedCPUsShared && !u.Pool.Intersection(u.Isolated).IsEmpty():
		u.Warnings = append(u.Warnings, fmt.Sprintf(
			"isolatedCPUs: shared puts the isolated CPUs %s in the shared pool while nobody pins them, as the kubelet does; the kernel does not balance load onto isolated CPUs, so shared containers' threads that land there stay there; isolatedCPUs: exclusive keeps them for pinned containers",
			u.Pool.Intersection(u.Isolated)))
	case u.Mode == config.IsolatedCPUsExclusive:
		if r := reserved.Intersection(u.Isolated); !r.IsEmpty() {
			u.Warnings = append(u.Warnings, fmt.Sprintf(
				"CPUs %s are reserved and isolated: under isolatedCPUs: exclusive no container runs on them (neither exclusive, being reserved, nor shared, being isolated)", r))
		}
	}
	return u
}

// Lines describes the CPU use for humans, one fact per line: what
// isolatedCPUs makes of the isolated CPUs, which CPUs can be exclusive,
// the shared pool, then the warnings.
func (u CPUUse) Lines() []string {
	var isolated string
	switch {
	case u.Isolated.IsEmpty():
		isolated = fmt.Sprintf("isolatedCPUs: %s: no CPU is isolated (isolcpus)", u.Mode)
	case u.Mode == config.IsolatedCPUsExclusive:
		isolated = fmt.Sprintf("isolatedCPUs: exclusive: the isolated CPUs %s serve exclusive containers only, which take them before any other CPU; shared containers never run on them", u.Isolated)
	default:
		isolated = fmt.Sprintf("isolatedCPUs: shared: the isolated CPUs %s are like any other CPU, in the shared pool while nobody pins them", u.Isolated)
	}
	lines := []string{
		isolated,
		fmt.Sprintf("CPUs for exclusive containers: %s", exclusiveText(u)),
		fmt.Sprintf("shared pool without exclusive containers: %s", u.Pool),
	}
	for _, w := range u.Warnings {
		lines = append(lines, "warning: "+w)
	}
	return lines
}

func exclusiveText(u CPUUse) string {
	if u.NeverPinned.IsEmpty() {
		return u.Exclusive.String()
	}
	return fmt.Sprintf("%s (under full-pcpus-only only %s)", u.Exclusive, orNone(u.Exclusive.Difference(u.NeverPinned)))
}

func orNone(s cpuset.CPUSet) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
