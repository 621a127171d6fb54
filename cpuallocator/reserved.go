package cpuallocator

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// ReservedCPUs picks n CPUs of the machine to reserve for the system, in
// the packed order: lowest-numbered whole cores first, as the kubelet places
// a reservation given as a count.
//
// The policy options do not apply: the reservation is placed by the plain
// packed order over all CPUs, whatever the allocator's options.
func (a *Allocator) ReservedCPUs(n int) (cpuset.CPUSet, error) {
	total := len(a.topo.cpus)
	switch {
	case n < 0:
		return cpuset.New(), fmt.Errorf("reserve %d CPUs: negative count: %w", n, ErrInvalidRequest)
	case n > total:
		return cpuset.New(), fmt.Errorf("reserve %d CPUs: the machine has %d (%s): %w", n, total, a.topo.all, ErrNotEnoughCPUs)
	}
	p := newPicker(a.plainTree, a.topo.allBits, a.topo.newBits(), pickMode{})
	p.take(n)
	return cpuset.New(p.taken...), nil
}
