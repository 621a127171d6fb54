// Package cpuallocator models the CPU topology of a machine and decides which
// CPUs a container gets.
//
// The topology (online CPUs, sockets, dies, NUMA nodes with distances, cores,
// SMT siblings and L3/uncore cache groups) is discovered from a sysfs tree
// whose root is a parameter, so that tests run on fixture trees rather than
// on the host. Offline CPUs are not part of the model; isolated ones
// (isolcpus) are, marked as such: an Allocator made with Preferring takes
// them before any other CPU (isolatedCPUs: exclusive).
//
// The Allocator places exclusive CPUs the way the kubelet's static CPU
// manager policy does, honouring its policy options, and extends it with the
// resize operations of KEP-5554: Grow keeps every CPU a container holds and
// adds more, Shrink keeps every original CPU and releases the rest in the
// least compact order. No function ever returns a set that misses a CPU the
// caller said must be kept, nor one that holds a CPU outside the set the
// caller said is available: it returns an error instead.
//
// # Packed order
//
// The machine is a tree: sockets and NUMA nodes (the larger unit on top),
// uncore caches under prefer-align-cpus-by-uncorecache, cores, threads. At
// each level a request goes first to the units that already hold CPUs of
// the container (a growing container, or the original CPUs a shrink keeps),
// then to the unit that can hold all of it in the deepest single unit
// below (a NUMA node rather than only a socket), the one with the fewest
// free CPUs first (best fit, least fragmentation), lowest id on ties. Only
// a request no unit can hold is split: whole free units first, then the
// unit with the most free CPUs. At the core level this takes whole cores
// before single threads, and single threads from partly used cores first.
//
// # Whole cores
//
// Under full-pcpus-only a core is its online CPUs, taken whole: a core with
// offline siblings is a whole core of fewer CPUs. A request is granted whenever some choice of whole free cores adds
// up to it, which with cores of different sizes is a subset sum that the
// packed order above solves exactly (wholecores.go), and refused with
// ErrTopology otherwise.
//
// This package is the only one of the plugin that reads sysfs (the demo
// under test/ reads the host's online CPUs to print them).
package cpuallocator
