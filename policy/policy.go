package policy

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// Options configure the policy. The static policy options and the
// topology manager options live in the Allocator (Allocator.Options):
// strict-cpu-reservation, which keeps the reserved CPUs out of the shared
// pool too, is read there.
type Options struct {
	// Reserved CPUs are never given exclusively.
	Reserved cpuset.CPUSet
	// IsolatedExclusive (isolatedCPUs: exclusive) keeps the isolated CPUs
	// (isolcpus) for exclusive containers: they are never in the shared
	// pool, and placements take them before any other CPU (the allocator
	// prefers them, see cpuallocator.Allocator.Preferring). Otherwise
	// isolated CPUs are like any other, as for the kubelet.
	IsolatedExclusive bool
	// TopologyPolicy is the topology manager policy ("" means none).
	TopologyPolicy cpuallocator.TopologyPolicy
	// TopologyScope is the topology manager scope ("" means container).
	TopologyScope cpuallocator.TopologyScope
	// InPlaceResize allows changing the CPU count of exclusive containers.
	InPlaceResize bool
	// AlignMemory also sets cpuset.mems of exclusive containers to the NUMA
	// nodes of their CPUs.
	AlignMemory bool
	// ScaleDownDelay keeps the CPUs a decrease releases with the container
	// that long before they go (0: they go at once), so that its
	// application can move its threads off them first (KEP-6122's
	// scale-delay-time).
	ScaleDownDelay time.Duration
	// HoldTimeout bounds how long CPUs released by a decrease stay held
	// for their pod while its resize is in flight (0: DefaultHoldTimeout).
	HoldTimeout time.Duration
	// OrphanTimeout bounds how long a pod keeps its CPUs while nothing of
	// it runs and no sandbox of it is one the runtime would report
	// removed (0: DefaultOrphanTimeout); see ExpireOrphans.
	OrphanTimeout time.Duration
	// Now is the clock holds are stamped with (nil: time.Now).
	Now func() time.Time
}

// DefaultOrphanTimeout is how long a pod nothing of which runs, known
// only from a Synchronize, keeps its CPUs: twice the kubelet's longest
// crash-loop back-off, so that a container that restarts in the meantime
// finds them.
const DefaultOrphanTimeout = 10 * time.Minute

// DefaultHoldTimeout is how long CPUs stay held for a pod whose resize
// does not complete: as long as the kubelet's longest crash-loop back-off.
const DefaultHoldTimeout = 5 * time.Minute

// Policy is the static CPU policy. It holds configuration only and is safe
// for concurrent use; all state is in the Model passed to each call.
type Policy struct {
	alloc *cpuallocator.Allocator
	topo  *cpuallocator.Topology
	opts  Options
	// allocatable are the CPUs that may ever be exclusive: online minus
	// reserved. poolBase is what the shared pool is without exclusive
	// containers: online, minus reserved under strict-cpu-reservation,
	// minus isolated under isolatedCPUs: exclusive.
	allocatable, poolBase cpuset.CPUSet
	// allocatableMask and poolBaseMask are allocatable and poolBase as
	// bitmaps.
	allocatableMask cpumask.Mask
	poolBaseMask    cpumask.Mask
	// beyondPool is set when some allocatable CPUs are never in the shared
	// pool (isolated ones under isolatedCPUs: exclusive): which of them are
	// exclusive cannot be read off the pool (see taken).
	beyondPool bool
}

