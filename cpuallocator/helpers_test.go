package cpuallocator_test

import (
	"errors"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"k8s.io/utils/cpuset"
)

// topologyOf discovers the topology of a generated machine from an
// in-memory sysfs tree.
func topologyOf(t testing.TB, spec fakesysfs.Spec) *cpuallocator.Topology {
	t.Helper()
	m, err := spec.Machine()
	if err != nil {
		t.Fatal(err)
	}
	return topologyOfMachine(t, m)
}

func topologyOfMachine(t testing.TB, m fakesysfs.Machine) *cpuallocator.Topology {
	t.Helper()
	fsys, err := fakesysfs.FS(m)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := cpuallocator.DiscoverFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func allocatorFor(t testing.TB, topo *cpuallocator.Topology, opts cpuallocator.StaticPolicyOptions, tm cpuallocator.TopologyOptions) *cpuallocator.Allocator {
	t.Helper()
	a, err := cpuallocator.NewAllocator(topo, opts, tm)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// cpus parses a cpuset list, failing the test on a typo.
func cpus(t testing.TB, list string) cpuset.CPUSet {
	t.Helper()
	s, err := cpuset.Parse(list)
	if err != nil {
		t.Fatalf("bad cpuset %q in test: %v", list, err)
	}
	return s
}

// twoSocketFourNodes is 2 sockets × 2 NUMA nodes × 2 cores × 2 threads,
// siblings adjacent: node n holds CPUs 4n..4n+3.
var twoSocketFourNodes = fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2}

var (
	// kep12 is KEP-5554's use-case machine: CPUs 0-5 on node 0, 6-11 on
	// node 1, cores {0,1}, {2,3}, ... .
	kep12 = fakesysfs.KEP5554UseCases()
	// twoL3 is one NUMA node of 8 cores × 2 threads in two L3 groups:
	// CPUs 0-7 and 8-15.
	twoL3 = fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, ThreadsPerCore: 2, L3PerNUMA: 2}
	// farSocket is twoSocketFourNodes with node 2 (other socket) closer to
	// node 0 than node 1 (same socket) is.
	farSocket = func() fakesysfs.Spec {
		s := twoSocketFourNodes
		s.Distances = [][]int{
			{10, 30, 15, 31},
			{30, 10, 31, 15},
			{15, 31, 10, 30},
			{31, 15, 30, 10},
		}
		return s
	}()
)

var (
	none       = cpuallocator.StaticPolicyOptions{}
	fullPCPUs  = cpuallocator.StaticPolicyOptions{FullPCPUsOnly: true}
	acrossNUMA = cpuallocator.StaticPolicyOptions{DistributeCPUsAcrossNUMA: true}
	acrossCore = cpuallocator.StaticPolicyOptions{DistributeCPUsAcrossCores: true}
	bySocket   = cpuallocator.StaticPolicyOptions{AlignBySocket: true}
	byUncore   = cpuallocator.StaticPolicyOptions{PreferAlignByUncoreCache: true}
	fullNUMA   = cpuallocator.StaticPolicyOptions{FullPCPUsOnly: true, DistributeCPUsAcrossNUMA: true}
)

// checkResult compares a result with the expected set or sentinel error.
func checkResult(t *testing.T, got cpuset.CPUSet, err error, want string, wantErr error) {
	t.Helper()
	if wantErr != nil {
		if !errors.Is(err, wantErr) {
			t.Fatalf("got %s, %v; want error %v", got, err, wantErr)
		}
		if !got.IsEmpty() {
			t.Errorf("got %s with the error, want an empty set", got)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if !got.Equals(cpus(t, want)) {
		t.Errorf("got %s, want %s", got, want)
	}
}

// seq returns the ints from..to.
func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
