package cpuallocator_test

import (
	"errors"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"k8s.io/utils/cpuset"
)

// node16 simulates the exclusive CPUs of a node the way the policy keeps
// them: baseline and current sets per container, the rest shared.
type node16 struct {
	t        *testing.T
	a        *cpuallocator.Allocator
	reserved cpuset.CPUSet
	baseline map[string]cpuset.CPUSet
	current  map[string]cpuset.CPUSet
}

// free is what a new or growing container may take: every CPU that is
// neither reserved nor exclusive.
func (s *node16) free() cpuset.CPUSet {
	used := s.reserved
	for _, c := range s.current {
		used = used.Union(c)
	}
	return s.a.Topology().CPUs().Difference(used)
}

// defaultCPUSet is the checkpoint's shared pool: all but exclusive CPUs.
func (s *node16) defaultCPUSet() cpuset.CPUSet { return s.free().Union(s.reserved) }

func (s *node16) create(name string, n int, want string) {
	s.t.Helper()
	got, err := s.a.Allocate(s.free(), n, 0)
	if err != nil {
		s.t.Fatalf("create %s: %v", name, err)
	}
	s.baseline[name], s.current[name] = got, got
	s.check(name, want)
}

func (s *node16) resize(name string, n int, want string) {
	s.t.Helper()
	cur := s.current[name]
	var got cpuset.CPUSet
	var err error
	if n > cur.Size() {
		got, err = s.a.Grow(s.free(), cur, n, 0)
	} else {
		got, err = s.a.Shrink(cur, s.baseline[name], n)
	}
	if err != nil {
		s.t.Fatalf("resize %s to %d: %v", name, n, err)
	}
	s.current[name] = got
	s.check(name, want)
}

func (s *node16) remove(name string) {
	delete(s.baseline, name)
	delete(s.current, name)
}

// check asserts the container's set and the invariants: baseline kept, no
// CPU in two containers, the reserved CPU never handed out.
func (s *node16) check(name, want string) {
	s.t.Helper()
	if got := s.current[name]; !got.Equals(cpus(s.t, want)) {
		s.t.Errorf("%s: got %s, want %s", name, got, want)
	}
	if !s.baseline[name].IsSubsetOf(s.current[name]) {
		s.t.Errorf("%s: %s lost baseline CPUs %s", name, s.current[name], s.baseline[name])
	}
	seen := cpuset.New()
	for other, c := range s.current {
		if !c.Intersection(seen).IsEmpty() || !c.Intersection(s.reserved).IsEmpty() {
			s.t.Errorf("%s: %s overlaps another container or the reserved CPUs", other, c)
		}
		seen = seen.Union(c)
	}
}

// TestKEP5554CheckpointWalkthrough replays KEP-5554's "Checkpoint file
// example during resize" on a 16-CPU machine with CPU 0 reserved (the KEP's
// default set 0-15 never hands 0 out). Where the packed order differs from
// the KEP's hand-written numbers it is said below.
func TestKEP5554CheckpointWalkthrough(t *testing.T) {
	topo := topologyOf(t, fakesysfs.KEP5554Checkpoint())
	s := &node16{
		t:        t,
		a:        allocatorFor(t, topo, none, cpuallocator.TopologyOptions{}),
		reserved: cpuset.New(0),
		baseline: map[string]cpuset.CPUSet{},
		current:  map[string]cpuset.CPUSet{},
	}
	wantDefault := func(want string) {
		t.Helper()
		if got := s.defaultCPUSet(); !got.Equals(cpus(t, want)) {
			t.Errorf("defaultCpuSet %s, want %s", got, want)
		}
	}

	// gu-pod-1 with 2 CPUs: baseline 1-2, as in the KEP.
	s.create("pod1/c1", 2, "1-2")
	wantDefault("0,3-15")
	// Grown by 2: 1-4, as in the KEP.
	s.resize("pod1/c1", 4, "1-4")
	wantDefault("0,5-15")
	// Shrunk by 2: back to the baseline 1-2, as in the KEP.
	s.resize("pod1/c1", 2, "1-2")
	wantDefault("0,3-15")
	// gu-pod-2 with two 2-CPU containers: 3-4 and 5-6, as in the KEP.
	s.create("pod2/c1", 2, "3-4")
	s.create("pod2/c2", 2, "5-6")
	wantDefault("0,7-15")
	// gu-pod-1 is deleted, then pod-2's first container grows by 2. The KEP
	// shows 1,3-4,7; the packed order takes the lowest free CPUs of the
	// container's NUMA node (0-7), 1-2, which also leaves one contiguous
	// free range (7-15) instead of two holes.
	s.remove("pod1/c1")
	s.resize("pod2/c1", 4, "1-4")
	wantDefault("0,7-15")
	// The first container shrinks back to its baseline 3-4 (decreases go
	// first), then the second grows by 2. The KEP shows 1,5-7; the packed
	// order again takes the lowest free CPUs of node 0, 1-2.
	s.resize("pod2/c1", 2, "3-4")
	s.resize("pod2/c2", 4, "1-2,5-6")
	wantDefault("0,7-15")
}

