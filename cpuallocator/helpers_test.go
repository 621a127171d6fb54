package cpuallocator_test

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/test/sysfs"
	"k8s.io/utils/cpuset"
)

// topologyOf discovers the topology of a generated machine from an
// in-memory sysfs tree.
func topologyOf(t testing.TB, spec sysfs.Spec) *cpuallocator.Topology {
	t.Helper()
	m, err := spec.Machine()
	if err != nil {
		t.Fatal(err)
	}
	return topologyOfMachine(t, m)
}

func topologyOfMachine(t testing.TB, m sysfs.Machine) *cpuallocator.Topology {
	t.Helper()
	fsys, err := sysfs.FS(m)
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
var twoSocketFourNodes = sysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2}
