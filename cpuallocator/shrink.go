package cpuallocator

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// Shrink returns a subset of current with n CPUs that holds every CPU of
// original (original ⊆ current, |original| ≤ n ≤ |current|). It keeps the
// most compact set: CPUs on NUMA nodes, sockets and uncore caches outside the
// original's affinity are released first, whole cores first under
// full-pcpus-only. There it fails with ErrTopology only when no choice of
// whole cores of current − original adds up to n − |original| (cores with
// offline siblings have fewer CPUs, see wholecores.go).
//
// Which of the other CPUs stay is decided by the packed order run over
// them with the original CPUs as the container's: siblings of original
// CPUs first, then CPUs sharing their uncore cache, NUMA node and socket,
// then the most compact rest. With preferred CPUs (Preferring) the
// preferred ones are kept first where the topology allows (prefer.go).
func (a *Allocator) Shrink(current, original cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	fail := func(err error) (cpuset.CPUSet, error) {
		return cpuset.New(), fmt.Errorf("shrink %s to %d CPUs keeping %s: %w", current, n, original, err)
	}
	cur, unknown := a.topo.bitsOf(current)
	switch {
	case len(unknown) > 0:
		return fail(fmt.Errorf("CPUs %s are not online CPUs of this machine: %w", cpuset.New(unknown...), ErrInvalidRequest))
	case !original.IsSubsetOf(current):
		return fail(fmt.Errorf("original CPUs %s are not all held: %w", original.Difference(current), ErrInvalidRequest))
	case n < original.Size():
		return fail(fmt.Errorf("%d CPUs is fewer than the %d original ones: %w", n, original.Size(), ErrInvalidRequest))
	case n > current.Size():
		return fail(fmt.Errorf("%d CPUs is more than the %d it holds: %w", n, current.Size(), ErrInvalidRequest))
	}
	if err := a.checkSMT(n); err != nil {
		return fail(err)
	}
	switch n {
	case original.Size():
		return original.Clone(), nil
	case current.Size():
		return current.Clone(), nil
	}
	orig, _ := a.topo.bitsOf(original)
	cands := a.usable(cur.AndNot(orig), orig)
	p := newPicker(a.shrinkTree, cands, orig, a.mode)
	keep := n - original.Size()
	if got := p.take(keep); got < keep {
		return fail(fmt.Errorf("cannot keep %d more CPUs of %s as whole cores (%s): %w", keep, current.Difference(original), optFullPCPUsOnly, ErrTopology))
	}
	kept := a.keepPreferred(p.takenBits(len(cur)), cands, orig, keep)
	return original.Union(kept.CPUSet()), nil
}
