package cpuallocator

import (
	"cmp"
	"sort"
)

// exactSearchLimit bounds exhaustive enumeration of NUMA node sets: when
// there are more combinations than this, the search falls back to
// closest-first expansion from each candidate node.
const exactSearchLimit = 1024

// nodeCounts holds a per-NUMA-node count, indexed by node id.
type nodeCounts [maxNUMANodes]int

// countPerNode counts the CPUs of b on each NUMA node.
func (t *Topology) countPerNode(b cpuBits) nodeCounts {
	var c nodeCounts
	for id := range b.All() {
		c[t.nodeOf[id]]++
	}
	return c
}

func (c *nodeCounts) sum(mask NodeMask) int {
	s := 0
	for _, n := range mask.Nodes() {
		s += c[n]
	}
	return s
}

// byCount returns the nodes of the topology outside exclude that have a
// positive count, largest count first, lowest id on ties.
func (t *Topology) byCount(c *nodeCounts, exclude NodeMask) []int {
	var nodes []int
	for _, n := range t.nodes {
		if !exclude.Has(n) && c[n] > 0 {
			nodes = append(nodes, n)
		}
	}
	sort.SliceStable(nodes, func(i, j int) bool { return c[nodes[i]] > c[nodes[j]] })
	return nodes
}

// fewestToReach returns how many of the nodes (ordered largest count first)
// it takes for their counts to reach want, or -1 if all of them do not.
func fewestToReach(c *nodeCounts, nodes []int, want int) int {
	if want <= 0 {
		return 0
	}
	sum := 0
	for i, n := range nodes {
		sum += c[n]
		if sum >= want {
			return i + 1
		}
	}
	return -1
}

// visitNodeSets calls visit with base ∪ S for sets S of k nodes of cands
// (which are ordered largest capacity first). When there are at most
// exactSearchLimit such sets it visits all of them. Otherwise it visits at
// most len(cands)+1 sets: the k first candidates (the largest capacity, so
// a set that fits is always visited when one exists), and for each
// candidate the set grown from it by repeatedly adding the candidate
// closest to the set so far (smallest total distance; on ties the one
// with the most capacity). That costs O(len(cands)² · k) steps. A set may
// be visited more than once.
func (t *Topology) visitNodeSets(base NodeMask, cands []int, k int, visit func(NodeMask)) {
	if k == 0 {
		visit(base)
		return
	}
	if k > len(cands) {
		return
	}
	if binomialAtMost(len(cands), k, exactSearchLimit) {
		var rec func(start int, mask NodeMask, left int)
		rec = func(start int, mask NodeMask, left int) {
			if left == 0 {
				visit(mask)
				return
			}
			for i := start; i <= len(cands)-left; i++ {
				rec(i+1, mask|1<<uint(cands[i]), left-1)
			}
		}
		rec(0, base, k)
		return
	}
	greedy := base
	for _, n := range cands[:k] {
		greedy |= 1 << uint(n)
	}
	visit(greedy)
	// distToSet[n] is the total distance from node n to the set grown so
	// far, kept up to date as nodes are added.
	distToSet := map[int]int{}
	for _, seed := range cands {
		mask := base | 1<<uint(seed)
		for _, n := range cands {
			distToSet[n] = 0
			for _, m := range mask.Nodes() {
				distToSet[n] += t.distances[n][m]
			}
		}
		for added := 1; added < k; added++ {
			best := -1
			for _, n := range cands {
				if !mask.Has(n) && (best < 0 || distToSet[n] < distToSet[best]) {
					best = n
				}
			}
			mask |= 1 << uint(best)
			for _, n := range cands {
				distToSet[n] += t.distances[n][best]
			}
		}
		visit(mask)
	}
}

// binomialAtMost reports whether n choose k is at most limit.
func binomialAtMost(n, k, limit int) bool {
	if k > n-k {
		k = n - k
	}
	c := 1
	for i := 1; i <= k; i++ {
		c = c * (n - k + i) / i
		if c > limit {
			return false
		}
	}
	return true
}

// maskLess reports whether node set x ranks before y of the same width:
// fewer sockets first under align-by-socket, then (when closest is set) the
// smallest total distance between the nodes, then the lowest node ids.
func (a *Allocator) maskLess(x, y NodeMask, closest bool) bool {
	if c := a.maskOrder(x, y, closest); c != 0 {
		return c < 0
	}
	return x.lessByIDs(y)
}

// maskOrder is maskLess without the node ids: -1 when x ranks before y, 1
// after, 0 when they tie on sockets and distance.
func (a *Allocator) maskOrder(x, y NodeMask, closest bool) int {
	if a.opts.AlignBySocket {
		if sx, sy := a.topo.socketsOf(x), a.topo.socketsOf(y); sx != sy {
			return cmp.Compare(sx, sy)
		}
	}
	if closest {
		if dx, dy := a.topo.pairDistance(x), a.topo.pairDistance(y); dx != dy {
			return cmp.Compare(dx, dy)
		}
	}
	return 0
}

// widen returns the fewest NUMA nodes outside base whose capacities hold
// short more CPUs, the closest to base first (see maskLess), or 0 when all
// of them together cannot.
func (a *Allocator) widen(base NodeMask, capacity *nodeCounts, short int) NodeMask {
	cands := a.topo.byCount(capacity, base)
	k := fewestToReach(capacity, cands, short)
	if k < 0 {
		return 0
	}
	best := NodeMask(0)
	a.topo.visitNodeSets(base, cands, k, func(m NodeMask) {
		if capacity.sum(m&^base) >= short && (best == 0 || a.maskLess(m, best, true)) {
			best = m
		}
	})
	return best &^ base
}
