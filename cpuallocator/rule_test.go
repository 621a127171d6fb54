package cpuallocator_test

import (
	"fmt"
	"math/bits"
	"math/rand"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// ruleShape is what the placement rule compares of a new container's
// CPUs, in its order: sockets, NUMA nodes, and the cores used in part
// (under distribute-cpus-across-cores: the CPUs stacked on a core the
// container already uses).
type ruleShape struct{ sockets, nodes, cores int }

func (s ruleShape) less(o ruleShape) bool {
	if s.sockets != o.sockets {
		return s.sockets < o.sockets
	}
	if s.nodes != o.nodes {
		return s.nodes < o.nodes
	}
	return s.cores < o.cores
}

func (s ruleShape) String() string {
	return fmt.Sprintf("%d sockets, %d NUMA nodes, %d cores", s.sockets, s.nodes, s.cores)
}

func shapeOf(t testing.TB, topo *cpuallocator.Topology, cpus cpuset.CPUSet, spread bool) ruleShape {
	t.Helper()
	sockets, nodes, cores := map[int]bool{}, map[int]bool{}, map[int]int{}
	for _, id := range cpus.UnsortedList() {
		info, ok := topo.CPU(id)
		if !ok {
			t.Fatalf("CPU %d is not in the topology", id)
		}
		sockets[info.Socket], nodes[info.NUMANode] = true, true
		cores[info.Core]++
	}
	s := ruleShape{sockets: len(sockets), nodes: len(nodes)}
	if spread {
		s.cores = cpus.Size() - len(cores)
		return s
	}
	for _, id := range cpus.UnsortedList() {
		if sib := topo.CoreSiblings(id); !sib.IsSubsetOf(cpus) && cpus.Intersection(sib).List()[0] == id {
			s.cores++
		}
	}
	return s
}

func TestPlacementRule(t *testing.T) {
	issue512 := fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 32, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}
	offset64 := fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 8, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}
	offset128 := fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 8, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}
	tests := []struct {
		name      string
		machine   fakesysfs.Spec
		opts      cpuallocator.StaticPolicyOptions
		available string
		n         int
		affinity  cpuallocator.NodeMask
		want      string
	}{
		// The kubelet v1.36.3 takes 128,384 here; the packed order alone
		// took 19,23, two halves of cores whose siblings others hold, on
		// as many NUMA nodes and sockets.
		{name: "issue 13: a whole free core beats two halves of a tighter node", machine: issue512, available: "19,23,128-255,384-511", n: 2, want: "128,384"},
		{name: "one CPU still completes a half-used core", machine: issue512, available: "19,23,128-255,384-511", n: 1, want: "19"},
		{name: "three: a whole core and a half-used one of the same node", machine: issue512, available: "19,23,128-255,275,384-511", n: 3, want: "19,23,275"},
		// 64 CPUs, core k = {k, k+32}, node n = cores 8n..8n+7.
		// Socket 1 alone has 12 free CPUs, socket 0 7: both are needed.
		// Taking all of socket 1 also takes node 2's half-used core 18 and
		// node 3's 63; two nodes do: 3 whole cores of node 0 and 5 of
		// node 2, plus one half.
		{name: "across sockets: the fewest NUMA nodes, whole cores first", machine: offset64, available: "2-4,17-18,20-23,33-36,49,52-55,63", n: 17, want: "2-4,17,20-23,33-36,49,52-55"},
		{name: "across sockets: even count, no half-used core", machine: offset64, available: "2-4,17-18,20-23,33-36,49,52-55,63", n: 16, want: "2-4,17,20-23,34-36,49,52-55"},
		// The tightest uncore cache holds 4 CPUs as halves; 2 whole cores
		// of another cache of the node split none.
		{name: "uncore: whole cores before a tighter cache of halves", machine: fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, ThreadsPerCore: 2, L3PerNUMA: 2}, opts: byUncore, available: "0,2,4,6,8-11", n: 4, want: "8-11"},
		// distribute-cpus-across-cores: one thread per core, in the node
		// whose cores allow it rather than the tighter one.
		{name: "across cores: the node with enough cores", machine: offset64, opts: acrossCore, available: "6-7,38-39,16-23", n: 4, want: "16-19"},
		// distribute-cpus-across-numa, when the request fits one node, is
		// packed by the same rule.
		{name: "across NUMA: one node, whole core", machine: offset64, opts: acrossNUMA, available: "1,5,16-23,48-55", n: 2, want: "16,48"},
		// Otherwise each node's share (q or q+1 CPUs) is placed by the rule,
		// and among equally close node sets, and for the extra CPU of an
		// odd split, the option takes the fewest split cores.
		// 128 CPUs, core k = {k, k+64}, node n = cores 8n..8n+7; node 0
		// holds 4 halves of cores and one whole core, nodes 1 and 2 three
		// whole cores each.
		{name: "across NUMA: the node pair whose shares split no core", machine: offset128, opts: acrossNUMA, available: "0-4,68,8-10,72-74,16-18,80-82", n: 12, want: "8-10,16-18,72-74,80-82"},
		// 7 = 4+3: node 0 (a whole core and two halves) takes 3, node 1
		// (two whole cores) the 4.
		{name: "across NUMA: the extra CPU where it completes a core", machine: offset128, opts: acrossNUMA, available: "0-1,4,68,8-9,72-73", n: 7, want: "0,4,8-9,68,72-73"},
		// With an affinity the rule applies inside it: node 1's whole
		// core is tighter than node 2's but outside.
		{name: "affinity: the rule inside the affinity", machine: offset64, available: "1,5,8,40,16-23,48-55", n: 2, affinity: cpuallocator.NewNodeMask(0, 2), want: "16,48"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topo := topologyOf(t, tc.machine)
			a := allocatorFor(t, topo, tc.opts, cpuallocator.TopologyOptions{})
			got, err := a.Allocate(cpus(t, tc.available), tc.n, tc.affinity)
			checkResult(t, got, err, tc.want, nil)
		})
	}
}

