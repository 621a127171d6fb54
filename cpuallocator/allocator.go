package cpuallocator

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// Allocator decides CPU placement on one topology with one set of options.
// It holds no allocation state: every call says which CPUs are available. It
// is safe for concurrent use.
type Allocator struct {
	topo   *Topology
	opts   StaticPolicyOptions
	tmOpts TopologyOptions
	// packTree is the tree Allocate and Grow fill: sockets and NUMA nodes,
	// uncore caches under prefer-align-cpus-by-uncorecache, cores.
	packTree *unitTree
	// plainTree has no uncore level (ReservedCPUs).
	plainTree *unitTree
	// shrinkTree always has the uncore level: Shrink keeps CPUs that share
	// a cache with the baseline ones.
	shrinkTree *unitTree
	mode       pickMode
	// prefer are the CPUs taken before any other (Preferring); nil when
	// none are.
	prefer cpuBits
}

// NewAllocator validates the options and returns an allocator.
func NewAllocator(t *Topology, opts StaticPolicyOptions, tmOpts TopologyOptions) (*Allocator, error) {
	if t == nil {
		return nil, fmt.Errorf("no topology: %w", ErrInvalidRequest)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := tmOpts.validate(); err != nil {
		return nil, err
	}
	a := &Allocator{
		topo:       t,
		opts:       opts,
		tmOpts:     tmOpts,
		plainTree:  buildTree(t, packingLevels(t, false)),
		shrinkTree: buildTree(t, packingLevels(t, true)),
		mode:       pickMode{wholeCores: opts.FullPCPUsOnly, spread: opts.DistributeCPUsAcrossCores},
	}
	a.packTree = a.plainTree
	if opts.PreferAlignByUncoreCache {
		a.packTree = a.shrinkTree
	}
	return a, nil
}

// Topology returns the topology the allocator places CPUs on.
func (a *Allocator) Topology() *Topology { return a.topo }

// Options returns the static policy options of the allocator.
func (a *Allocator) Options() StaticPolicyOptions { return a.opts }

// Allocate picks n CPUs for a new container from available, in the packed
// order (or the distributed order the options select). When affinity is not
// zero, CPUs of those NUMA nodes are taken first and others only when the
// affinity cannot hold n.
func (a *Allocator) Allocate(available cpuset.CPUSet, n int, affinity NodeMask) (cpuset.CPUSet, error) {
	avail, err := a.availableBits(available)
	return a.allocate(avail, err, n, affinity)
}

// AllocateFrom is Allocate with the available CPUs as a mask: a caller that
// computes them as one (the policy, on every decision) builds no set.
func (a *Allocator) AllocateFrom(available cpumask.Mask, n int, affinity NodeMask) (cpuset.CPUSet, error) {
	avail, err := a.availableMaskBits(available)
	return a.allocate(avail, err, n, affinity)
}

func (a *Allocator) allocate(avail cpuBits, err error, n int, affinity NodeMask) (cpuset.CPUSet, error) {
	if n < 0 {
		return cpuset.New(), fmt.Errorf("allocate %d CPUs: negative size: %w", n, ErrInvalidRequest)
	}
	if n == 0 {
		return cpuset.New(), nil
	}
	if err != nil {
		return cpuset.New(), fmt.Errorf("allocate %d CPUs: %w", n, err)
	}
	if err := a.checkAffinity(affinity); err != nil {
		return cpuset.New(), fmt.Errorf("allocate %d CPUs: %w", n, err)
	}
	if err := a.checkSMT(n); err != nil {
		return cpuset.New(), fmt.Errorf("allocate %d CPUs: %w", n, err)
	}
	held := a.topo.newBits()
	picked, err := a.placePreferred(avail, a.usable(avail, held), held, n, a.stagesFor(affinity), true)
	if err != nil {
		return cpuset.New(), fmt.Errorf("allocate %d CPUs: %w", n, err)
	}
	return picked.CPUSet(), nil
}

// availableBits converts the caller's available set, which must hold only
// CPUs of the topology.
func (a *Allocator) availableBits(available cpuset.CPUSet) (cpuBits, error) {
	return checkAvailable(a.topo.bitsOf(available))
}

// availableMaskBits is availableBits for a mask.
func (a *Allocator) availableMaskBits(available cpumask.Mask) (cpuBits, error) {
	return checkAvailable(a.topo.bitsOfMask(available))
}

func checkAvailable(b cpuBits, unknown []int) (cpuBits, error) {
	if len(unknown) > 0 {
		return nil, fmt.Errorf("available CPUs %s are not online CPUs of this machine: %w", cpuset.New(unknown...), ErrInvalidRequest)
	}
	return b, nil
}

func (a *Allocator) checkAffinity(affinity NodeMask) error {
	if unknown := affinity &^ a.topo.knownNodes(); unknown != 0 {
		return fmt.Errorf("NUMA affinity %s names nodes %s this machine does not have: %w", affinity, unknown, ErrInvalidRequest)
	}
	return nil
}

// checkSMT enforces full-pcpus-only's multiple of the SMT level.
func (a *Allocator) checkSMT(n int) error {
	if a.opts.FullPCPUsOnly && n%a.topo.threads != 0 {
		return fmt.Errorf("%s: %d CPUs is not a multiple of %d threads per core: %w", optFullPCPUsOnly, n, a.topo.threads, ErrSMTAlignment)
	}
	return nil
}

// groupSize is the number of CPUs distribution moves at a time: whole cores
// under full-pcpus-only, single CPUs otherwise.
func (a *Allocator) groupSize() int {
	if a.opts.FullPCPUsOnly {
		return a.topo.threads
	}
	return 1
}

// stagesFor returns the NUMA node sets Allocate fills in order: the
// affinity (widened to whole sockets under align-by-socket), then every
// node.
func (a *Allocator) stagesFor(affinity NodeMask) []NodeMask {
	all := a.topo.knownNodes()
	if affinity == 0 {
		return []NodeMask{all}
	}
	if a.opts.AlignBySocket {
		affinity = a.topo.socketNodes(affinity)
	}
	return []NodeMask{affinity, all}
}

// usable returns the CPUs of avail the options allow to take for a
// container holding held: under full-pcpus-only only CPUs of cores that lie
// entirely in avail ∪ held.
func (a *Allocator) usable(avail, held cpuBits) cpuBits {
	if !a.opts.FullPCPUsOnly {
		return avail
	}
	out := avail.Clone()
	for id := range avail.All() {
		if !coreWithin(a.plainTree.coreCPUs(id), avail, held) {
			out.Remove(id)
		}
	}
	return out
}

// placeUsable picks need CPUs of avail for a container holding held,
// filling the stages in order (each a superset of the one before, the last
// one every node); usable is a.usable(avail, held). It fails when the
// options leave fewer than need CPUs usable, or under full-pcpus-only when
// no choice of whole cores adds up to need. A new container's picks
// (fresh) follow the placement rule (fewest.go). placePreferred wraps it
// with the preference for some CPUs.
//
// In the regular case each stage takes all it can. Under full-pcpus-only
// with whole cores of different sizes (see wholecores.go) the stages after
// the first one whose whole cores can make up need are dropped, and each
// stage takes the most it can while the cores left in that last stage
// still make up the rest: the result is as packed as the stages allow and
// a satisfiable request is never refused.
func (a *Allocator) placeUsable(avail, usable, held cpuBits, need int, stages []NodeMask, fresh bool) (cpuBits, error) {
	if got := usable.Count(); got < need {
		return nil, a.shortage(avail, usable, need)
	}
	// universe is, in exact mode only, the usable CPUs of the last stage:
	// their whole cores make up need.
	var universe cpuBits
	if a.opts.FullPCPUsOnly && !a.regularCores(usable, held, need) {
		if sizes := a.packTree.sizesOf(usable); !sizes.canMake(need) {
			return nil, a.noWholeCores(usable, sizes, need)
		}
		stages = a.reachingStages(usable, need, stages)
		universe = usable.And(a.topo.bitsInNodes(stages[len(stages)-1]))
	}
	picked := a.topo.newBits()
	for _, stage := range stages {
		if need == 0 {
			break
		}
		stageAvail := usable.And(a.topo.bitsInNodes(stage)).AndNot(picked)
		got := a.fillStage(stageAvail, held.Or(picked), need, outside(universe, stageAvail, picked), fresh)
		picked = picked.Or(got)
		need -= got.Count()
	}
	if need > 0 && universe != nil {
		// distribute can leave a node's share short of what its whole
		// cores make up; the rest is still reachable in the universe.
		got := a.pack(universe.AndNot(picked), held.Or(picked), need, nil, fresh)
		picked = picked.Or(got)
		need -= got.Count()
	}
	if need > 0 {
		return nil, a.shortage(avail, usable, need+picked.Count())
	}
	return picked, nil
}

// regularCores reports whether taking need CPUs of usable, for a
// container holding held, is a matter of counting under full-pcpus-only
// (see wholecores.go): no usable CPU is on a core missing threads or on a
// core the container partly holds, and the SMT level divides need.
func (a *Allocator) regularCores(usable, held cpuBits, need int) bool {
	tree := a.plainTree
	if need%tree.threads != 0 {
		return false
	}
	if !tree.complete {
		for id := range usable.All() {
			if len(tree.coreCPUs(id)) != tree.threads {
				return false
			}
		}
	}
	for id := range held.All() {
		for _, sibling := range tree.coreCPUs(id) {
			if usable.Has(sibling) {
				return false
			}
		}
	}
	return true
}

// reachingStages drops the stages after the first one whose usable whole
// cores can make up need. The last stage, every node, always can.
func (a *Allocator) reachingStages(usable cpuBits, need int, stages []NodeMask) []NodeMask {
	for i, stage := range stages[:len(stages)-1] {
		if a.packTree.sizesOf(usable.And(a.topo.bitsInNodes(stage))).canMake(need) {
			return stages[:i+1]
		}
	}
	return stages
}

// outside returns the CPUs of universe that are neither in avail nor
// picked: where the rest of a request must come from once avail has given
// its share. It is nil when universe is (the regular case).
func outside(universe, avail, picked cpuBits) cpuBits {
	if universe == nil {
		return nil
	}
	return universe.AndNot(avail).AndNot(picked)
}

// fillStage takes up to need CPUs of avail, distributed or packed as the
// options say. When rest is not nil (exact mode) it leaves a remainder the
// whole cores of rest can make up.
func (a *Allocator) fillStage(avail, held cpuBits, need int, rest cpuBits, fresh bool) cpuBits {
	if a.opts.DistributeCPUsAcrossNUMA {
		return a.distribute(avail, held, need, rest, fresh)
	}
	return a.pack(avail, held, need, leftFor(rest, need), fresh)
}

// remainder says, in exact mode, where the rest of a request comes from
// once a pack has taken its part: the whole cores of cpus must make up
// total, the CPUs still to place in all, minus what the pack takes.
type remainder struct {
	cpus  cpuBits
	total int
}

// leftFor returns the remainder of total CPUs to place with rest, nil
// when rest is (the regular case).
func leftFor(rest cpuBits, total int) *remainder {
	if rest == nil {
		return nil
	}
	return &remainder{cpus: rest, total: total}
}

// pack takes up to want CPUs of avail in the packed order, all it can
// unless rest is not nil: then the most that leaves a remainder its whole
// cores can make up (picker.share). For a new container (fresh) the pick
// then follows the placement rule (fewest.go).
func (a *Allocator) pack(avail, held cpuBits, want int, rest *remainder, fresh bool) cpuBits {
	p := newPicker(a.packTree, avail, held, a.mode)
	p.take(p.share(want, rest))
	picked := p.takenBits(len(avail))
	if !fresh || rest != nil || p.exact {
		return picked
	}
	return a.fewest(avail, held, picked)
}

// noWholeCores explains a full-pcpus-only request no choice of whole cores
// adds up to.
func (a *Allocator) noWholeCores(usable cpuBits, sizes coreSizes, need int) error {
	return fmt.Errorf("need %d CPUs as whole cores (%s), no choice of the whole free cores adds up to %d (%s, cores of %s): %w",
		need, optFullPCPUsOnly, need, usable.CPUSet(), sizes, ErrTopology)
}

// shortage explains why need CPUs cannot be had from avail.
func (a *Allocator) shortage(avail, usable cpuBits, need int) error {
	free := avail.Count()
	if free < need {
		return fmt.Errorf("need %d CPUs, %d free (%s): %w", need, free, avail.CPUSet(), ErrNotEnoughCPUs)
	}
	if a.opts.FullPCPUsOnly {
		return fmt.Errorf("need %d CPUs as whole cores of %d threads (%s), only %d free CPUs form whole free cores (%s): %w",
			need, a.topo.threads, optFullPCPUsOnly, usable.Count(), usable.CPUSet(), ErrTopology)
	}
	return fmt.Errorf("need %d CPUs, only %d can be placed (%s free): %w", need, usable.Count(), avail.CPUSet(), ErrTopology)
}
