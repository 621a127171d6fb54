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
// adds more, Shrink keeps every baseline CPU and releases the rest in the
// least compact order. No function ever returns a set that misses a CPU the
// caller said must be kept, nor one that holds a CPU outside the set the
// caller said is available: it returns an error instead.
//
// The packed order, the placement rule and whole cores under
// full-pcpus-only are described in docs/design.md ("Topology and
// allocation").
//
// This package is the only one of the plugin that reads sysfs, with its
// sub-package devices (the NUMA nodes of a container's devices), both
// through internal/sysfs (the demo under test/ reads the host's online
// CPUs to print them).
package cpuallocator
