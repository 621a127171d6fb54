package cpuallocator

// This file fixes the exported value types of the package. Other packages
// (policy/, plugin/, cmd/) are written against them and against Topology
// (topology.go, discover.go) and Allocator (allocator.go, grow.go,
// shrink.go, hints.go, reserved.go).

import "errors"

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
	// Isolated is set for a CPU the kernel isolates from the scheduler's
	// load balancing (isolcpus, devices/system/cpu/isolated). It is a CPU
	// of the topology like any other; the policy decides what it serves.
	Isolated bool
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
	// requested NUMA affinity allow (e.g. under full-pcpus-only no choice of
	// whole free cores adds up to the request, or the affinity cannot hold
	// the request).
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
