package cpuallocator_test

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// randomMachine returns a small random machine: 1-2 sockets, 1-3 NUMA
// nodes per socket, 1-6 cores per node, 1, 2 or 4 threads, L3 groups,
// either numbering, a few offline and isolated CPUs, and sometimes
// shuffled CPU ids.
func randomMachine(r *rand.Rand) fakesysfs.Machine {
	spec := fakesysfs.Spec{
		Sockets:        1 + r.Intn(2),
		NUMAPerSocket:  1 + r.Intn(3),
		CoresPerNUMA:   1 + r.Intn(6),
		ThreadsPerCore: []int{1, 2, 2, 2, 4}[r.Intn(5)],
		Numbering:      fakesysfs.Numbering(r.Intn(2)),
	}
	spec.L3PerNUMA = 1 + r.Intn(min(3, spec.CoresPerNUMA))
	// CPU 0 stays online and not isolated, so the machine is never empty.
	if total := spec.NumCPUs(); total > 1 {
		for i := r.Intn(3); i > 0; i-- {
			spec.Offline = append(spec.Offline, 1+r.Intn(total-1))
		}
		for i := r.Intn(3); i > 0; i-- {
			spec.Isolated = append(spec.Isolated, 1+r.Intn(total-1))
		}
	}
	m, err := spec.Machine()
	if err != nil {
		panic(err)
	}
	if r.Intn(4) == 0 {
		m = shuffled(m, r.Int63())
		m.Offline, m.Isolated = nil, nil // their ids moved with the shuffle
	}
	return m
}

func randomOptions(r *rand.Rand) cpuallocator.StaticPolicyOptions {
	for {
		o := cpuallocator.StaticPolicyOptions{
			FullPCPUsOnly:             r.Intn(3) == 0,
			DistributeCPUsAcrossNUMA:  r.Intn(3) == 0,
			AlignBySocket:             r.Intn(3) == 0,
			DistributeCPUsAcrossCores: r.Intn(4) == 0,
			PreferAlignByUncoreCache:  r.Intn(3) == 0,
		}
		if o.Validate() == nil {
			return o
		}
	}
}

// container is one exclusive container of the simulation.
type container struct {
	baseline, current cpuset.CPUSet
}

// sim runs random request sequences against one allocator and checks the
// properties every result must have.
type sim struct {
	t          *testing.T
	r          *rand.Rand
	a          *cpuallocator.Allocator
	topo       *cpuallocator.Topology
	reserved   cpuset.CPUSet
	containers []*container
	// plain is, when a prefers some CPUs, the same allocator without
	// preference: a's answers must be as good (comparePlain).
	plain *cpuallocator.Allocator
	// wholePreferred is set when the preferred CPUs are whole cores.
	wholePreferred bool
}

// comparePlain checks a preferring allocator's answer against the plain
// one's to the same request: it succeeds whenever the plain one does,
// spans no more NUMA nodes or sockets, and holds at least as many
// preferred CPUs (when the preferred CPUs are whole cores or cores are not
// taken whole: with cores mixing preferred and other threads the whole
// cores that add up may differ).
func (s *sim) comparePlain(what string, got cpuset.CPUSet, err error, plain cpuset.CPUSet, plainErr error) {
	if s.plain == nil || plainErr != nil {
		return
	}
	if err != nil {
		s.t.Fatalf("%s: %v, although without preference it gives %s", what, err, plain)
	}
	if g, p := s.topo.NUMANodesOf(got).Count(), s.topo.NUMANodesOf(plain).Count(); g > p {
		s.t.Fatalf("%s = %s on %d NUMA nodes, without preference %s on %d", what, got, g, plain, p)
	}
	if g, p := s.sockets(got), s.sockets(plain); g > p {
		s.t.Fatalf("%s = %s on %d sockets, without preference %s on %d", what, got, g, plain, p)
	}
	pref := s.a.Preferred()
	if g, p := got.Intersection(pref).Size(), plain.Intersection(pref).Size(); g < p && (s.wholePreferred || !s.a.Options().FullPCPUsOnly) {
		s.t.Fatalf("%s = %s holds %d preferred CPUs (%s), without preference %s holds %d", what, got, g, pref, plain, p)
	}
}

