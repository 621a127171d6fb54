package cpuallocator

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// Grow returns a set of n CPUs that holds every CPU of current plus
// n-|current| CPUs of available (which must not overlap current). It stays
// inside current's NUMA nodes when they can hold n, else widens to the fewest
// extra nodes, closest first. A non-zero affinity (which must contain
// current's nodes) is filled first, as in Allocate.
func (a *Allocator) Grow(available, current cpuset.CPUSet, n int, affinity NodeMask) (cpuset.CPUSet, error) {
	avail, err := a.availableBits(available)
	return a.grow(avail, err, current, n, affinity)
}

// GrowFrom is Grow with the available CPUs as a mask: a caller that
// computes them as one (the policy, on every decision) builds no set.
func (a *Allocator) GrowFrom(available cpumask.Mask, current cpuset.CPUSet, n int, affinity NodeMask) (cpuset.CPUSet, error) {
	avail, err := a.availableMaskBits(available)
	return a.grow(avail, err, current, n, affinity)
}

func (a *Allocator) grow(avail cpuBits, err error, current cpuset.CPUSet, n int, affinity NodeMask) (cpuset.CPUSet, error) {
	fail := func(err error) (cpuset.CPUSet, error) {
		return cpuset.New(), fmt.Errorf("grow %s to %d CPUs: %w", current, n, err)
	}
	if err != nil {
		return fail(err)
	}
	held, unknown := a.topo.bitsOf(current)
	switch {
	case len(unknown) > 0:
		return fail(fmt.Errorf("current CPUs %s are not online CPUs of this machine: %w", cpuset.New(unknown...), ErrInvalidRequest))
	case n < current.Size():
		return fail(fmt.Errorf("%d CPUs is fewer than the %d it holds: %w", n, current.Size(), ErrInvalidRequest))
	case avail.Intersects(held):
		return fail(fmt.Errorf("available CPUs %s overlap the current ones: %w", avail.And(held).CPUSet(), ErrInvalidRequest))
	}
	if err := a.checkAffinity(affinity); err != nil {
		return fail(err)
	}
	currentNodes := a.topo.nodesOfBits(held)
	if affinity != 0 && !currentNodes.IsSubsetOf(affinity) {
		return fail(fmt.Errorf("NUMA affinity %s does not contain the current CPUs' nodes %s: %w", affinity, currentNodes, ErrInvalidRequest))
	}
	if err := a.checkSMT(n); err != nil {
		return fail(err)
	}
	need := n - current.Size()
	if need == 0 {
		return current.Clone(), nil
	}
	base := affinity
	if base == 0 {
		base = currentNodes
	} else if a.opts.AlignBySocket {
		base = a.topo.socketNodes(base)
	}
	var extra NodeMask
	usable := a.usable(avail, held)
	capacity := a.topo.countPerNode(usable)
	if short := need - capacity.sum(base); short > 0 && base != 0 {
		extra = a.widen(base, &capacity, short)
	}
	stages := []NodeMask{a.topo.knownNodes()}
	switch {
	case base != 0 && a.opts.DistributeCPUsAcrossNUMA:
		// distribute balances over all the nodes a stage offers: give it
		// the widened set at once.
		stages = []NodeMask{base | extra, a.topo.knownNodes()}
	case base != 0:
		stages = []NodeMask{base, base | extra, a.topo.knownNodes()}
	}
	picked, err := a.placePreferred(avail, usable, held, need, stages, false)
	if err != nil {
		return fail(err)
	}
	return current.Union(picked.CPUSet()), nil
}
