package cpuallocator

// This file fixes the exported API of the package. Other packages (policy/,
// plugin/, cmd/) are written against it.

import (
	"errors"

	"k8s.io/utils/cpuset"
)

// CPUInfo describes one logical CPU of the machine.
type CPUInfo struct {
	// ID is the logical CPU number (cpuN in sysfs).
	ID int
	// Core identifies the physical core. It is unique machine-wide (sysfs
	// core_id is only unique within a package/die, so discovery derives a
	// machine-wide id from the package, die and core_id).
	Core int
	// Socket is the physical package id.
	Socket int
	// Die is the die id, unique machine-wide.
	Die int
	// NUMANode is the NUMA node the CPU belongs to.
	NUMANode int
	// UncoreCache identifies the L3 (last level / uncore) cache group the CPU
	// shares, unique machine-wide. CPUs without an L3 are grouped by socket.
	UncoreCache int
}

// NodeMask is a set of NUMA node ids. Node ids must be below 64.
type NodeMask uint64

// NewNodeMask returns the mask holding the given node ids.
func NewNodeMask(nodes ...int) NodeMask { return newNodeMask(nodes...) }

// Errors returned by the allocator, wrapped with context. Callers classify
// refusals with errors.Is.
var (
	// ErrNotEnoughCPUs: fewer CPUs are available than requested.
	ErrNotEnoughCPUs = errors.New("not enough free CPUs")
	// ErrTopology: the CPUs exist but not in a shape the options or the
	// requested NUMA affinity allow (e.g. not enough whole free cores under
	// full-pcpus-only, or the affinity cannot hold the request).
	ErrTopology = errors.New("topology constraint cannot be met")
	// ErrSMTAlignment: full-pcpus-only and the request is not a multiple of
	// the number of threads per core.
	ErrSMTAlignment = errors.New("request is not a multiple of the SMT level")
	// ErrInvalidRequest: inconsistent inputs, e.g. a must-keep CPU that is
	// not online, a size smaller than the must-keep set, or a negative size.
	ErrInvalidRequest = errors.New("invalid allocation request")
	// ErrOptions: a forbidden or unknown combination of policy options.
	ErrOptions = errors.New("invalid CPU manager policy options")
)

// StaticPolicyOptions are the kubelet's static CPU manager policy options
// that shape allocation. strict-cpu-reservation is not here: it changes the
// set of available CPUs, which the caller builds.
type StaticPolicyOptions struct {
	FullPCPUsOnly             bool // full-pcpus-only
	DistributeCPUsAcrossNUMA  bool // distribute-cpus-across-numa
	AlignBySocket             bool // align-by-socket
	DistributeCPUsAcrossCores bool // distribute-cpus-across-cores
	PreferAlignByUncoreCache  bool // prefer-align-cpus-by-uncorecache
}

// Validate rejects the combinations the kubelet forbids:
// full-pcpus-only with distribute-cpus-across-cores, and
// distribute-cpus-across-cores with distribute-cpus-across-numa.
func (o StaticPolicyOptions) Validate() error { return o.validate() }

// TopologyOptions are the topology manager policy options that shape NUMA
// hints.
type TopologyOptions struct {
	// MaxAllowableNUMANodes bounds the number of NUMA nodes a hint may span
	// (max-allowable-numa-nodes; 0 means the kubelet default, 8).
	MaxAllowableNUMANodes int
	// PreferClosestNUMANodes orders hints of equal width by the distance
	// between their nodes (prefer-closest-numa-nodes).
	PreferClosestNUMANodes bool
}

// NUMAHint is a NUMA affinity that can satisfy a request.
type NUMAHint struct {
	// Nodes are the NUMA nodes of the affinity.
	Nodes NodeMask
	// Preferred is true when Nodes is as narrow as the request could ever
	// be on this machine: its width equals the fewest NUMA nodes whose
	// total CPUs (free or not) can hold the request, as the kubelet defines
	// a preferred hint.
	Preferred bool
}

// Topology is the CPU topology of a machine. It is immutable once built and
// safe for concurrent use.
type Topology struct {
	// unexported fields; see topology.go
	impl topologyImpl
}

// Discover reads the topology from the sysfs tree rooted at sysfsRoot ("/sys"
// in production). It reads devices/system/cpu/{online,isolated},
// cpuN/topology/*, cpuN/cache/index*/*, and devices/system/node/*. Offline
// and isolated CPUs are excluded. A malformed or missing file gives an error
// naming the file.
func Discover(sysfsRoot string) (*Topology, error) { return discover(sysfsRoot) }

