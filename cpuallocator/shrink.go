package cpuallocator

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// Shrink returns a subset of current with n CPUs that holds every CPU of
// baseline (baseline ⊆ current, |baseline| ≤ n ≤ |current|). It keeps the
// most compact set: CPUs on NUMA nodes, sockets and uncore caches outside the
// baseline's affinity are released first, whole cores first under
// full-pcpus-only. There it fails with ErrTopology only when no choice of
// whole cores of current − baseline adds up to n − |baseline| (cores with
// offline siblings have fewer CPUs, see wholecores.go).
//
// Which of the other CPUs stay is decided by the packed order run over
// them with the baseline CPUs as the container's: siblings of baseline
// CPUs first, then CPUs sharing their uncore cache, NUMA node and socket,
// then the most compact rest. With preferred CPUs (Preferring) the
// preferred ones are kept first where the topology allows (prefer.go).
func (a *Allocator) Shrink(current, baseline cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	fail := func(err error) (cpuset.CPUSet, error) {
		return cpuset.New(), fmt.Errorf("shrink %s to %d CPUs keeping %s: %w", current, n, baseline, err)
	}
	cur, unknown := a.topo.bitsOf(current)
	switch {
	case len(unknown) > 0:
		return fail(fmt.Errorf("CPUs %s are not online CPUs of this machine: %w", cpuset.New(unknown...), ErrInvalidRequest))
	case !baseline.IsSubsetOf(current):
		return fail(fmt.Errorf("baseline CPUs %s are not all held: %w", baseline.Difference(current), ErrInvalidRequest))
	case n < baseline.Size():
		return fail(fmt.Errorf("%d CPUs is fewer than the %d baseline ones: %w", n, baseline.Size(), ErrInvalidRequest))
	case n > current.Size():
		return fail(fmt.Errorf("%d CPUs is more than the %d it holds: %w", n, current.Size(), ErrInvalidRequest))
	}
	if err := a.checkSMT(n); err != nil {
		return fail(err)
	}
	switch n {
	case baseline.Size():
		return baseline.Clone(), nil
	case current.Size():
		return current.Clone(), nil
	}
	orig, _ := a.topo.bitsOf(baseline)
	cands := a.usable(cur.AndNot(orig), orig)
	p := newPicker(a.shrinkTree, cands, orig, a.mode)
	keep := n - baseline.Size()
	if got := p.take(keep); got < keep {
		return fail(fmt.Errorf("cannot keep %d more CPUs of %s as whole cores (%s): %w", keep, current.Difference(baseline), optFullPCPUsOnly, ErrTopology))
	}
	kept := a.keepPreferred(p.takenBits(len(cur)), cands, orig, keep)
	return baseline.Union(kept.CPUSet()), nil
}