// TestPlacementRulePreferred: the preference for isolated CPUs
// (isolatedCPUs: exclusive) takes them only where that splits no more
// cores.
func TestPlacementRulePreferred(t *testing.T) {
	offset64 := fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 8, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}
	tests := []struct {
		name      string
		preferred string
		available string
		n         int
		want      string
	}{
		// 1 and 5 are isolated halves of cores whose siblings others
		// hold; a whole core of node 2 splits none.
		{name: "isolated halves do not beat a whole core", preferred: "1,5", available: "1,5,16-23,48-55", n: 2, want: "16,48"},
		{name: "an isolated whole core comes first", preferred: "1,5,33", available: "1,5,33,16-23,48-55", n: 2, want: "1,33"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := allocatorFor(t, topologyOf(t, offset64), none, cpuallocator.TopologyOptions{}).Preferring(cpus(t, tc.preferred))
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Allocate(cpus(t, tc.available), tc.n, 0)
			checkResult(t, got, err, tc.want, nil)
		})
	}
}

// TestPlacementRuleExhaustive compares Allocate with every choice of n of
// the free CPUs on small machines: its shape is the least one, sockets
// first, then NUMA nodes, then cores, so no choice beats it on one count
// without losing on another.
func TestPlacementRuleExhaustive(t *testing.T) {
	missing := twoSocketFourNodes
	missing.Offline = []int{3, 9}
	threeByThree := fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 3, CoresPerNUMA: 3, ThreadsPerCore: 2}
	tests := []struct {
		name    string
		machine fakesysfs.Spec
		opts    cpuallocator.StaticPolicyOptions
	}{
		{"packed", twoSocketFourNodes, none},
		{"packed, offset siblings", fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}, none},
		{"packed, cores missing a thread", missing, none},
		{"full-pcpus-only", twoSocketFourNodes, fullPCPUs},
		{"distribute-cpus-across-cores", twoSocketFourNodes, acrossCore},
		{"prefer-align-cpus-by-uncorecache", twoL3, byUncore},
		{"align-by-socket", twoSocketFourNodes, bySocket},
		{"packed, three nodes of three cores", threeByThree, none},
		{"distribute-cpus-across-cores, three nodes of three cores", threeByThree, acrossCore},
	}
	r := rand.New(rand.NewSource(13))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topo := topologyOf(t, tc.machine)
			a := allocatorFor(t, topo, tc.opts, cpuallocator.TopologyOptions{})
			spread := tc.opts.DistributeCPUsAcrossCores
			least := newShapeTable(t, topo, spread, tc.opts.FullPCPUsOnly)
			for range 150 {
				var free uint64
				for i := range least.ids {
					if r.Intn(3) > 0 {
						free |= 1 << i
					}
				}
				best := least.of(free)
				set := least.set(free)
				for n := 1; n <= set.Size(); n++ {
					if tc.opts.FullPCPUsOnly && n%2 != 0 {
						continue
					}
					got, err := a.Allocate(set, n, 0)
					want, ok := best[n]
					switch {
					case !ok && err == nil:
						t.Fatalf("%d of %s: got %s, no choice of whole cores exists", n, set, got)
					case !ok:
					case err != nil:
						t.Fatalf("%d of %s: %v", n, set, err)
					default:
						if sh := shapeOf(t, topo, got, spread); sh != want {
							t.Fatalf("%d of %s: got %s (%s), the least shape is %s", n, set, got, sh, want)
						}
					}
				}
			}
		})
	}
}

