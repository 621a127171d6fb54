package cpuallocator

import "slices"

// This file is the picker's exact mode: full-pcpus-only on cores whose
// free parts differ in size (see wholecores.go). The order is takeFrom's;
// what changes is that a unit is asked only for a number of CPUs its whole
// cores add up to, and that every step leaves a remainder the units not
// used yet can still make up.

// takeExactFrom picks exactly r CPUs inside unit u, whose whole cores must
// add up to r (p.holds(u, r)), in the packed order of takeFrom. Each step
// takes from one child as much as that order gives it while the children
// neither used nor skipped can still make up the rest. It always
// completes: while some choice of cores makes up r, a child of that
// choice can take its part.
func (p *picker) takeExactFrom(u int32, r int) {
	un := &p.tree.units[u]
	switch {
	case r == 0:
	case un.level == levelCore:
		p.takeThreads(u, r)
	case p.tree.units[un.children[0]].level == levelCore:
		p.takeExactCores(u, r)
	default:
		skip := map[int32]bool{}
		for r > 0 {
			c, n := p.nextExact(un.children, r, skip)
			if c < 0 {
				return // only when r was not reachable to begin with
			}
			p.takeExactFrom(c, n)
			r -= n
			skip[c] = true
		}
	}
}

// nextExact chooses the child to take from next and how many CPUs, in
// takeFrom's order: the children holding CPUs of the container (most
// first, as much as possible), the child that holds all of r in the
// deepest and tightest unit, the lowest-id whole free child no larger than
// r, then the largest child (as much as possible). A choice is valid only
// when the children outside skip and other than it can make up the rest
// of r. Children that cannot contribute at all are added to skip. It
// returns -1 when no child can contribute.
func (p *picker) nextExact(children []int32, r int, skip map[int32]bool) (int32, int) {
	for c := p.mostHeld(children, skip); c >= 0; c = p.mostHeld(children, skip) {
		if n := p.maxShare(children, c, r, skip); n > 0 {
			return c, n
		}
		skip[c] = true
	}
	if c := p.bestFit(children, r, skip); c >= 0 {
		return c, r
	}
	for _, c := range children {
		size := p.tree.units[c].size
		if !skip[c] && int(p.free[c]) == size && size <= r && p.restSizes(children, c, skip).canMake(r-size) {
			return c, size
		}
	}
	for c := p.largest(children, skip); c >= 0; c = p.largest(children, skip) {
		if n := p.maxShare(children, c, r, skip); n > 0 {
			return c, n
		}
		skip[c] = true
	}
	return -1, 0
}

// maxShare returns the most CPUs, up to r, that child c can give while the
// other children outside skip make up the rest of r; 0 when it cannot
// contribute.
func (p *picker) maxShare(children []int32, c int32, r int, skip map[int32]bool) int {
	return max(largestSplit(p.sizesOf(c), p.restSizes(children, c, skip), r, min(r, int(p.free[c]))), 0)
}

// restSizes returns the whole-core parts of the children outside skip
// other than except.
func (p *picker) restSizes(children []int32, except int32, skip map[int32]bool) coreSizes {
	rest := make(coreSizes, p.tree.threads+1)
	for _, c := range children {
		if c == except || skip[c] {
			continue
		}
		for w, n := range p.sizesOf(c) {
			rest[w] += n
		}
	}
	return rest
}

// takeExactCores picks exactly r CPUs of the cores of unit u, whole cores
// only, in coreOrder. A core is taken when the cores after it can still
// make up the rest, so one pass completes when u holds r.
func (p *picker) takeExactCores(u int32, r int) {
	left := append(coreSizes(nil), p.sizesOf(u)...)
	for _, c := range p.coreOrder(u) {
		f := int(p.free[c])
		left[f]--
		if f <= r && left.canMake(r-f) {
			r -= p.takeThreads(c, f)
		}
		if r == 0 {
			return
		}
	}
}

// coreOrder returns the cores of unit u that have free CPUs in the order
// takeFrom fills them under full-pcpus-only: cores holding CPUs of the
// container (most first), then cores with every thread online, then
// cores missing threads, lowest id first within each group.
func (p *picker) coreOrder(u int32) []int32 {
	var cores []int32
	for _, c := range p.tree.units[u].children {
		if p.free[c] > 0 {
			cores = append(cores, c)
		}
	}
	group := func(c int32) int {
		switch {
		case p.held[c] > 0:
			return 0
		case p.tree.units[c].size == p.tree.threads:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(cores, func(a, b int32) int {
		if ga, gb := group(a), group(b); ga != gb {
			return ga - gb
		}
		return int(p.held[b] - p.held[a])
	})
	return cores
}