func (s *sim) sockets(cpus cpuset.CPUSet) int {
	seen := map[int]bool{}
	for _, id := range cpus.UnsortedList() {
		c, _ := s.topo.CPU(id)
		seen[c.Socket] = true
	}
	return len(seen)
}

func (s *sim) free() cpuset.CPUSet {
	used := s.reserved
	for _, c := range s.containers {
		used = used.Union(c.current)
	}
	return s.topo.CPUs().Difference(used)
}

// usable is what the options let a container holding held take of free:
// under full-pcpus-only only cores entirely in free ∪ held.
func (s *sim) usable(free, held cpuset.CPUSet) cpuset.CPUSet {
	if !s.a.Options().FullPCPUsOnly {
		return free
	}
	var ids []int
	for _, id := range free.UnsortedList() {
		if s.topo.CoreSiblings(id).IsSubsetOf(free.Union(held)) {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...)
}

// size returns a random request size, a multiple of the SMT level under
// full-pcpus-only.
func (s *sim) size(maxN int) int {
	step := 1
	if s.a.Options().FullPCPUsOnly {
		step = s.topo.ThreadsPerCore()
	}
	return step * (1 + s.r.Intn(max(maxN/step, 1)))
}

func (s *sim) checkWholeCores(what string, set cpuset.CPUSet) {
	if !s.a.Options().FullPCPUsOnly {
		return
	}
	for _, id := range set.List() {
		if !s.topo.CoreSiblings(id).IsSubsetOf(set) {
			s.t.Fatalf("%s: %s splits the core of CPU %d under full-pcpus-only", what, set, id)
		}
	}
}

// checkRefusal accepts an error only when it is one of the allocator's
// sentinels and the request really cannot be met: for a shortage, fewer
// free CPUs than need; for a topology refusal, no choice of whole usable
// cores that adds up to need (see canMake).
func (s *sim) checkRefusal(what string, err error, need int, usable cpuset.CPUSet, free cpuset.CPUSet) {
	switch {
	case errors.Is(err, cpuallocator.ErrNotEnoughCPUs):
		if free.Size() >= need {
			s.t.Fatalf("%s: %v although %d CPUs are free (%s)", what, err, free.Size(), free)
		}
	case errors.Is(err, cpuallocator.ErrTopology):
		if s.canMake(usable, need) {
			s.t.Fatalf("%s: %v although the usable CPUs (%s) can give %d", what, err, usable, need)
		}
	default:
		s.t.Fatalf("%s: unexpected error %v", what, err)
	}
}

// canMake reports whether need CPUs can be taken of usable (what s.usable
// returns): any need of them, but under full-pcpus-only only whole parts,
// each being all the usable CPUs of one core, so some of the parts must add
// up to need (a subset sum; cores missing threads make parts of different
// sizes).
func (s *sim) canMake(usable cpuset.CPUSet, need int) bool {
	if !s.a.Options().FullPCPUsOnly || need <= 0 {
		return usable.Size() >= need
	}
	reachable := make([]bool, need+1)
	reachable[0] = true
	done := map[int]bool{}
	for _, id := range usable.List() {
		if done[id] {
			continue
		}
		part := s.topo.CoreSiblings(id).Intersection(usable)
		for _, sibling := range part.UnsortedList() {
			done[sibling] = true
		}
		for sum := need; sum >= part.Size(); sum-- {
			reachable[sum] = reachable[sum] || reachable[sum-part.Size()]
		}
	}
	return reachable[need]
}

// fitsOneNode reports whether the usable CPUs of one NUMA node can give
// need.
func (s *sim) fitsOneNode(usable cpuset.CPUSet, need int) bool {
	for _, n := range s.topo.NUMANodes() {
		if s.canMake(usable.Intersection(s.topo.CPUsInNUMANodes(cpuallocator.NewNodeMask(n))), need) {
			return true
		}
	}
	return false
}

func (s *sim) create() {
	free := s.free()
	if free.IsEmpty() {
		return
	}
	n := s.size(max(free.Size()/2, 1))
	var affinity cpuallocator.NodeMask
	if s.r.Intn(2) == 0 {
		if hints := s.a.NUMAHints(free, cpuset.New(), n); s.sameHints(hints, s.a.NUMAHintsFrom(s.mask(free), cpuset.New(), n)) && len(hints) > 0 {
			s.checkHints(hints, free, cpuset.New(), n)
			affinity = hints[0].Nodes
		}
	}
	what := fmt.Sprintf("Allocate(%s, %d, %s)", free, n, affinity)
	got, err := s.a.Allocate(free, n, affinity)
	fromMask, maskErr := s.a.AllocateFrom(s.mask(free), n, affinity)
	s.sameAnswer(what, got, err, fromMask, maskErr)
	if s.plain != nil {
		plain, plainErr := s.plain.Allocate(free, n, affinity)
		s.comparePlain(what, got, err, plain, plainErr)
	}
	usable := s.usable(free, cpuset.New())
	if err != nil {
		s.checkRefusal(what, err, n, usable, free)
		return
	}
	if got.Size() != n || !got.IsSubsetOf(free) {
		s.t.Fatalf("%s = %s: wrong size or not free", what, got)
	}
	s.checkWholeCores(what, got)
	if s.fitsOneNode(usable, n) && s.topo.NUMANodesOf(got).Count() != 1 {
		s.t.Fatalf("%s = %s: spans nodes %s although one node can hold it", what, got, s.topo.NUMANodesOf(got))
	}
	if !s.topo.NUMANodesOf(got).IsSubsetOf(s.allowed(affinity)) {
		s.t.Fatalf("%s = %s: outside the affinity, which can hold it", what, got)
	}
	s.containers = append(s.containers, &container{baseline: got, current: got})
}

// mask returns cpus as a mask, for the API's mask variants.
func (s *sim) mask(cpus cpuset.CPUSet) cpumask.Mask {
	m, ok := cpumask.Of(cpus)
	if !ok {
		s.t.Fatalf("negative CPU id in %s", cpus)
	}
	return m
}

// sameAnswer checks that a mask variant answered as the cpuset one did.
func (s *sim) sameAnswer(what string, got cpuset.CPUSet, err error, fromMask cpuset.CPUSet, maskErr error) {
	if !got.Equals(fromMask) || fmt.Sprint(err) != fmt.Sprint(maskErr) {
		s.t.Fatalf("%s = %s, %v; from a mask: %s, %v", what, got, err, fromMask, maskErr)
	}
}

// sameHints checks that NUMAHintsFrom answered as NUMAHints did; it
// returns true to chain in a condition.
func (s *sim) sameHints(hints, fromMask []cpuallocator.NUMAHint) bool {
	if !slices.Equal(hints, fromMask) {
		s.t.Fatalf("NUMAHints = %v, from a mask %v", hints, fromMask)
	}
	return true
}

// allowed returns the nodes a request with a hint's affinity must stay in:
// the affinity, widened to whole sockets under align-by-socket; all nodes
// when there is no affinity.
func (s *sim) allowed(affinity cpuallocator.NodeMask) cpuallocator.NodeMask {
	all := cpuallocator.NewNodeMask(s.topo.NUMANodes()...)
	if affinity == 0 {
		return all
	}
	if !s.a.Options().AlignBySocket {
		return affinity
	}
	sockets := map[int]bool{}
	for _, id := range s.topo.CPUsInNUMANodes(affinity).UnsortedList() {
		c, _ := s.topo.CPU(id)
		sockets[c.Socket] = true
	}
	var widened cpuallocator.NodeMask
	for _, id := range s.topo.CPUs().UnsortedList() {
		if c, _ := s.topo.CPU(id); sockets[c.Socket] {
			widened |= cpuallocator.NewNodeMask(c.NUMANode)
		}
	}
	return widened
}

func (s *sim) grow(c *container) {
	free := s.free()
	n := c.current.Size() + s.size(max(free.Size(), 1))
	var affinity cpuallocator.NodeMask
	if s.r.Intn(2) == 0 {
		if hints := s.a.NUMAHints(free, c.current, n); s.sameHints(hints, s.a.NUMAHintsFrom(s.mask(free), c.current, n)) && len(hints) > 0 {
			s.checkHints(hints, free, c.current, n)
			affinity = hints[0].Nodes
		}
	}
	what := fmt.Sprintf("Grow(%s, %s, %d, %s)", free, c.current, n, affinity)
	got, err := s.a.Grow(free, c.current, n, affinity)
	fromMask, maskErr := s.a.GrowFrom(s.mask(free), c.current, n, affinity)
	s.sameAnswer(what, got, err, fromMask, maskErr)
	if s.plain != nil {
		plain, plainErr := s.plain.Grow(free, c.current, n, affinity)
		s.comparePlain(what, got, err, plain, plainErr)
	}
	need := n - c.current.Size()
	usable := s.usable(free, c.current)
	if err != nil {
		s.checkRefusal(what, err, need, usable, free)
		return
	}
	if got.Size() != n || !c.current.IsSubsetOf(got) || !got.IsSubsetOf(c.current.Union(free)) {
		s.t.Fatalf("%s = %s: wrong size, lost CPUs or took busy ones", what, got)
	}
	s.checkWholeCores(what, got)
	home := s.topo.NUMANodesOf(c.current)
	if affinity == 0 && s.canMake(usable.Intersection(s.topo.CPUsInNUMANodes(home)), need) && !s.topo.NUMANodesOf(got).IsSubsetOf(home) {
		s.t.Fatalf("%s = %s: left nodes %s although they can hold the growth", what, got, home)
	}
	if !s.topo.NUMANodesOf(got).IsSubsetOf(s.allowed(affinity)) {
		s.t.Fatalf("%s = %s: outside the affinity, which can hold it", what, got)
	}
	c.current = got
}

func (s *sim) shrink(c *container) {
	span := c.current.Size() - c.baseline.Size()
	step := 1
	if s.a.Options().FullPCPUsOnly {
		step = s.topo.ThreadsPerCore()
	}
	n := c.baseline.Size() + step*s.r.Intn(span/step+1)
	what := fmt.Sprintf("Shrink(%s, %s, %d)", c.current, c.baseline, n)
	got, err := s.a.Shrink(c.current, c.baseline, n)
	if s.plain != nil {
		plain, plainErr := s.plain.Shrink(c.current, c.baseline, n)
		s.comparePlain(what, got, err, plain, plainErr)
	}
	if err != nil {
		// Cores missing threads can leave no choice of whole cores of the
		// grown CPUs that adds up to the size.
		extra := c.current.Difference(c.baseline)
		s.checkRefusal(what, err, n-c.baseline.Size(), s.usable(extra, c.baseline), extra)
		return
	}
	if got.Size() != n || !c.baseline.IsSubsetOf(got) || !got.IsSubsetOf(c.current) {
		s.t.Fatalf("%s = %s: wrong size, lost baseline CPUs or gained CPUs", what, got)
	}
	s.checkWholeCores(what, got)
	c.current = got
}

// checkHints asserts that every hint holds the must-keep nodes, can hold
// the request, and that they come best first at one width.
func (s *sim) checkHints(hints []cpuallocator.NUMAHint, free, keep cpuset.CPUSet, n int) {
	keepNodes := s.topo.NUMANodesOf(keep)
	for i, h := range hints {
		usable := s.usable(free, keep).Intersection(s.topo.CPUsInNUMANodes(h.Nodes))
		if !keepNodes.IsSubsetOf(h.Nodes) || !s.canMake(usable, n-keep.Size()) || h.Nodes.Count() != hints[0].Nodes.Count() {
			s.t.Fatalf("NUMAHints(%s, %s, %d): bad hint %v (usable %s) in %v", free, keep, n, h, usable, hints)
		}
		if i > 0 && h.Preferred && !hints[i-1].Preferred {
			s.t.Fatalf("NUMAHints(%s, %s, %d): preferred hint after a non-preferred one: %v", free, keep, n, hints)
		}
	}
}

func TestRandomSequences(t *testing.T) {
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		m := randomMachine(r)
		opts := randomOptions(r)
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { simulate(t, r, m, opts) })
	}
}