// shapeTable measures every subset of a small machine's CPUs (bit i is
// ids[i]).
type shapeTable struct {
	ids                []int
	socket, node       []int
	siblings           []uint64 // per CPU: its core's CPUs
	spread, wholeCores bool
}

func newShapeTable(t testing.TB, topo *cpuallocator.Topology, spread, wholeCores bool) *shapeTable {
	t.Helper()
	st := &shapeTable{ids: topo.CPUs().List(), spread: spread, wholeCores: wholeCores}
	if len(st.ids) > 20 {
		t.Fatalf("%d CPUs: too many to enumerate", len(st.ids))
	}
	bit := map[int]int{}
	for i, id := range st.ids {
		bit[id] = i
	}
	for _, id := range st.ids {
		info, _ := topo.CPU(id)
		st.socket = append(st.socket, info.Socket)
		st.node = append(st.node, info.NUMANode)
		var sib uint64
		for _, s := range topo.CoreSiblings(id).List() {
			sib |= 1 << bit[s]
		}
		st.siblings = append(st.siblings, sib)
	}
	return st
}

func (st *shapeTable) set(mask uint64) cpuset.CPUSet {
	var ids []int
	for i, id := range st.ids {
		if mask&(1<<i) != 0 {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...)
}

// of returns the least shape of each size of subset of free (sizes no
// subset reaches, under full-pcpus-only, are absent).
func (st *shapeTable) of(free uint64) map[int]ruleShape {
	best := map[int]ruleShape{}
	for sub := free; ; sub = (sub - 1) & free {
		if sub != 0 {
			if sh, ok := st.shape(sub); ok {
				n := bits.OnesCount64(sub)
				if cur, seen := best[n]; !seen || sh.less(cur) {
					best[n] = sh
				}
			}
		}
		if sub == 0 {
			return best
		}
	}
}

func (st *shapeTable) shape(sub uint64) (ruleShape, bool) {
	var sockets, nodes uint64
	var sh ruleShape
	for i := range st.ids {
		if sub&(1<<i) == 0 {
			continue
		}
		sockets |= 1 << st.socket[i]
		nodes |= 1 << st.node[i]
		whole := st.siblings[i]&^sub == 0
		if st.wholeCores && !whole {
			return sh, false
		}
		first := st.siblings[i]&sub&(1<<i-1) == 0 // the lowest of its core in sub
		switch {
		case st.spread && !first:
			sh.cores++
		case !st.spread && first && !whole:
			sh.cores++
		}
	}
	sh.sockets, sh.nodes = bits.OnesCount64(sockets), bits.OnesCount64(nodes)
	return sh, true
}
