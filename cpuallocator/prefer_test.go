package cpuallocator_test

import (
	"errors"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// twoNodes is 1 socket × 2 NUMA nodes × 4 cores × 2 threads, siblings
// adjacent: node 0 holds CPUs 0-7, node 1 CPUs 8-15.
var twoNodes = fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 4, ThreadsPerCore: 2}

// preferring returns an allocator on spec with the given options that
// prefers the machine's isolated CPUs.
func preferring(t *testing.T, spec fakesysfs.Spec, isolated []int, opts cpuallocator.StaticPolicyOptions) *cpuallocator.Allocator {
	t.Helper()
	spec.Isolated = isolated
	topo := topologyOf(t, spec)
	a, err := allocatorFor(t, topo, opts, cpuallocator.TopologyOptions{}).Preferring(topo.Isolated())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPreferredAllocate checks that creations take the preferred
// (isolated) CPUs first without giving up NUMA locality.
func TestPreferredAllocate(t *testing.T) {
	full := cpuallocator.StaticPolicyOptions{FullPCPUsOnly: true}
	offset := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}
	tests := []struct {
		name     string
		spec     fakesysfs.Spec
		isolated []int
		opts     cpuallocator.StaticPolicyOptions
		free     string
		n        int
		affinity cpuallocator.NodeMask
		want     string
	}{
		{"isolated node rather than the lowest one", twoNodes, seq(8, 15), cpuallocator.StaticPolicyOptions{}, "0-15", 2, 0, "8-9"},
		{"isolated cores of the same node", twoNodes, []int{4, 5, 6, 7, 12, 13, 14, 15}, cpuallocator.StaticPolicyOptions{}, "0-15", 4, 0, "4-7"},
		{"best fit among isolated CPUs", twoNodes, []int{6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, cpuallocator.StaticPolicyOptions{}, "0-15", 2, 0, "6-7"},
		{"isolated first, the rest on their node", twoNodes, []int{6, 7}, cpuallocator.StaticPolicyOptions{}, "0-15", 4, 0, "0-1,6-7"},
		{"a request one node holds stays on one node", twoNodes, []int{6, 7, 14, 15}, cpuallocator.StaticPolicyOptions{}, "0-15", 4, 0, "0-1,6-7"},
		{"the affinity wins over isolation", twoNodes, seq(8, 15), cpuallocator.StaticPolicyOptions{}, "0-15", 2, cpuallocator.NewNodeMask(0), "0-1"},
		{"isolated cores inside the affinity", twoNodes, []int{2, 3, 8, 9}, cpuallocator.StaticPolicyOptions{}, "0-15", 2, cpuallocator.NewNodeMask(0), "2-3"},
		{"full-pcpus-only: whole isolated cores", offset, []int{2, 3, 6, 7}, full, "0-7", 4, 0, "2-3,6-7"},
		// Cores {0,4} {1,5} {2,6} {3,7}; 4 is isolated alone: its core
		// costs the shared pool one CPU, core {1,5} two.
		{"full-pcpus-only: a core mixing isolated threads before one of none", offset, []int{2, 3, 4, 6, 7}, full, "0-7", 6, 0, "0,2-4,6-7"},
		// isolcpus=2-7 with reserved CPUs 0-1: cores {0,4} and {1,5} are
		// split by the reservation, so 4 and 5 are never whole cores.
		{"full-pcpus-only: isolcpus=2-N, reserved 0-1", offset, seq(2, 7), full, "2-7", 4, 0, "2-3,6-7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := preferring(t, tc.spec, tc.isolated, tc.opts)
			got, err := a.Allocate(cpus(t, tc.free), tc.n, tc.affinity)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(cpus(t, tc.want)) {
				t.Errorf("Allocate(%s, %d, %s) = %s, want %s (isolated %v)", tc.free, tc.n, tc.affinity, got, tc.want, tc.isolated)
			}
		})
	}
	// With full-pcpus-only, isolcpus=2-N and reserved CPUs 0-1 leave only
	// the whole cores {2,6} and {3,7}: 6 CPUs cannot be had.
	a := preferring(t, offset, seq(2, 7), full)
	if got, err := a.Allocate(cpus(t, "2-7"), 6, 0); !errors.Is(err, cpuallocator.ErrTopology) {
		t.Errorf("Allocate(2-7, 6) = %s, %v; want ErrTopology", got, err)
	}
}