// New validates the options against the allocator's topology.
func New(alloc *cpuallocator.Allocator, opts Options) (*Policy, error) {
	if alloc == nil {
		return nil, errors.New("policy: no allocator")
	}
	if opts.TopologyPolicy == "" {
		opts.TopologyPolicy = cpuallocator.TopologyNone
	}
	if _, err := cpuallocator.ParseTopologyPolicy(string(opts.TopologyPolicy)); err != nil {
		return nil, fmt.Errorf("policy: topology manager policy: %w", err)
	}
	if opts.HoldTimeout <= 0 {
		opts.HoldTimeout = DefaultHoldTimeout
	}
	if opts.OrphanTimeout <= 0 {
		opts.OrphanTimeout = DefaultOrphanTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TopologyScope == "" {
		opts.TopologyScope = cpuallocator.ScopeContainer
	}
	if _, err := cpuallocator.ParseTopologyScope(string(opts.TopologyScope)); err != nil {
		return nil, fmt.Errorf("policy: topology manager scope: %w", err)
	}
	topo := alloc.Topology()
	online, isolated := topo.CPUs(), topo.Isolated()
	if !opts.Reserved.IsSubsetOf(online) {
		return nil, fmt.Errorf("policy: reserved CPUs %s are not all online (online: %s)", opts.Reserved, online)
	}
	if online.Difference(opts.Reserved).IsEmpty() {
		return nil, fmt.Errorf("policy: reserved CPUs %s leave no CPU for exclusive allocation", opts.Reserved)
	}
	pol := &Policy{alloc: alloc, topo: topo, opts: opts, allocatable: online.Difference(opts.Reserved), poolBase: online}
	if alloc.Options().StrictCPUReservation {
		pol.poolBase = pol.allocatable
	}
	if opts.IsolatedExclusive {
		pol.poolBase = pol.poolBase.Difference(isolated)
		pol.beyondPool = !pol.allocatable.Difference(pol.poolBase).IsEmpty()
		var err error
		if pol.alloc, err = alloc.Preferring(isolated); err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
	}
	if pol.poolBase.IsEmpty() {
		return nil, fmt.Errorf("policy: no CPU is left for the shared pool: %s", pol.poolBaseWhy(online, isolated))
	}
	pol.allocatableMask, _ = cpumask.Of(pol.allocatable) // online CPUs: no negative id
	pol.poolBaseMask, _ = cpumask.Of(pol.poolBase)
	return pol, nil
}

// poolBaseWhy explains an empty pool base.
func (p *Policy) poolBaseWhy(online, isolated cpuset.CPUSet) string {
	if !p.alloc.Options().StrictCPUReservation {
		return fmt.Sprintf("isolatedCPUs: exclusive keeps the isolated CPUs %s out of it and every online CPU (%s) is isolated", isolated, online)
	}
	return fmt.Sprintf("isolatedCPUs: exclusive keeps the isolated CPUs %s out of it and strict-cpu-reservation the reserved CPUs %s, which leaves none of the online CPUs %s",
		isolated, p.opts.Reserved, online)
}

// Options returns the policy's options.
func (p *Policy) Options() Options { return p.opts }

// Allocatable returns the CPUs that may ever be exclusive: online minus
// reserved.
func (p *Policy) Allocatable() cpuset.CPUSet { return p.allocatable }

// PoolBase returns the shared pool while no container holds exclusive
// CPUs: online, minus reserved under strict-cpu-reservation, minus
// isolated under isolatedCPUs: exclusive.
func (p *Policy) PoolBase() cpuset.CPUSet { return p.poolBase }

// Allocator returns the allocator the policy places CPUs with.
func (p *Policy) Allocator() *cpuallocator.Allocator { return p.alloc }

// NewState returns the state of a node without exclusive containers.
func (p *Policy) NewState() *state.State {
	return state.New(p.poolWithout(cpuset.New()))
}

// poolWithout returns the shared pool when exactly the given CPUs are
// exclusive.
func (p *Policy) poolWithout(exclusive cpuset.CPUSet) cpuset.CPUSet {
	return p.poolBase.Difference(exclusive)
}

// takeFromPool and returnToPool keep the checkpointed shared pool in step
// with a change of one assignment (exclusive CPUs are never reserved, so
// under strict-cpu-reservation too the pool is exactly what they leave).
// Released CPUs outside the pool base (isolated ones under isolatedCPUs:
// exclusive) do not join the pool.
func (p *Policy) takeFromPool(m *Model, cpus cpuset.CPUSet) {
	m.State.TakeShared(cpus)
}

func (p *Policy) returnToPool(m *Model, cpus cpuset.CPUSet) {
	if p.beyondPool {
		cpus = cpus.Intersection(p.poolBase)
	}
	m.State.ReturnShared(cpus)
}

// recomputePool sets the checkpointed shared pool from all the
// assignments.
func (p *Policy) recomputePool(m *Model) {
	m.State.SetDefaultCPUSet(p.poolWithout(m.State.ExclusiveCPUs().Union(m.heldCPUs())))
}

// availability returns the CPUs that may be handed out exclusively now, and
// how many CPUs the shared pool has left: those of the pool base that are
// neither exclusive nor being released. It works on bitmaps: a decision
// builds no set of the free CPUs, which on a big machine are hundreds.
func (p *Policy) availability(m *Model) (free cpumask.Mask, poolLeft int) {
	taken, poolLeft := p.taken(m)
	return p.allocatableMask.AndNot(taken), poolLeft
}

// taken marks the CPUs that may not be handed out exclusively in m besides
// the reserved ones: the exclusive ones, those whose release is not
// confirmed and those lent; poolLeft counts the CPUs of the pool base
// outside the first two. The exclusive CPUs of the pool base are those
// outside the checkpointed pool: every decision keeps the pool so
// (takeFromPool, returnToPool, recomputePool; CheckInvariants checks it),
// and reading one set is much cheaper than reading every assignment. Only
// when some allocatable CPUs are never in the pool (isolatedCPUs:
// exclusive) are the assignments read too.
func (p *Policy) taken(m *Model) (taken cpumask.Mask, poolLeft int) {
	taken = p.poolBaseMask.AndNot(m.State.SharedMask())
	if p.beyondPool {
		for _, a := range m.State.Assignments() {
			taken.AddSet(a.Held()) // (a resized set holds the baseline one)
		}
		for _, h := range m.State.Holds() {
			taken.AddSet(h.CPUs)
		}
	}
	for _, cpus := range m.Releasing {
		taken.AddSet(cpus)
	}
	poolLeft = p.poolBaseMask.AndNot(taken).Count()
	taken.AddSet(m.Lending)
	return taken, poolLeft
}

// poolDrain is the fewest CPUs of the shared pool that taking need CPUs of
// free costs it: free CPUs outside the pool base (isolated ones under
// isolatedCPUs: exclusive) can be taken first.
func (p *Policy) poolDrain(free cpumask.Mask, need int) int {
	return max(0, need-free.AndNot(p.poolBaseMask).Count())
}

// inPoolBase counts the CPUs of cpus that belong to the pool base.
func (p *Policy) inPoolBase(cpus cpuset.CPUSet) int {
	n := 0
	for _, cpu := range cpus.UnsortedList() {
		if p.poolBaseMask.Has(cpu) {
			n++
		}
	}
	return n
}

// Free returns the CPUs that may be handed out exclusively in m.
func (p *Policy) Free(m *Model) cpuset.CPUSet {
	free, _ := p.availability(m)
	return free.CPUSet()
}

// FreeAmong returns the CPUs of the given sets that may be handed out
// exclusively in m: those an unsolicited update carrying the sets must
// borrow (Model.Lend). It builds no set but the one it returns.
func (p *Policy) FreeAmong(m *Model, sets ...cpumask.Mask) cpuset.CPUSet {
	taken, _ := p.taken(m)
	var among cpumask.Mask
	for _, s := range sets {
		among = among.Or(s)
	}
	return among.And(p.allocatableMask).AndNot(taken).CPUSet()
}

// mems returns the memory nodes to pin a cpuset to, or an empty set when
// memory alignment is off.
func (p *Policy) mems(cpus cpuset.CPUSet) cpuset.CPUSet {
	if !p.opts.AlignMemory || cpus.IsEmpty() {
		return cpuset.New()
	}
	return cpuset.New(p.topo.NUMANodesOf(cpus).Nodes()...)
}

// placement is a request for n exclusive CPUs that keeps the CPUs in keep.
type placement struct {
	keep cpuset.CPUSet
	n    int
	// borrowed are CPUs the placement may take besides the free ones, at
	// no cost to the shared pool: those of its pod's stopped containers
	// (reused as the kubelet reuses an init container's CPUs) and those
	// held for its pod while the pod's resize is in flight. They are
	// taken first when they can hold the request.
	borrowed cpumask.Mask
	// reuse are the borrowed CPUs its pod's init containers lend it at
	// its creation: the kubelet admits only a NUMA affinity that holds
	// every one of them (generateCPUTopologyHints).
	reuse cpumask.Mask
	// pod are the CPUs the pod's other containers hold, and podNeed the
	// pod's whole exclusive need when known to be more than theirs and
	// n (a pod's first container): under topologyManagerScope: pod the
	// topology manager admits the pod's placement, not the container's.
	pod     cpuset.CPUSet
	podNeed int
	// devices are the NUMA nodes of the devices of the container (of the
	// pod, under the pod scope): the device hint (devicesOf).
	devices cpuallocator.NodeMask
}

// place finds the CPUs of a placement among free (and its borrowed CPUs),
// honouring the topology manager policy and leaving the shared pool
// non-empty. poolLeft counts the CPUs the shared pool has before the
// placement (availability: the placement's kept CPUs are already out of
// it).
func (p *Policy) place(pl placement, free cpumask.Mask, poolLeft int) (cpuset.CPUSet, error) {
	avail := free.Or(pl.borrowed)
	if have := avail.Count() + pl.keep.Size(); have < pl.n {
		return cpuset.New(), fmt.Errorf("need %d more CPUs, %d free: %w", pl.n-pl.keep.Size(), avail.Count(), cpuallocator.ErrNotEnoughCPUs)
	}
	affinity, err := p.admitTopology(pl, avail)
	if err != nil {
		return cpuset.New(), err
	}
	cpus, err := p.placeBorrowedFirst(pl, avail, affinity)
	if err != nil {
		return cpuset.New(), err
	}
	added := cpus.Difference(pl.keep)
	cost := p.inPoolBase(added)
	if !pl.borrowed.IsEmpty() {
		cost -= p.inPoolBase(pl.borrowed.And(maskOf(added)).CPUSet())
	}
	if poolLeft-cost <= 0 {
		return cpuset.New(), fmt.Errorf("taking %s would leave the shared pool empty: %w", added, cpuallocator.ErrNotEnoughCPUs)
	}
	return cpus, nil
}

// placeBorrowedFirst places pl taking its borrowed CPUs (those inside the
// affinity) before any free one: the ones it needs when they can hold the
// request, all of them when they cannot. When that cannot be placed (whole
// cores, the affinity) it is placed over every CPU available.
func (p *Policy) placeBorrowedFirst(pl placement, avail cpumask.Mask, affinity cpuallocator.NodeMask) (cpuset.CPUSet, error) {
	borrowed := pl.borrowed
	inAffinity := p.topo.MaskInNUMANodes(affinityOr(affinity, p.topo))
	if affinity != 0 {
		borrowed = borrowed.And(inAffinity)
	}
	if !borrowed.IsEmpty() {
		var cpus cpuset.CPUSet
		var err error
		if borrowed.Count()+pl.keep.Size() >= pl.n {
			cpus, err = p.allocate(pl, borrowed, affinity)
		} else {
			all := placement{keep: pl.keep.Union(borrowed.CPUSet()), n: pl.n}
			cpus, err = p.allocate(all, avail.AndNot(borrowed), affinity)
		}
		if err == nil && maskOf(cpus.Difference(pl.keep)).AndNot(inAffinity).IsEmpty() {
			return cpus, nil
		}
	}
	return p.allocate(pl, avail, affinity)
}

// allocate runs the allocator for a placement over avail.
func (p *Policy) allocate(pl placement, avail cpumask.Mask, affinity cpuallocator.NodeMask) (cpuset.CPUSet, error) {
	if avail.Count()+pl.keep.Size() < pl.n {
		return cpuset.New(), cpuallocator.ErrNotEnoughCPUs
	}
	if pl.keep.IsEmpty() {
		return p.alloc.AllocateFrom(avail, pl.n, affinity)
	}
	return p.alloc.GrowFrom(avail, pl.keep, pl.n, affinity)
}

// affinityOr returns affinity, or every NUMA node when it is 0 (no
// preference).
func affinityOr(affinity cpuallocator.NodeMask, topo *cpuallocator.Topology) cpuallocator.NodeMask {
	if affinity != 0 {
		return affinity
	}
	return cpuallocator.NewNodeMask(topo.NUMANodes()...)
}

// maskOf returns cpus as a bitmap.
func maskOf(cpus cpuset.CPUSet) cpumask.Mask {
	m, _ := cpumask.Of(cpus) // exclusive CPUs: no negative id
	return m
}

// errTopologyPolicy marks a placement the topology manager policy refuses.
var errTopologyPolicy = errors.New("topology manager policy")

// admitTopology applies the topology manager policy to a placement and
// returns the NUMA affinity to allocate in (0: no preference). Under
// topologyManagerScope: pod the affinity is the one of the whole pod: its
// other containers' CPUs are kept, and its need counted.
func (p *Policy) admitTopology(pl placement, avail cpumask.Mask) (cpuallocator.NodeMask, error) {
	if p.opts.TopologyPolicy == cpuallocator.TopologyNone {
		return 0, nil
	}
	keep, n, what := pl.keep, pl.n, fmt.Sprintf("%d CPUs%s", pl.n, p.keeping(pl.keep))
	if p.opts.TopologyScope == cpuallocator.ScopePod && (!pl.pod.IsEmpty() || pl.podNeed > n) {
		// The CPUs it borrows from its pod are the pod's already.
		fromPod := min(pl.n-pl.keep.Size(), pl.borrowed.And(maskOf(pl.pod)).Count())
		keep, n = keep.Union(pl.pod), max(pl.keep.Union(pl.pod).Size()+pl.n-pl.keep.Size()-fromPod, pl.podNeed)
		what = fmt.Sprintf("the pod's %d CPUs%s (topologyManagerScope: pod)", n, p.keeping(keep))
		avail = avail.AndNot(maskOf(pl.pod))
	}
	cover := p.topo.NUMANodesOf(pl.reuse.CPUSet())
	hints := p.alloc.NUMAHintsCovering(avail, keep, n, cover)
	if len(hints) == 0 {
		if p.opts.TopologyPolicy == cpuallocator.TopologyBestEffort {
			return pl.devices, nil
		}
		return 0, fmt.Errorf("%w %s: no NUMA affinity can hold %s", errTopologyPolicy, p.opts.TopologyPolicy, what)
	}
	if pl.devices != 0 {
		return p.withDevices(avail, keep, n, what, pl.devices, cover)
	}
	best := hints[0]
	switch p.opts.TopologyPolicy {
	case cpuallocator.TopologySingleNUMANode:
		if best.Nodes.Count() != 1 {
			return 0, fmt.Errorf("%w single-numa-node: %s do not fit one NUMA node (narrowest affinity: NUMA nodes %s)",
				errTopologyPolicy, what, best.Nodes)
		}
	case cpuallocator.TopologyRestricted:
		if !best.Preferred {
			return 0, fmt.Errorf("%w restricted: the narrowest NUMA affinity for %s is nodes %s, wider than the machine allows for that many CPUs",
				errTopologyPolicy, what, best.Nodes)
		}
	}
	return best.Nodes, nil
}

// withDevices merges the device hint, the NUMA nodes of the container's
// devices, with the CPUs' as the kubelet's topology manager merges a
// device plugin's hints with the CPU manager's: the merged affinity is
// the AND of the two, preferred only when a preferred CPU affinity is
// exactly the devices' nodes (mergePermutation). The devices are in place
// already (the kubelet's own topology manager admitted them), so their
// hint counts as preferred. single-numa-node and restricted admit only a
// preferred merged affinity; best-effort takes the devices' nodes first,
// whatever fits there.
func (p *Policy) withDevices(avail cpumask.Mask, keep cpuset.CPUSet, n int, what string, devices, cover cpuallocator.NodeMask) (cpuallocator.NodeMask, error) {
	if p.opts.TopologyPolicy == cpuallocator.TopologySingleNUMANode && devices.Count() > 1 {
		// single-numa-node keeps the hints of one NUMA node only: a device
		// hint of several leaves nothing to merge (the kubelet refuses
		// such a pod whatever its CPUs).
		return 0, fmt.Errorf("%w single-numa-node: the container's devices are on NUMA nodes %s, not one", errTopologyPolicy, devices)
	}
	inDevices := avail.And(p.topo.MaskInNUMANodes(devices))
	for _, h := range p.alloc.NUMAHintsCovering(inDevices, keep, n, cover) {
		if h.Nodes == devices && h.Preferred {
			return devices, nil
		}
	}
	if p.opts.TopologyPolicy == cpuallocator.TopologyBestEffort {
		return devices, nil
	}
	return 0, fmt.Errorf("%w %s: %s do not fit the NUMA node(s) %s of the container's devices as one preferred NUMA affinity",
		errTopologyPolicy, p.opts.TopologyPolicy, what, devices)
}

// devicesOf returns the device hint of container name of a pod: the NUMA
// nodes of its devices (own for a container not tracked yet), and under
// topologyManagerScope: pod those of every running container of the pod.
// 0 (no hint) under topologyManagerPolicy: none.
func (p *Policy) devicesOf(m *Model, podUID, name string, own cpuallocator.NodeMask) cpuallocator.NodeMask {
	if !p.AlignsDevices() {
		return 0
	}
	nodes := own
	pod := p.opts.TopologyScope == cpuallocator.ScopePod
	for _, t := range m.podContainers(podUID) {
		if t.PodUID == podUID && !t.Stopped && (pod || t.Name == name) {
			nodes = nodes.Union(t.DeviceNodes)
		}
	}
	return nodes
}

func (p *Policy) keeping(keep cpuset.CPUSet) string {
	if keep.IsEmpty() {
		return ""
	}
	return fmt.Sprintf(" keeping %s", keep)
}

// verdictFor tells whether a placement that failed with err could succeed
// once other pods released their CPUs. Only a shortfall of free CPUs can
// (Deferred), and only when the placement fits the node with every other
// container gone; a failed feasibility check — the topology manager policy,
// whole cores under full-pcpus-only — is Infeasible (KEP-5554: every
// topology error is Infeasible).
func (p *Policy) verdictFor(pl placement, err error) Verdict {
	if errors.Is(err, errTopologyPolicy) || errors.Is(err, cpuallocator.ErrTopology) {
		return Infeasible
	}
	keep, _ := cpumask.Of(pl.keep) // assigned CPUs: no negative id
	if _, err := p.place(pl, p.allocatableMask.AndNot(keep), p.poolBase.Size()-p.inPoolBase(pl.keep)); err != nil {
		return Infeasible
	}
	return Deferred
}

// smtAligned reports whether n CPUs can be whole cores under
// full-pcpus-only.
func (p *Policy) smtAligned(n int) bool {
	if !p.alloc.Options().FullPCPUsOnly {
		return true
	}
	return n%p.topo.ThreadsPerCore() == 0
}

// displayName names a container for humans.
func displayName(pod Pod, name string) string {
	if pod.Name == "" {
		return pod.UID + "/" + name
	}
	return pod.Namespace + "/" + pod.Name + "/" + name
}
