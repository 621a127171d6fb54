package fakesysfs

// KEP5554UseCases is the machine of KEP-5554's "Use Cases for CPU Resize":
// 6 physical cores with 2 threads each, CPUs 0-11, CPUs 0-5 on NUMA node 0
// and 6-11 on NUMA node 1. The KEP does not say how many sockets it has;
// this is one socket. The siblings are adjacent (core k = {2k, 2k+1}): with
// the siblings offset by the core count a core would span both nodes.
func KEP5554UseCases() Spec {
	return Spec{
		Sockets:        1,
		NUMAPerSocket:  2,
		CoresPerNUMA:   3,
		ThreadsPerCore: 2,
		Numbering:      SiblingsAdjacent,
	}
}

// KEP5554Checkpoint is a 16-CPU machine for KEP-5554's "Checkpoint file
// example during resize" walk-through. The KEP only says "16 CPUs"; its
// first allocation of 2 CPUs is 1-2 next to a reserved CPU 0, which is what
// the packed order gives without SMT (with SMT siblings 1 and 2 would be on
// different cores and a whole core would be taken instead). So: one socket,
// two NUMA nodes (CPUs 0-7 and 8-15), 16 single-threaded cores.
func KEP5554Checkpoint() Spec {
	return Spec{
		Sockets:        1,
		NUMAPerSocket:  2,
		CoresPerNUMA:   8,
		ThreadsPerCore: 1,
	}
}
