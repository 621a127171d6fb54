package lifecycle

import (
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
	"k8s.io/utils/cpuset"
)

// nodesOf returns the NUMA nodes of cpus.
func (o *Oracle) nodesOf(cpus cpuset.CPUSet) cpuset.CPUSet {
	return o.kubelet.topo.CPUDetails.KeepOnly(cpus).NUMANodes()
}

// cpusIn returns the CPUs of the machine on the NUMA nodes of mask.
func (o *Oracle) cpusIn(mask cpuset.CPUSet) cpuset.CPUSet {
	return o.kubelet.topo.CPUDetails.CPUsInNUMANodes(mask.List()...)
}

// minNodes is the kubelet's minAffinitySize for a request of n CPUs: the
// fewest NUMA nodes whose CPUs (all of them, free or not) can hold it
// (policy_static.go generateCPUTopologyHints). A hint that wide is
// preferred; restricted and single-numa-node admit only preferred hints.
func (o *Oracle) minNodes(n int) int {
	nodes := o.kubelet.topo.CPUDetails.NUMANodes().List()
	best := len(nodes)
	bitmask.IterateBitMasks(nodes, func(m bitmask.BitMask) {
		if o.kubelet.topo.CPUDetails.CPUsInNUMANodes(m.GetBits()...).Size() >= n && m.Count() < best {
			best = m.Count()
		}
	})
	return best
}

// admissibleMasks returns the sets of NUMA nodes a request of n CPUs may
// be placed on under the topology manager's policy: those of the hints
// its policy admits with (policy_single_numa_node.go: one node, preferred;
// policy_restricted.go: preferred, minNodes(n) wide; none and
// best-effort: any, the whole machine).
func (o *Oracle) admissibleMasks(n int) []cpuset.CPUSet {
	nodes := o.kubelet.topo.CPUDetails.NUMANodes().List()
	switch o.cfg.TopologyPolicy {
	case topologymanager.PolicySingleNumaNode, topologymanager.PolicyRestricted:
		width := o.minNodes(n)
		if o.cfg.TopologyPolicy == topologymanager.PolicySingleNumaNode && width != 1 {
			return nil
		}
		var out []cpuset.CPUSet
		bitmask.IterateBitMasks(nodes, func(m bitmask.BitMask) {
			if m.Count() == width {
				out = append(out, cpuset.New(m.GetBits()...))
			}
		})
		return out
	}
	return []cpuset.CPUSet{cpuset.New(nodes...)}
}

// placeable reports whether n CPUs can be placed keeping keep, adding
// CPUs of free, on the nodes of an admissible mask (for a pod of total
// podTotal in the pod scope: the pod's other CPUs podCPUs on it too), in
// whole cores under full-pcpus-only.
func (o *Oracle) placeable(keep, free cpuset.CPUSet, n int, podCPUs cpuset.CPUSet, podTotal int) bool {
	_, ok := o.placement(keep, free, n, podCPUs, podTotal)
	return ok
}

// placement returns such a placement: keep and the lowest usable CPUs of
// free on some NUMA nodes, those the pod holds already first (an init
// container's it reuses: in the pod scope they do not widen the pod), on
// an admissible mask for n CPUs (in the pod scope: the pod's CPUs with
// it, for their count).
func (o *Oracle) placement(keep, free cpuset.CPUSet, n int, podCPUs cpuset.CPUSet, _ int) (cpuset.CPUSet, bool) {
	need := max(0, n-keep.Size())
	nodes := o.kubelet.topo.CPUDetails.NUMANodes().List()
	var found cpuset.CPUSet
	ok := false
	bitmask.IterateBitMasks(nodes, func(bm bitmask.BitMask) {
		if ok {
			return
		}
		m := cpuset.New(bm.GetBits()...)
		if !o.nodesOf(keep).IsSubsetOf(m) || (o.cfg.PodScope() && !o.nodesOf(podCPUs).IsSubsetOf(m)) {
			return
		}
		usable := o.usable(free.Intersection(o.cpusIn(m)))
		own := o.byCore(usable.Intersection(podCPUs))
		pick := append(own, o.byCore(usable.Difference(podCPUs))...)
		if len(pick) < need {
			return
		}
		chosen := keep.Union(cpuset.New(pick[:need]...))
		total := n
		if o.cfg.PodScope() {
			total = podCPUs.Union(chosen).Size()
		}
		for _, am := range o.admissibleMasks(total) {
			if o.nodesOf(chosen).IsSubsetOf(am) && (!o.cfg.PodScope() || o.nodesOf(podCPUs).IsSubsetOf(am)) {
				found, ok = chosen, true
				return
			}
		}
	})
	return found, ok
}

// byCore lists cpus in the order a placement takes them: under
// full-pcpus-only core by core, the cores in order, so that the first k
// are whole cores (cpus are, usable; k is a multiple of the threads per
// core, resizeVerdict); else in CPU order.
func (o *Oracle) byCore(cpus cpuset.CPUSet) []int {
	if !o.cfg.FullPCPUsOnly() {
		return cpus.List()
	}
	var out []int
	details := o.kubelet.topo.CPUDetails.KeepOnly(cpus)
	for _, core := range details.Cores().List() {
		out = append(out, details.CPUsInCores(core).List()...)
	}
	return out
}

// usable returns the CPUs of free a placement may add: under
// full-pcpus-only only whole free cores.
func (o *Oracle) usable(free cpuset.CPUSet) cpuset.CPUSet {
	if !o.cfg.FullPCPUsOnly() {
		return free
	}
	out := cpuset.New()
	for _, core := range o.kubelet.topo.CPUDetails.KeepOnly(free).Cores().List() {
		if cpus := o.kubelet.topo.CPUDetails.CPUsInCores(core); cpus.IsSubsetOf(free) {
			out = out.Union(cpus)
		}
	}
	return out
}

// placementError says what is wrong with a placement of cpus for a
// request of n CPUs (for a pod of total podTotal in the pod scope, whose
// CPUs are podCPUs with these): "" when it is one the kubelet's topology
// manager admits, in whole cores under full-pcpus-only.
func (o *Oracle) placementError(cpus cpuset.CPUSet, n int, podCPUs cpuset.CPUSet, podTotal int) string {
	if cpus.Size() != n {
		return "not " + itoa(n) + " CPUs"
	}
	if o.cfg.FullPCPUsOnly() && !o.usable(cpus).Equals(cpus) {
		return "not whole cores (full-pcpus-only)"
	}
	total, all := n, cpus
	if o.cfg.PodScope() {
		total, all = podTotal, podCPUs.Union(cpus)
	}
	for _, m := range o.admissibleMasks(total) {
		if o.nodesOf(all).IsSubsetOf(m) {
			return ""
		}
	}
	return "on NUMA nodes " + o.nodesOf(all).String() + ", which no hint the " + o.cfg.TopologyPolicy + " policy admits covers"
}