// TestRandomSequencesMissingThreads runs the simulation under
// full-pcpus-only on machines with many offline SMT siblings, where whole
// cores differ in size and a request is a subset sum (checkRefusal).
func TestRandomSequencesMissingThreads(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewSource(seed))
		m := sparseMachine(r)
		opts := randomOptions(r)
		opts.FullPCPUsOnly, opts.DistributeCPUsAcrossCores = true, false
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { simulate(t, r, m, opts) })
	}
}

// sparseMachine returns a small random machine with 2, 4 or 8 threads per
// core and up to half of its CPUs (never CPU 0) offline.
func sparseMachine(r *rand.Rand) fakesysfs.Machine {
	spec := fakesysfs.Spec{
		Sockets:        1 + r.Intn(2),
		NUMAPerSocket:  1 + r.Intn(3),
		CoresPerNUMA:   1 + r.Intn(6),
		ThreadsPerCore: []int{2, 4, 4, 8}[r.Intn(4)],
		Numbering:      fakesysfs.Numbering(r.Intn(2)),
	}
	spec.L3PerNUMA = 1 + r.Intn(min(3, spec.CoresPerNUMA))
	total := spec.NumCPUs()
	for i := r.Intn(total/2 + 1); i > 0; i-- {
		spec.Offline = append(spec.Offline, 1+r.Intn(total-1))
	}
	m, err := spec.Machine()
	if err != nil {
		panic(err)
	}
	return m
}

