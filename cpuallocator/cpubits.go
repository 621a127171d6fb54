package cpuallocator

import "github.com/nri-cpumanager/nri-cpumanager/cpumask"

// cpuBits is a set of CPU ids as a bitmap. The allocator works on bitmaps
// because cpuset.CPUSet, a map, is too slow for thousands of CPUs; it
// converts at the API boundary only. Every bitmap of a topology has the
// topology's length (Topology.newBits).
type cpuBits = cpumask.Mask
