package lifecycle

import (
	"fmt"
	"strconv"

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/test/kubernetes/placement"
)

// Config is a node the lives are played on: a machine and the CPU and
// topology manager configuration both sides run with.
type Config struct {
	Name    string
	Machine placement.MachineSpec
	// Reserved are the reservedSystemCPUs of both sides (never exclusive,
	// always in the shared pool).
	Reserved cpuset.CPUSet
	// TopologyPolicy and TopologyScope are the topology manager's
	// (topologymanager.PolicyNone, ...; ContainerTopologyScope, ...).
	TopologyPolicy, TopologyScope string
	// Options are the static policy's options, as the kubelet's
	// cpuManagerPolicyOptions.
	Options map[string]string
}

// oneNUMA is the machine of the first comparison: 16 CPUs in 8 cores of 2
// threads, one socket and NUMA node, siblings numbered apart.
var oneNUMA = placement.MachineSpec{Name: "16 1s×1n×8c×2t",
	Spec: fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 1, CoresPerNUMA: 8, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}}

// twoNUMA is 16 CPUs on two NUMA nodes of 4 cores of 2 threads (node 0:
// CPUs 0-3 and their siblings 8-11; node 1: 4-7 and 12-15).
var twoNUMA = placement.MachineSpec{Name: "16 1s×2n×4c×2t",
	Spec: fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 4, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}}

// twoNUMAIsolated is twoNUMA booted with isolcpus=4-7 (isolated CPUs on
// node 1): the kubelet treats them as any CPU, and so does the plugin
// with isolatedCPUs: shared, its default.
var twoNUMAIsolated = placement.MachineSpec{Name: "16 1s×2n×4c×2t isolcpus=4-7",
	Spec: fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 4, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset,
		Isolated: []int{4, 5, 6, 7}}}

// Configs are the nodes a seed may be played on; seed n plays
// Configs[n % len(Configs)].
var Configs = []Config{
	{Name: "one-numa-none", Machine: oneNUMA, Reserved: cpuset.New(0),
		TopologyPolicy: topologymanager.PolicyNone, TopologyScope: topologymanager.ContainerTopologyScope},
	{Name: "two-numa-single-numa-node-container", Machine: twoNUMA, Reserved: cpuset.New(0),
		TopologyPolicy: topologymanager.PolicySingleNumaNode, TopologyScope: topologymanager.ContainerTopologyScope},
	{Name: "two-numa-restricted-pod", Machine: twoNUMA, Reserved: cpuset.New(0),
		TopologyPolicy: topologymanager.PolicyRestricted, TopologyScope: topologymanager.PodTopologyScope},
	// Reserved CPUs that are whole cores: the kubelet's full-pcpus-only
	// counts the cores of reserved CPUs as taken (reservedPhysicalCPUs).
	{Name: "two-numa-single-numa-node-pod-full-pcpus-only", Machine: twoNUMA, Reserved: cpuset.New(0, 8),
		TopologyPolicy: topologymanager.PolicySingleNumaNode, TopologyScope: topologymanager.PodTopologyScope,
		Options: map[string]string{"full-pcpus-only": "true"}},
	{Name: "two-numa-reserved-isolated-single-numa-node", Machine: twoNUMAIsolated, Reserved: cpuset.New(0, 1),
		TopologyPolicy: topologymanager.PolicySingleNumaNode, TopologyScope: topologymanager.ContainerTopologyScope},
}

// ConfigNamed returns the configuration called name.
func ConfigNamed(name string) (Config, error) {
	for _, c := range Configs {
		if c.Name == name {
			return c, nil
		}
	}
	return Config{}, fmt.Errorf("no node configuration %q", name)
}

// FullPCPUsOnly reports whether the static policy allocates whole cores.
func (c Config) FullPCPUsOnly() bool {
	on, _ := strconv.ParseBool(c.Options["full-pcpus-only"])
	return on
}

// PodScope reports whether the topology manager aligns whole pods.
func (c Config) PodScope() bool {
	return c.TopologyPolicy != topologymanager.PolicyNone && c.TopologyScope == topologymanager.PodTopologyScope
}

// pluginOptions are the plugin's policy and allocator options for c.
func (c Config) pluginOptions() (cpuallocator.StaticPolicyOptions, cpuallocator.TopologyPolicy, cpuallocator.TopologyScope, error) {
	opts, errs := cpuallocator.ParseStaticPolicyOptions(c.Options)
	if len(errs) > 0 {
		return opts, "", "", fmt.Errorf("%s: static policy options: %v", c.Name, errs)
	}
	tp, err := cpuallocator.ParseTopologyPolicy(c.TopologyPolicy)
	if err != nil {
		return opts, "", "", fmt.Errorf("%s: %w", c.Name, err)
	}
	scope, err := cpuallocator.ParseTopologyScope(c.TopologyScope)
	if err != nil {
		return opts, "", "", fmt.Errorf("%s: %w", c.Name, err)
	}
	return opts, tp, scope, nil
}
