package policy

import (
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// NUMAZone is the CPUs of one NUMA node as the policy sees them.
type NUMAZone struct {
	Node int
	// Capacity is the node's online CPUs, Allocatable those that may be
	// exclusive (not reserved), Available those that are free for an
	// exclusive container now.
	Capacity, Allocatable, Available int
	// Distances are the NUMA distances (sysfs) to every NUMA node, this
	// one included, by node.
	Distances map[int]int
}

// TopologyView is what a node's NodeResourceTopology says: the NUMA
// nodes' CPUs and the topology manager's policy and scope in force.
type TopologyView struct {
	Zones []NUMAZone
	// Policy and Scope are in the kubelet's words ("none", "container"
	// when unset).
	Policy, Scope string
}

// TopologyView returns every NUMA node's CPUs, free being the CPUs free
// for an exclusive container now (Free), with the policy and scope that
// place them.
func (p *Policy) TopologyView(free cpuset.CPUSet) TopologyView {
	v := TopologyView{Policy: string(p.opts.TopologyPolicy), Scope: string(p.opts.TopologyScope)}
	if v.Policy == "" {
		v.Policy = string(cpuallocator.TopologyNone)
	}
	if v.Scope == "" {
		v.Scope = string(cpuallocator.ScopeContainer)
	}
	topo := p.alloc.Topology()
	for _, node := range topo.NUMANodes() {
		cpus := topo.CPUsInNUMANodes(cpuallocator.NewNodeMask(node))
		distances := make(map[int]int, len(topo.NUMANodes()))
		for _, other := range topo.NUMANodes() {
			distances[other] = topo.Distance(node, other)
		}
		v.Zones = append(v.Zones, NUMAZone{Node: node, Capacity: cpus.Size(),
			Allocatable: cpus.Intersection(p.allocatable).Size(), Available: cpus.Intersection(free).Size(), Distances: distances})
	}
	return v
}

// admitsNUMAHints reports whether the topology manager policy refuses what
// it cannot place in a preferred NUMA affinity (single-numa-node,
// restricted).
func (p *Policy) admitsNUMAHints() bool {
	return p.opts.TopologyPolicy == cpuallocator.TopologySingleNUMANode || p.opts.TopologyPolicy == cpuallocator.TopologyRestricted
}

// AlignsDevices reports whether the topology manager policy places CPUs
// with the containers' devices (any but none): only then are their
// devices' NUMA nodes worth looking up.
func (p *Policy) AlignsDevices() bool {
	return p.opts.TopologyPolicy != cpuallocator.TopologyNone && p.opts.TopologyPolicy != ""
}

// OffDeviceNodes counts the running exclusive containers some of whose
// CPUs are not on the NUMA nodes of their devices: under best-effort when
// the devices' nodes had too few free CPUs, or CPUs placed before a
// restart with another topology manager policy. 0 under
// topologyManagerPolicy: none, which does not align.
func (p *Policy) OffDeviceNodes(m *Model) int {
	if !p.AlignsDevices() {
		return 0
	}
	off := 0
	for id, t := range m.Containers.All() {
		if t.Stopped || !t.Exclusive || t.DeviceNodes == 0 {
			continue
		}
		if cpus := m.CPUsOf(id); !cpus.IsEmpty() && !cpus.IsSubsetOf(p.topo.CPUsInNUMANodes(t.DeviceNodes)) {
			off++
		}
	}
	return off
}
