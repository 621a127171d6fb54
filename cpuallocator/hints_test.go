package cpuallocator_test

import (
	"reflect"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

func TestNUMAHints(t *testing.T) {
	node := cpuallocator.NewNodeMask
	hint := func(preferred bool, nodes ...int) cpuallocator.NUMAHint {
		return cpuallocator.NUMAHint{Nodes: node(nodes...), Preferred: preferred}
	}
	closest := cpuallocator.TopologyOptions{PreferClosestNUMANodes: true}
	tests := []struct {
		name      string
		machine   fakesysfs.Spec
		opts      cpuallocator.StaticPolicyOptions
		tm        cpuallocator.TopologyOptions
		available string
		mustKeep  string
		n         int
		want      []cpuallocator.NUMAHint
	}{
		{name: "both nodes fit", machine: kep12, available: "1-11", n: 4, want: []cpuallocator.NUMAHint{hint(true, 0), hint(true, 1)}},
		{name: "one node fits", machine: kep12, available: "1-11", n: 6, want: []cpuallocator.NUMAHint{hint(true, 1)}},
		{name: "needs both nodes", machine: kep12, available: "1-11", n: 7, want: []cpuallocator.NUMAHint{hint(true, 0, 1)}},
		{name: "cannot fit", machine: kep12, available: "1-11", n: 12, want: nil},
		{name: "zero", machine: kep12, available: "1-11", n: 0, want: nil},
		{name: "must-keep node fits the growth", machine: kep12, available: "1-5,8-11", mustKeep: "6-7", n: 5, want: []cpuallocator.NUMAHint{hint(true, 1)}},
		{name: "growth must widen: not preferred", machine: kep12, available: "1,4-11", mustKeep: "2-3", n: 6, want: []cpuallocator.NUMAHint{hint(false, 0, 1)}},
		{name: "must-keep larger than the request", machine: kep12, available: "1,4-11", mustKeep: "2-3", n: 1, want: nil},
		{name: "must-keep CPUs in available count once", machine: kep12, available: "1-11", mustKeep: "2-3", n: 6, want: []cpuallocator.NUMAHint{hint(false, 0, 1)}},
		{name: "full: only whole free cores count", machine: kep12, opts: fullPCPUs, available: "1,3,5-11", n: 2, want: []cpuallocator.NUMAHint{hint(true, 1)}},
		{name: "by node ids", machine: farSocket, available: "4-15", mustKeep: "0-3", n: 6, want: []cpuallocator.NUMAHint{hint(true, 0, 1), hint(true, 0, 2), hint(true, 0, 3)}},
		{name: "prefer-closest-numa-nodes", machine: farSocket, tm: closest, available: "4-15", mustKeep: "0-3", n: 6, want: []cpuallocator.NUMAHint{hint(true, 0, 2), hint(true, 0, 1), hint(true, 0, 3)}},
		{name: "align-by-socket: same socket first", machine: farSocket, opts: bySocket, tm: closest, available: "4-15", mustKeep: "0-3", n: 6, want: []cpuallocator.NUMAHint{hint(true, 0, 1), hint(true, 0, 2), hint(true, 0, 3)}},
		{name: "wider than max-allowable-numa-nodes", machine: kep12, tm: cpuallocator.TopologyOptions{MaxAllowableNUMANodes: 1}, available: "1-11", n: 7, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allocatorFor(t, topologyOf(t, tc.machine), tc.opts, tc.tm)
			got := a.NUMAHints(cpus(t, tc.available), cpus(t, tc.mustKeep), tc.n)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// sixteenNodes has 4 sockets × 4 NUMA nodes × 4 cores × 2 threads: 8 CPUs
// per node, 128 CPUs.
var sixteenNodes = fakesysfs.Spec{Sockets: 4, NUMAPerSocket: 4, CoresPerNUMA: 4, ThreadsPerCore: 2}

func TestNUMAHintsSixteenNodes(t *testing.T) {
	topo := topologyOf(t, sixteenNodes)
	socketsOf := func(m cpuallocator.NodeMask) map[int]int {
		perSocket := map[int]int{}
		for _, n := range m.Nodes() {
			perSocket[n/4]++
		}
		return perSocket
	}
	// 70 CPUs need 9 of the 16 nodes: C(16,9) = 11440 masks of that width.
	tests := []struct {
		name     string
		tm       cpuallocator.TopologyOptions
		mustKeep string
		// wantNone: no hint (too wide for max-allowable-numa-nodes).
		wantNone bool
	}{
		{name: "default max-allowable-numa-nodes is 8", tm: cpuallocator.TopologyOptions{}, wantNone: true},
		{name: "max 16", tm: cpuallocator.TopologyOptions{MaxAllowableNUMANodes: 16}},
		{name: "max 16, closest", tm: cpuallocator.TopologyOptions{MaxAllowableNUMANodes: 16, PreferClosestNUMANodes: true}},
		{name: "max 16, closest, keeping CPUs of node 5", tm: cpuallocator.TopologyOptions{MaxAllowableNUMANodes: 16, PreferClosestNUMANodes: true}, mustKeep: "40-41"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allocatorFor(t, topo, none, tc.tm)
			keep := cpus(t, tc.mustKeep)
			hints := a.NUMAHints(topo.CPUs().Difference(keep), keep, 70)
			if tc.wantNone {
				if len(hints) != 0 {
					t.Fatalf("got %d hints, want none", len(hints))
				}
				return
			}
			if len(hints) == 0 {
				t.Fatal("no hints")
			}
			for _, h := range hints {
				if h.Nodes.Count() != 9 || !h.Preferred {
					t.Errorf("hint %v: want 9 preferred nodes", h)
				}
				if !topo.NUMANodesOf(keep).IsSubsetOf(h.Nodes) {
					t.Errorf("hint %v misses the must-keep nodes", h)
				}
			}
			if !tc.tm.PreferClosestNUMANodes {
				return
			}
			// The closest 9 nodes are two whole sockets and one more node.
			perSocket := socketsOf(hints[0].Nodes)
			full := 0
			for _, c := range perSocket {
				if c == 4 {
					full++
				}
			}
			if len(perSocket) != 3 || full != 2 {
				t.Errorf("best hint %v spans %v nodes per socket, want two whole sockets and one node", hints[0].Nodes, perSocket)
			}
		})
	}
}
