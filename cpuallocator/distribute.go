package cpuallocator

// distribute takes up to need CPUs of avail (all usable) for a container
// holding held, under distribute-cpus-across-numa, leaving a remainder the
// whole cores of rest can make up when rest is not nil (see fillStage):
//
//   - a new container whose request fits one NUMA node is packed there;
//   - otherwise the request is spread evenly, in groups of groupSize(), over
//     the fewest NUMA nodes that can each hold an even share, closest nodes
//     first; for a new container the sets of nodes, and the groups
//     beyond the even shares, go where they split the fewest cores first;
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
	var stats map[int]groupStats // per node, for a new container spread over nodes
	switch {
	case heldNodes == 0:
		if a.fitsOneNode(&capacity, need) {
			return a.pack(avail, held, need, leftFor(rest, need), fresh)
		}
		target, stats = a.evenNodes(&capacity, need, avail, fresh && rest == nil)
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
	if fresh && heldNodes == 0 && rest == nil {
		a.fewerSplitShares(target, &shares, &capacity, stats)
	}
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

// evenNodes returns the fewest NUMA nodes over which need CPUs of avail
// split evenly in groups of groupSize() (each node gets q or q+1 groups)
// fit, the closest set among those of that width, or 0. For a new
// container (fresh) a split fits when every node holds q groups and the
// nodes together the rest, as the kubelet checks it, and sets rank by the
// split cores of their shares (extraShares) before their distance; the
// per-node stats they were ranked by are returned too.
func (a *Allocator) evenNodes(capacity *nodeCounts, need int, avail cpuBits, fresh bool) (NodeMask, map[int]groupStats) {
	g := a.groupSize()
	groups := need / g
	var stats map[int]groupStats
	if fresh {
		stats = map[int]groupStats{}
		for _, n := range a.topo.nodes {
			if capacity[n] > 0 {
				stats[n] = statsOfBits(a.packTree, avail.And(a.topo.nodeBits[n]))
			}
		}
	}
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
		best, bestCost := NodeMask(0), 0
		a.topo.visitNodeSets(0, cands, k, func(m NodeMask) {
			cost := 0
			if fresh {
				var ok bool
				if _, cost, ok = a.extraShares(m, capacity, stats, q*g, rem*g); !ok {
					return
				}
			} else {
				bigger := 0
				for _, n := range m.Nodes() {
					if capacity[n] >= (q+1)*g {
						bigger++
					}
				}
				if bigger < rem {
					return
				}
			}
			if best == 0 || a.evenLess(m, best, cost, bestCost) {
				best, bestCost = m, cost
			}
		})
		if best != 0 {
			return best, stats
		}
	}
	return 0, stats
}

// evenLess ranks node sets of the same width for evenNodes: fewer sockets
// first under align-by-socket, then the fewer split cores of their shares,
// then the smallest total distance between the nodes, then the lowest ids
// (maskLess with the split cores).
func (a *Allocator) evenLess(x, y NodeMask, costX, costY int) bool {
	if a.opts.AlignBySocket {
		if sx, sy := a.topo.socketsOf(x), a.topo.socketsOf(y); sx != sy {
			return sx < sy
		}
	}
	if costX != costY {
		return costX < costY
	}
	return a.maskLess(x, y, true)
}

// extraShares spreads rem CPUs, in groups of groupSize(), over the nodes
// of m on top of share CPUs each, the fewest split cores first (coreCost of
// each node's CPUs in stats), then as evenly as possible, then more on the
// lower node ids. It returns the CPUs per node, their split cores, and
// false when the nodes' capacities cannot hold share each and rem more.
func (a *Allocator) extraShares(m NodeMask, capacity *nodeCounts, stats map[int]groupStats, share, rem int) (nodeCounts, int, bool) {
	g := a.groupSize()
	nodes := m.Nodes()
	type cell struct {
		cost, squares int
		ok            bool
		extra         int // groups given to this cell's node
	}
	steps := rem / g
	// dp[i][j]: the best split of j extra groups over nodes[:i].
	dp := make([][]cell, len(nodes)+1)
	for i := range dp {
		dp[i] = make([]cell, steps+1)
	}
	dp[0][0].ok = true
	for i, n := range nodes {
		room := (capacity[n] - share) / g
		if room < 0 {
			return nodeCounts{}, 0, false
		}
		for j := 0; j <= steps; j++ {
			// More groups on this (lower) node first: ties keep them.
			for e := min(room, j); e >= 0; e-- {
				prev := dp[i][j-e]
				if !prev.ok {
					continue
				}
				c := cell{cost: prev.cost + a.coreCost(stats[n], share+e*g), squares: prev.squares + e*e, ok: true, extra: e}
				if cur := dp[i+1][j]; !cur.ok || c.cost < cur.cost || (c.cost == cur.cost && c.squares < cur.squares) {
					dp[i+1][j] = c
				}
			}
		}
	}
	if !dp[len(nodes)][steps].ok {
		return nodeCounts{}, 0, false
	}
	var shares nodeCounts
	j := steps
	for i := len(nodes); i > 0; i-- {
		e := dp[i][j].extra
		shares[nodes[i-1]] = share + e*g
		j -= e
	}
	return shares, dp[len(nodes)][steps].cost, true
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

// fewerSplitShares replaces, for a new container, waterFill's even
// shares (each node share or share+1 groups) by extraShares' when those
// split fewer cores. stats are the per-node stats evenNodes ranked by.
func (a *Allocator) fewerSplitShares(target NodeMask, shares, capacity *nodeCounts, stats map[int]groupStats) {
	nodes := target.Nodes()
	share, total := -1, 0
	for _, n := range nodes {
		if share < 0 || shares[n] < share {
			share = shares[n]
		}
		total += shares[n]
	}
	cost := 0
	for _, n := range nodes {
		cost += a.coreCost(stats[n], shares[n])
	}
	if better, c, ok := a.extraShares(target, capacity, stats, share, total-share*len(nodes)); ok && c < cost {
		*shares = better
	}
}