// TestPreferredDistribute checks that under distribute-cpus-across-numa
// the balance between nodes comes before isolation.
func TestPreferredDistribute(t *testing.T) {
	a := preferring(t, twoNodes, seq(8, 15), cpuallocator.StaticPolicyOptions{DistributeCPUsAcrossNUMA: true})
	got, err := a.Allocate(cpus(t, "0-15"), 12, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n0, n1 := got.Intersection(cpus(t, "0-7")).Size(), got.Intersection(cpus(t, "8-15")).Size(); n0 != 6 || n1 != 6 {
		t.Errorf("Allocate(0-15, 12) = %s: %d CPUs on node 0, %d on node 1; want 6 and 6", got, n0, n1)
	}
}

// TestPreferredGrowShrink checks growths and shrinks: isolated CPUs are
// taken first, and kept first, inside the NUMA nodes the topology rules
// choose.
func TestPreferredGrowShrink(t *testing.T) {
	none := cpuallocator.StaticPolicyOptions{}
	tests := []struct {
		name     string
		isolated []int
		current  string
		n        int
		want     string
	}{
		{"grows into isolated CPUs of its node", []int{6, 7}, "0-1", 4, "0-1,6-7"},
		{"stays on its node rather than take isolated CPUs elsewhere", seq(8, 15), "0-1", 4, "0-3"},
		{"widens to the isolated node", seq(8, 15), "0-7", 10, "0-9"},
	}
	for _, tc := range tests {
		t.Run("grow: "+tc.name, func(t *testing.T) {
			a := preferring(t, twoNodes, tc.isolated, none)
			current := cpus(t, tc.current)
			got, err := a.Grow(cpus(t, "0-15").Difference(current), current, tc.n, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(cpus(t, tc.want)) {
				t.Errorf("Grow(%s to %d) = %s, want %s", tc.current, tc.n, got, tc.want)
			}
		})
	}
	shrinks := []struct {
		name              string
		isolated          []int
		current, baseline string
		n                 int
		want              string
	}{
		{"keeps the isolated CPUs", []int{6, 7}, "0-7", "0-1", 4, "0-1,6-7"},
		{"keeps its node rather than isolated CPUs elsewhere", []int{8, 9}, "0-3,8-9", "0-1", 4, "0-3"},
	}
	for _, tc := range shrinks {
		t.Run("shrink: "+tc.name, func(t *testing.T) {
			a := preferring(t, twoNodes, tc.isolated, none)
			got, err := a.Shrink(cpus(t, tc.current), cpus(t, tc.baseline), tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(cpus(t, tc.want)) {
				t.Errorf("Shrink(%s keeping %s to %d) = %s, want %s", tc.current, tc.baseline, tc.n, got, tc.want)
			}
		})
	}
}

// TestPreferredHints checks that among equally good NUMA affinities the
// one whose isolated CPUs hold the request comes first.
func TestPreferredHints(t *testing.T) {
	plain := allocatorFor(t, topologyOf(t, twoNodes), cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{})
	a := preferring(t, twoNodes, seq(8, 15), cpuallocator.StaticPolicyOptions{})
	for _, tc := range []struct {
		a    *cpuallocator.Allocator
		want cpuallocator.NodeMask
	}{{plain, cpuallocator.NewNodeMask(0)}, {a, cpuallocator.NewNodeMask(1)}} {
		hints := tc.a.NUMAHints(cpus(t, "0-15"), cpuset.New(), 4)
		if len(hints) != 2 || hints[0].Nodes != tc.want || !hints[0].Preferred || !hints[1].Preferred {
			t.Errorf("NUMAHints(0-15, 4) with preferred %s = %v, want both nodes preferred, node set %s first", tc.a.Preferred(), hints, tc.want)
		}
	}
	// A wider affinity never ranks before a narrower one for isolation.
	hints := a.NUMAHints(cpus(t, "0-15"), cpus(t, "0-1"), 4)
	if len(hints) == 0 || hints[0].Nodes != cpuallocator.NewNodeMask(0) {
		t.Errorf("NUMAHints(0-15 keeping 0-1, 4) = %v, want node 0 first", hints)
	}
}

func TestPreferringRejectsUnknownCPUs(t *testing.T) {
	a := allocatorFor(t, topologyOf(t, twoNodes), cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{})
	if _, err := a.Preferring(cpus(t, "15-16")); !errors.Is(err, cpuallocator.ErrInvalidRequest) {
		t.Errorf("Preferring(15-16) on CPUs 0-15: %v, want ErrInvalidRequest", err)
	}
	b, err := a.Preferring(cpuset.New())
	if err != nil || !b.Preferred().IsEmpty() {
		t.Errorf("Preferring(empty) = %v, %v; want no preference", b.Preferred(), err)
	}
}
