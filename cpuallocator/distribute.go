package cpuallocator

// distribute takes up to need CPUs of avail (all usable) for a container
// holding held, under distribute-cpus-across-numa, leaving a remainder the
// whole cores of rest can make up when rest is not nil (see fillStage):
//
//   - a new container whose request fits one NUMA node is packed there;
//   - otherwise the request is spread evenly, in groups of groupSize(), over
//     the fewest NUMA nodes that can each hold an even share, closest nodes
//     first;
//   - a growing container keeps its nodes; if they cannot hold the growth
//     the fewest closest extra nodes join them, and the new CPUs go to the
//     node with the fewest CPUs of the container each time, so the
//     per-node counts end as even as the free CPUs allow.
//
// When no set of nodes can take an even share the request is packed.
func (a *Allocator) distribute(avail, held cpuBits, need int, rest cpuBits, fresh bool) cpuBits {
	capacity := a.topo.countPerNode(avail)
	heldNodes := a.topo.nodesOfBits(held)
	var target NodeMask
	switch {
	case heldNodes == 0:
		if a.fitsOneNode(&capacity, need) {
			return a.pack(avail, held, need, leftFor(rest, need), fresh)
		}
		target = a.evenNodes(&capacity, need)
		if target == 0 {
			return a.pack(avail, held, need, leftFor(rest, need), fresh)
		}
	case heldNodes.Count() == 1 && capacity.sum(heldNodes) >= need:
		return a.pack(avail, held, need, leftFor(rest, need), fresh)
	default:
		target = heldNodes
		if short := need - capacity.sum(heldNodes); short > 0 {
			target |= a.widen(heldNodes, &capacity, short)
		}
	}
	shares := a.waterFill(target, a.topo.countPerNode(held), capacity, need)
	picked := a.topo.newBits()
	for _, n := range target.Nodes() {
		if shares[n] == 0 {
			continue
		}
		nodeAvail := avail.And(a.topo.nodeBits[n])
		left := leftFor(a.besides(avail, rest, nodeAvail, picked), need-picked.Count())
		picked = picked.Or(a.pack(nodeAvail, held.Or(picked), shares[n], left, fresh))
	}
	return picked
}

// besides returns what the rest of a request may come from once part of
// avail has given its share: rest and the CPUs of avail outside part and
// picked; nil when rest is (the regular case).
func (a *Allocator) besides(avail, rest, part, picked cpuBits) cpuBits {
	if rest == nil {
		return nil
	}
	return outside(rest.Or(avail), part, picked)
}

func (a *Allocator) fitsOneNode(capacity *nodeCounts, need int) bool {
	for _, n := range a.topo.nodes {
		if capacity[n] >= need {
			return true
		}
	}
	return false
}

// evenNodes returns the fewest NUMA nodes over which need CPUs split evenly
// in groups of groupSize() (each node gets q or q+1 groups) fit, the
// closest set among those of that width, or 0.
func (a *Allocator) evenNodes(capacity *nodeCounts, need int) NodeMask {
	g := a.groupSize()
	groups := need / g
	for k := 2; k <= len(a.topo.nodes) && k <= groups; k++ {
		q, rem := groups/k, groups%k
		var cands []int
		for _, n := range a.topo.byCount(capacity, 0) {
			if capacity[n] >= q*g {
				cands = append(cands, n)
			}
		}
		if len(cands) < k {
			continue
		}
		best := NodeMask(0)
		a.topo.visitNodeSets(0, cands, k, func(m NodeMask) {
			bigger := 0
			for _, n := range m.Nodes() {
				if capacity[n] >= (q+1)*g {
					bigger++
				}
			}
			if bigger >= rem && (best == 0 || a.maskLess(m, best, true)) {
				best = m
			}
		})
		if best != 0 {
			return best
		}
	}
	return 0
}

// waterFill splits need CPUs over the nodes of target in groups of
// groupSize(): each group goes to the node holding the fewest CPUs of the
// container (held plus groups given so far) that still has room for a
// group, lowest id on ties. It returns the CPUs to take per node.
func (a *Allocator) waterFill(target NodeMask, held, capacity nodeCounts, need int) nodeCounts {
	g := a.groupSize()
	var shares nodeCounts
	nodes := target.Nodes()
	for need >= g {
		best := -1
		for _, n := range nodes {
			if capacity[n]-shares[n] >= g && (best < 0 || held[n]+shares[n] < held[best]+shares[best]) {
				best = n
			}
		}
		if best < 0 {
			break
		}
		shares[best] += g
		need -= g
	}
	return shares
}