// NewTopology builds a topology from explicit CPU descriptions (used by the
// simulator and tests). distances[i][j] is the distance from NUMA node i to
// node j; nil means 10 on the diagonal and 20 elsewhere.
func NewTopology(cpus []CPUInfo, distances map[int]map[int]int) (*Topology, error) {
	return newTopology(cpus, distances)
}

// CPUs returns the online, non-isolated CPUs.
func (t *Topology) CPUs() cpuset.CPUSet { return t.impl.cpus() }

// CPU returns the description of one CPU.
func (t *Topology) CPU(id int) (CPUInfo, bool) { return t.impl.cpu(id) }

// NUMANodes returns the NUMA node ids, ascending.
func (t *Topology) NUMANodes() []int { return t.impl.numaNodes() }

// Sockets returns the socket ids, ascending.
func (t *Topology) Sockets() []int { return t.impl.sockets() }

// ThreadsPerCore returns the SMT level (the largest number of online
// threads of any core).
func (t *Topology) ThreadsPerCore() int { return t.impl.threadsPerCore() }

// CPUsInNUMANodes returns the CPUs of the nodes in mask.
func (t *Topology) CPUsInNUMANodes(mask NodeMask) cpuset.CPUSet { return t.impl.cpusInNUMANodes(mask) }

// NUMANodesOf returns the NUMA nodes that the given CPUs belong to.
func (t *Topology) NUMANodesOf(cpus cpuset.CPUSet) NodeMask { return t.impl.numaNodesOf(cpus) }

// CoreSiblings returns the CPUs of the core that cpu belongs to (cpu
// included).
func (t *Topology) CoreSiblings(cpu int) cpuset.CPUSet { return t.impl.coreSiblings(cpu) }

// Distance returns the NUMA distance from node a to node b.
func (t *Topology) Distance(a, b int) int { return t.impl.distance(a, b) }

// String describes the topology for humans (the `topology` subcommand).
func (t *Topology) String() string { return t.impl.String() }

// Allocator decides CPU placement on one topology with one set of options.
// It holds no allocation state: every call says which CPUs are available. It
// is safe for concurrent use.
type Allocator struct {
	topo   *Topology
	opts   StaticPolicyOptions
	tmOpts TopologyOptions
	impl   allocatorImpl
}

// NewAllocator validates the options and returns an allocator.
func NewAllocator(t *Topology, opts StaticPolicyOptions, tmOpts TopologyOptions) (*Allocator, error) {
	return newAllocator(t, opts, tmOpts)
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
	return a.allocate(available, n, affinity)
}

// Grow returns a set of n CPUs that holds every CPU of current plus
// n-|current| CPUs of available (which must not overlap current). It stays
// inside current's NUMA nodes when they can hold n, else widens to the fewest
// extra nodes, closest first. A non-zero affinity (which must contain
// current's nodes) is filled first, as in Allocate.
func (a *Allocator) Grow(available, current cpuset.CPUSet, n int, affinity NodeMask) (cpuset.CPUSet, error) {
	return a.grow(available, current, n, affinity)
}

// Shrink returns a subset of current with n CPUs that holds every CPU of
// original (original ⊆ current, |original| ≤ n ≤ |current|). It keeps the
// most compact set: CPUs on NUMA nodes, sockets and uncore caches outside the
// original's affinity are released first, whole cores first under
// full-pcpus-only.
func (a *Allocator) Shrink(current, original cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	return a.shrink(current, original, n)
}

// NUMAHints returns the NUMA affinities that can hold n CPUs, made of the
// free CPUs in available plus the CPUs in mustKeep (disjoint from
// available), each containing the nodes of mustKeep, best first: preferred
// before not preferred, narrower before wider, then (with
// prefer-closest-numa-nodes) smaller total distance, then lower node ids.
// Masks wider than max-allowable-numa-nodes are not returned. It does not
// enumerate all 2^N masks: it stops at the narrowest width that fits.
// An empty result means no affinity can hold the request.
func (a *Allocator) NUMAHints(available, mustKeep cpuset.CPUSet, n int) []NUMAHint {
	return a.numaHints(available, mustKeep, n)
}

// ReservedCPUs picks n CPUs of the machine to reserve for the system, in
// the packed order: lowest-numbered whole cores first, as the kubelet places
// a reservation given as a count.
func (a *Allocator) ReservedCPUs(n int) (cpuset.CPUSet, error) { return a.reservedCPUs(n) }