// TestKEP5554UseCases follows KEP-5554's "Use Cases for CPU Resize" setup:
// the 12-CPU machine, full-pcpus-only and single-numa-node (the policy
// refuses any affinity wider than one node, read from the best hint).
func TestKEP5554UseCases(t *testing.T) {
	topo := topologyOf(t, kep12)
	a := allocatorFor(t, topo, fullPCPUs, cpuallocator.TopologyOptions{})
	free := cpus(t, "2-11") // core {0,1} reserved
	singleNUMA := func(available, keep cpuset.CPUSet, n int) (cpuallocator.NodeMask, bool) {
		hints := a.NUMAHints(available, keep, n)
		if len(hints) == 0 || hints[0].Nodes.Count() > 1 {
			return 0, false
		}
		return hints[0].Nodes, true
	}

	// A 2-CPU container is admitted on one node.
	aff, ok := singleNUMA(free, cpuset.New(), 2)
	if !ok {
		t.Fatal("2 CPUs: no single-node hint")
	}
	c1, err := a.Allocate(free, 2, aff)
	if err != nil || !c1.Equals(cpus(t, "2-3")) {
		t.Fatalf("create: got %s, %v; want 2-3", c1, err)
	}
	free = free.Difference(c1)

	// Growing to 4 fits node 0 (4-5 are free): allowed, stays on node 0.
	aff, ok = singleNUMA(free, c1, 4)
	if !ok || aff != cpuallocator.NewNodeMask(0) {
		t.Fatalf("grow to 4: hint %v, %v; want node 0", aff, ok)
	}
	c1, err = a.Grow(free, c1, 4, aff)
	if err != nil || !c1.Equals(cpus(t, "2-5")) {
		t.Fatalf("grow to 4: got %s, %v; want 2-5", c1, err)
	}
	free = free.Difference(c1)

	// Growing to 6 would need node 1 as well: single-numa-node refuses.
	if aff, ok := singleNUMA(free, c1, 6); ok {
		t.Fatalf("grow to 6: got single-node hint %v, want a refusal", aff)
	}
	// A 3-CPU request is refused for SMT alignment.
	if _, err := a.Grow(free, c1, 5, 0); !errors.Is(err, cpuallocator.ErrSMTAlignment) {
		t.Fatalf("grow to 5 under full-pcpus-only: got %v, want ErrSMTAlignment", err)
	}

	// Shrinking to the baseline 2 releases 4-5.
	c1, err = a.Shrink(c1, cpus(t, "2-3"), 2)
	if err != nil || !c1.Equals(cpus(t, "2-3")) {
		t.Fatalf("shrink to 2: got %s, %v; want 2-3", c1, err)
	}
	// Below the baseline is refused.
	if _, err := a.Shrink(c1, c1, 0); !errors.Is(err, cpuallocator.ErrInvalidRequest) {
		t.Fatalf("shrink below the baseline: got %v, want ErrInvalidRequest", err)
	}
}
