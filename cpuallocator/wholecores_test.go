package cpuallocator_test

import (
	"reflect"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// Machines with offline SMT siblings. Under full-pcpus-only a core missing
// threads is a whole core of fewer CPUs.
var (
	// smt2Offline is one socket, two NUMA nodes of two cores × 2 threads,
	// CPUs 3 and 7 offline: node 0 has cores {0,1} and {2}, node 1 has
	// {4,5} and {6}.
	smt2Offline = fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2, Offline: []int{3, 7}}
	// smt4Offline is one NUMA node of five cores × 4 threads, CPUs 7, 11,
	// 14 and 15 offline: cores 0-3, 4-6, 8-10, 12-13 and 16-19.
	smt4Offline = fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 5, ThreadsPerCore: 4, Offline: []int{7, 11, 14, 15}}
	// smt4TwoNodes is two NUMA nodes of two cores × 4 threads, CPUs 3 and
	// 7 offline: node 0 has cores 0-2 and 4-6, node 1 has 8-11 and 12-15.
	smt4TwoNodes = fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 4, Offline: []int{3, 7}}
)

// TestFullPCPUsOnlyMissingThreads covers full-pcpus-only requests that
// whole cores of different sizes can make up only when the cores are
// chosen for it: the first greedy pick (whole cores of every thread
// first, or the cores next to the container's) leaves a remainder no
// whole core fits, and they used to be refused with ErrTopology.
func TestFullPCPUsOnlyMissingThreads(t *testing.T) {
	node := cpuallocator.NewNodeMask
	tests := []struct {
		name    string
		machine fakesysfs.Spec
		opts    cpuallocator.StaticPolicyOptions
		// op is "allocate", "grow" (from current) or "shrink" (current
		// to n keeping baseline).
		op        string
		available string
		current   string
		baseline  string
		n         int
		affinity  cpuallocator.NodeMask
		want      string
		wantErr   error
	}{
		// Used to be refused.
		{name: "grow: not the single-thread core of its own node", machine: smt2Offline, opts: fullPCPUs, op: "grow", available: "0-1,6", current: "4-5", n: 4, want: "0-1,4-5"},
		{name: "grow across NUMA: single-thread cores of both nodes", machine: smt2Offline, opts: fullNUMA, op: "grow", available: "0-2,6", current: "4-5", n: 6, want: "0-2,4-6"},
		{name: "allocate: three smaller cores, not the whole one", machine: smt4Offline, opts: fullPCPUs, op: "allocate", available: "0-6,8-10,12-13", n: 8, want: "4-6,8-10,12-13"},
		{name: "allocate: beyond an affinity its cores cannot make up", machine: smt4TwoNodes, opts: fullPCPUs, op: "allocate", available: "0-2,4-6,8-15", n: 4, affinity: node(0), want: "8-11"},
		{name: "shrink: keeps the smaller cores", machine: smt4Offline, opts: fullPCPUs, op: "shrink", current: "0-6,8-10,12-13,16-19", baseline: "0-3", n: 12, want: "0-6,8-10,12-13"},

		// Unchanged: whole cores of every thread first.
		{name: "allocate: a whole core", machine: smt4Offline, opts: fullPCPUs, op: "allocate", available: "0-6,8-10,12-13", n: 4, want: "0-3"},
		{name: "allocate: whole cores first", machine: smt4Offline, opts: fullPCPUs, op: "allocate", available: "0-6,8-10,12-13,16-19", n: 8, want: "0-3,16-19"},
		{name: "grow: odd size", machine: smt2Offline, opts: fullPCPUs, op: "grow", available: "0-2,6", current: "4-5", n: 3, wantErr: cpuallocator.ErrSMTAlignment},
		{name: "grow: single-thread core of its node", machine: smt2Offline, opts: fullPCPUs, op: "grow", available: "0-1,6", current: "2,4-5", n: 4, want: "2,4-6"},

		// Really unsatisfiable.
		{name: "allocate: no cores add up", machine: smt4Offline, opts: fullPCPUs, op: "allocate", available: "4-6,8-10", n: 4, wantErr: cpuallocator.ErrTopology},
		{name: "shrink: no cores add up", machine: smt4Offline, opts: fullPCPUs, op: "shrink", current: "0-6,8-10", baseline: "0-3", n: 8, wantErr: cpuallocator.ErrTopology},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allocatorFor(t, topologyOf(t, tc.machine), tc.opts, cpuallocator.TopologyOptions{})
			switch tc.op {
			case "allocate":
				got, err := a.Allocate(cpus(t, tc.available), tc.n, tc.affinity)
				checkResult(t, got, err, tc.want, tc.wantErr)
			case "grow":
				got, err := a.Grow(cpus(t, tc.available), cpus(t, tc.current), tc.n, tc.affinity)
				checkResult(t, got, err, tc.want, tc.wantErr)
			case "shrink":
				got, err := a.Shrink(cpus(t, tc.current), cpus(t, tc.baseline), tc.n)
				checkResult(t, got, err, tc.want, tc.wantErr)
			default:
				t.Fatalf("unknown op %q", tc.op)
			}
		})
	}
}

func TestFullPCPUsOnlyMissingThreadsErrorMessage(t *testing.T) {
	a := allocatorFor(t, topologyOf(t, smt4Offline), fullPCPUs, cpuallocator.TopologyOptions{})
	_, err := a.Allocate(cpus(t, "4-6,8-10"), 4, 0)
	want := "allocate 4 CPUs: need 4 CPUs as whole cores (full-pcpus-only), no choice of the whole free cores adds up to 4 (4-6,8-10, cores of 2 of 3 CPUs): topology constraint cannot be met"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestNUMAHintsMissingThreads: under full-pcpus-only a NUMA node whose
// free CPUs are enough by count but whose whole cores cannot add up to the
// request is no hint.
func TestNUMAHintsMissingThreads(t *testing.T) {
	hint := func(preferred bool, nodes ...int) cpuallocator.NUMAHint {
		return cpuallocator.NUMAHint{Nodes: cpuallocator.NewNodeMask(nodes...), Preferred: preferred}
	}
	// sparse is smt4TwoNodes with node 1 down to single-thread cores 8
	// and 12.
	sparse := smt4TwoNodes
	sparse.Offline = []int{3, 7, 9, 10, 11, 13, 14, 15}
	tests := []struct {
		name      string
		machine   fakesysfs.Spec
		available string
		n         int
		want      []cpuallocator.NUMAHint
	}{
		{name: "only the node whose cores add up", machine: smt4TwoNodes, available: "0-2,4-6,8-15", n: 4, want: []cpuallocator.NUMAHint{hint(true, 1)}},
		{name: "two cores of 3 threads make up 6", machine: smt4TwoNodes, available: "0-2,4-6,8-15", n: 6, want: []cpuallocator.NUMAHint{hint(true, 0)}},
		{name: "wider than counting says", machine: sparse, available: "0-2,4-6,8,12", n: 4, want: []cpuallocator.NUMAHint{hint(false, 0, 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allocatorFor(t, topologyOf(t, tc.machine), fullPCPUs, cpuallocator.TopologyOptions{})
			got := a.NUMAHints(cpus(t, tc.available), cpus(t, ""), tc.n)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
