package cpuallocator_test

import (
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"k8s.io/utils/cpuset"
)

func TestNewTopologyRejects(t *testing.T) {
	ok := []cpuallocator.CPUInfo{{ID: 0, Core: 0}, {ID: 1, Core: 0}, {ID: 2, Core: 1, NUMANode: 1}}
	tests := []struct {
		name      string
		cpus      []cpuallocator.CPUInfo
		distances map[int]map[int]int
		want      string
	}{
		{"no CPUs", nil, nil, "no CPUs"},
		{"negative id", []cpuallocator.CPUInfo{{ID: -1}}, nil, "negative CPU id"},
		{"duplicate", []cpuallocator.CPUInfo{{ID: 1}, {ID: 1}}, nil, "described twice"},
		{"node out of range", []cpuallocator.CPUInfo{{ID: 0, NUMANode: 64}}, nil, "out of range"},
		{"negative socket", []cpuallocator.CPUInfo{{ID: 0, Socket: -2}}, nil, "negative id"},
		{"core across nodes", []cpuallocator.CPUInfo{{ID: 0}, {ID: 1, NUMANode: 1}}, nil, "share core 0"},
		{"missing distance", ok, map[int]map[int]int{0: {0: 10, 1: 20}, 1: {1: 10}}, "no distance from NUMA node 1 to node 0"},
		{"zero distance", ok, map[int]map[int]int{0: {0: 10, 1: 0}, 1: {0: 20, 1: 10}}, "want a positive number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cpuallocator.NewTopology(tc.cpus, tc.distances)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestTopologyAccessors(t *testing.T) {
	topo, err := cpuallocator.NewTopology([]cpuallocator.CPUInfo{
		{ID: 5, Core: 7, Socket: 1, NUMANode: 3, UncoreCache: 2},
		{ID: 9, Core: 7, Socket: 1, NUMANode: 3, UncoreCache: 2},
		{ID: 2, Core: 1, Socket: 0, NUMANode: 0},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.CPUs(); !got.Equals(cpuset.New(2, 5, 9)) {
		t.Errorf("CPUs() = %s", got)
	}
	if _, ok := topo.CPU(3); ok {
		t.Error("CPU(3) found")
	}
	if _, ok := topo.CPU(100); ok {
		t.Error("CPU(100) found")
	}
	if got := topo.CoreSiblings(9); !got.Equals(cpuset.New(5, 9)) {
		t.Errorf("CoreSiblings(9) = %s", got)
	}
	if got := topo.CoreSiblings(4); !got.IsEmpty() {
		t.Errorf("CoreSiblings(4) = %s, want empty", got)
	}
	if got := topo.ThreadsPerCore(); got != 2 {
		t.Errorf("ThreadsPerCore() = %d", got)
	}
	if got := topo.NUMANodesOf(cpuset.New(2, 9, 77)); got != cpuallocator.NewNodeMask(0, 3) {
		t.Errorf("NUMANodesOf = %s", got)
	}
	if got := topo.CPUsInNUMANodes(cpuallocator.NewNodeMask(3, 4)); !got.Equals(cpuset.New(5, 9)) {
		t.Errorf("CPUsInNUMANodes(3-4) = %s", got)
	}
	for _, d := range []struct{ a, b, want int }{{0, 0, 10}, {0, 3, 20}, {3, 0, 20}, {0, 1, 0}} {
		if got := topo.Distance(d.a, d.b); got != d.want {
			t.Errorf("Distance(%d, %d) = %d, want %d", d.a, d.b, got, d.want)
		}
	}
	// The returned slices are copies.
	topo.NUMANodes()[0] = 42
	topo.Sockets()[0] = 42
	if topo.NUMANodes()[0] != 0 || topo.Sockets()[0] != 0 {
		t.Error("NUMANodes or Sockets share the topology's slice")
	}
}

func TestTopologyString(t *testing.T) {
	got := topologyOf(t, twoSocketFourNodes).String()
	for _, want := range []string{
		"16 CPUs (0-15), 2 sockets, 4 NUMA nodes, 8 cores, 2 threads per core",
		"socket 1: CPUs 8-15",
		"NUMA node 2: CPUs 8-11, distances 21 21 10 11",
		"uncore cache 3: CPUs 12-15",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("String() lacks %q:\n%s", want, got)
		}
	}
}

// TestMaskInNUMANodes: the bitmap of a set of NUMA nodes holds exactly the
// CPUs CPUsInNUMANodes lists, for every set of nodes (none included, and
// node 2, which has no CPU).
func TestMaskInNUMANodes(t *testing.T) {
	topo, err := cpuallocator.NewTopology([]cpuallocator.CPUInfo{
		{ID: 0, Core: 0}, {ID: 4, Core: 0}, {ID: 1, Core: 1, NUMANode: 1}, {ID: 70, Core: 2, NUMANode: 3},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for mask := cpuallocator.NodeMask(0); mask < 1<<4; mask++ {
		if got, want := topo.MaskInNUMANodes(mask).CPUSet(), topo.CPUsInNUMANodes(mask); !got.Equals(want) {
			t.Errorf("nodes %s: the mask has %s, want %s", mask, got, want)
		}
	}
}