// simulate runs 60 random creations, resizes and removals on machine m
// with the given options, checking every result (see sim), and that no CPU
// ends in two containers.
func simulate(t *testing.T, r *rand.Rand, m fakesysfs.Machine, opts cpuallocator.StaticPolicyOptions) {
	topo := topologyOfMachine(t, m)
	a := allocatorFor(t, topo, opts, cpuallocator.TopologyOptions{MaxAllowableNUMANodes: 6})
	reserved, err := a.ReservedCPUs(r.Intn(2))
	if err != nil {
		t.Fatal(err)
	}
	s := &sim{t: t, r: r, a: a, topo: topo, reserved: reserved}
	if r.Intn(2) == 0 {
		preferred, whole := randomPreferred(r, topo)
		s.prefer(preferred, whole)
	}
	for step := 0; step < 60; step++ {
		switch op := r.Intn(10); {
		case op < 4 || len(s.containers) == 0:
			s.create()
		case op < 7:
			s.grow(s.containers[r.Intn(len(s.containers))])
		case op < 9:
			s.shrink(s.containers[r.Intn(len(s.containers))])
		default:
			i := r.Intn(len(s.containers))
			s.containers = append(s.containers[:i], s.containers[i+1:]...)
		}
	}
	seen := reserved
	for _, c := range s.containers {
		if !c.current.Intersection(seen).IsEmpty() {
			t.Fatalf("%s overlaps another container or the reserved CPUs", c.current)
		}
		seen = seen.Union(c.current)
	}
}

// prefer makes the simulation's allocator prefer preferred, keeping the
// plain one to compare with.
func (s *sim) prefer(preferred cpuset.CPUSet, whole bool) {
	a, err := s.a.Preferring(preferred)
	if err != nil {
		s.t.Fatal(err)
	}
	s.plain, s.a, s.wholePreferred = s.a, a, whole
}

// randomPreferred returns preferred CPUs for a simulation: random whole
// cores (whole is then true), or the isolated CPUs and random others.
func randomPreferred(r *rand.Rand, topo *cpuallocator.Topology) (cpuset.CPUSet, bool) {
	all := topo.CPUs().List()
	var ids []int
	if r.Intn(2) == 0 {
		for _, id := range all {
			if r.Intn(3) == 0 {
				ids = append(ids, id)
			}
		}
		return topo.Isolated().Union(cpuset.New(ids...)), false
	}
	for _, id := range all {
		if siblings := topo.CoreSiblings(id); id == siblings.List()[0] && r.Intn(2) == 0 {
			ids = append(ids, siblings.UnsortedList()...)
		}
	}
	return cpuset.New(ids...), true
}
