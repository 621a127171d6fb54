package cpuallocator

import (
	"sort"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// NUMAHints returns the NUMA affinities that can hold n CPUs, made of the
// free CPUs in available plus those in mustKeep, each containing the nodes
// of mustKeep, best first: preferred before not, narrower before wider,
// then (prefer-closest-numa-nodes) smaller total distance, fewer sockets
// (align-by-socket), more preferred CPUs (Preferring), lower node ids. Only
// the narrowest width that fits is returned, no wider than
// max-allowable-numa-nodes; an empty result means none can hold the
// request. Under full-pcpus-only a mask fits only when its whole free cores
// can make up the request, the condition Allocate and Grow meet. The search
// is exhaustive up to exactSearchLimit sets of that width, heuristic beyond
// (visitNodeSets): it never enumerates all 2^N masks.
func (a *Allocator) NUMAHints(available, mustKeep cpuset.CPUSet, n int) []NUMAHint {
	avail, _ := a.topo.bitsOf(available)
	return a.numaHints(avail, mustKeep, n, 0)
}

// NUMAHintsFrom is NUMAHints with the available CPUs as a mask.
func (a *Allocator) NUMAHintsFrom(available cpumask.Mask, mustKeep cpuset.CPUSet, n int) []NUMAHint {
	return a.NUMAHintsCovering(available, mustKeep, n, 0)
}

// NUMAHintsCovering is NUMAHintsFrom keeping only the affinities that
// contain the NUMA nodes cover: the kubelet's static policy disregards
// every mask that leaves out the node of one of the pod's reusable CPUs
// (generateCPUTopologyHints), which the container may then take.
func (a *Allocator) NUMAHintsCovering(available cpumask.Mask, mustKeep cpuset.CPUSet, n int, cover NodeMask) []NUMAHint {
	avail, _ := a.topo.bitsOfMask(available)
	return a.numaHints(avail, mustKeep, n, cover)
}

func (a *Allocator) numaHints(avail cpuBits, mustKeep cpuset.CPUSet, n int, cover NodeMask) []NUMAHint {
	if n <= 0 {
		return nil
	}
	keep, _ := a.topo.bitsOf(mustKeep)
	avail = avail.AndNot(keep)
	if keep.Count() > n {
		return nil
	}
	usable := a.usable(avail, keep)
	capacity := a.topo.countPerNode(usable)
	held := a.topo.countPerNode(keep)
	for _, node := range a.topo.nodes {
		capacity[node] += held[node]
	}
	base := a.topo.nodesOfBits(keep) | cover&a.topo.knownNodes()
	cands := a.topo.byCount(&capacity, base)
	extra := fewestToReach(&capacity, cands, n-capacity.sum(base))
	if extra < 0 {
		return nil
	}
	holds := a.holdsWholeCores(usable, keep, n-keep.Count())
	preferredWidth := a.minWidth(n)
	seen := map[NodeMask]bool{}
	var hints []NUMAHint
	// Counting CPUs gives the width; whole cores of different sizes may
	// need a wider one.
	for ; len(hints) == 0 && extra <= len(cands) && base.Count()+extra <= a.tmOpts.maxNodes(); extra++ {
		a.topo.visitNodeSets(base, cands, extra, func(m NodeMask) {
			if !seen[m] && capacity.sum(m) >= n && holds(m) {
				seen[m] = true
				hints = append(hints, NUMAHint{Nodes: m, Preferred: m.Count() == preferredWidth})
			}
		})
	}
	// With preferred CPUs, a hint whose preferred CPUs hold more of the
	// request ranks first among hints equal on every topology measure.
	prefHeld := map[NodeMask]int{}
	if a.prefer != nil {
		prefUsable := a.usable(avail.And(a.prefer), keep)
		perNode := a.topo.countPerNode(prefUsable)
		for _, h := range hints {
			prefHeld[h.Nodes] = min(perNode.sum(h.Nodes), n-keep.Count())
		}
	}
	sort.Slice(hints, func(i, j int) bool {
		x, y := hints[i], hints[j]
		if x.Preferred != y.Preferred {
			return x.Preferred
		}
		if cx, cy := x.Nodes.Count(), y.Nodes.Count(); cx != cy {
			return cx < cy
		}
		if c := a.maskOrder(x.Nodes, y.Nodes, a.tmOpts.PreferClosestNUMANodes); c != 0 {
			return c < 0
		}
		if px, py := prefHeld[x.Nodes], prefHeld[y.Nodes]; px != py {
			return px > py
		}
		return x.Nodes.lessByIDs(y.Nodes)
	})
	return hints
}

// holdsWholeCores returns a test of whether the usable CPUs of a set of
// NUMA nodes can give need CPUs: always true but under full-pcpus-only with
// whole cores of different sizes, where some of their whole cores must add
// up to need (see wholecores.go).
func (a *Allocator) holdsWholeCores(usable, keep cpuBits, need int) func(NodeMask) bool {
	if !a.opts.FullPCPUsOnly || a.regularCores(usable, keep, need) {
		return func(NodeMask) bool { return true }
	}
	return func(m NodeMask) bool {
		return a.packTree.sizesOf(usable.And(a.topo.bitsInNodes(m))).canMake(need)
	}
}

// minWidth is the width of a preferred hint, as the kubelet defines it: the
// fewest NUMA nodes whose CPUs, free or not, can hold n.
func (a *Allocator) minWidth(n int) int {
	size := a.topo.countPerNode(a.topo.allBits)
	if w := fewestToReach(&size, a.topo.byCount(&size, 0), n); w > 0 {
		return w
	}
	return len(a.topo.nodes)
}
