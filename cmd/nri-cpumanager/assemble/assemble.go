// Package assemble turns a validated configuration into the objects the
// plugin runs with: the topology, the allocator, the reserved CPUs and the
// policy. The command, the simulator and the test suites share it, so that
// a configuration means the same thing everywhere.
package assemble

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Policy builds the allocator and the policy for a topology. Reserved CPUs
// given as a count are placed by the allocator (lowest-numbered whole cores
// first, like the kubelet).
func Policy(cfg *config.Config, topo *cpuallocator.Topology) (*policy.Policy, error) {
	alloc, err := cpuallocator.NewAllocator(topo, cfg.CPUManagerPolicyOptions, cfg.TopologyManagerPolicyOptions)
	if err != nil {
		return nil, fmt.Errorf("cpuManagerPolicyOptions/topologyManagerPolicyOptions: %w", err)
	}
	reserved, err := Reserved(cfg, alloc)
	if err != nil {
		return nil, err
	}
	pol, err := policy.New(alloc, policy.Options{
		Reserved:          reserved,
		IsolatedExclusive: cfg.IsolatedCPUs == config.IsolatedCPUsExclusive,
		TopologyPolicy:    cfg.TopologyManagerPolicy,
		TopologyScope:     cfg.TopologyManagerScope,
		InPlaceResize:     cfg.InPlaceResize,
		ScaleDownDelay:    cfg.ScaleDownDelay,
		AlignMemory:       cfg.AlignMemory,
	})
	if err != nil {
		return nil, err
	}
	return pol, nil
}

// Reserved returns the reserved CPUs of a configuration on the allocator's
// topology.
func Reserved(cfg *config.Config, alloc *cpuallocator.Allocator) (cpuset.CPUSet, error) {
	if cfg.ReservedCPUCount > 0 {
		cpus, err := alloc.ReservedCPUs(cfg.ReservedCPUCount)
		if err != nil {
			return cpuset.New(), fmt.Errorf("reservedCPUCount: %w", err)
		}
		return cpus, nil
	}
	online := alloc.Topology().CPUs()
	if !cfg.ReservedSystemCPUs.IsSubsetOf(online) {
		return cpuset.New(), fmt.Errorf("reservedSystemCPUs: CPUs %s are not online on this machine (online: %s)",
			cfg.ReservedSystemCPUs.Difference(online), online)
	}
	return cfg.ReservedSystemCPUs, nil
}

// FromSysfs discovers the topology under cfg.SysfsRoot and builds the
// policy for it.
func FromSysfs(cfg *config.Config) (*policy.Policy, error) {
	topo, err := cpuallocator.Discover(cfg.SysfsRoot)
	if err != nil {
		return nil, fmt.Errorf("discovering the CPU topology under %s: %w", cfg.SysfsRoot, err)
	}
	return Policy(cfg, topo)
}
