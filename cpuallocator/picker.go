package cpuallocator

// picker chooses CPUs one decision at a time on an allocation tree. It
// keeps, for every unit, how many CPUs may still be taken (free) and how
// many the container already owns (held: its must-keep CPUs and what this
// picker took). It is used for one call and then dropped.
type picker struct {
	tree *unitTree
	// avail are the CPUs that may still be taken.
	avail cpuBits
	free  []int32
	held  []int32
	// taken are the CPUs picked so far, in order.
	taken []int
	mode  pickMode
}

// pickMode selects how CPUs are taken inside a unit.
type pickMode struct {
	// wholeCores (full-pcpus-only) never splits a core: a core is taken
	// with all its free CPUs or not at all.
	wholeCores bool
	// spread (distribute-cpus-across-cores) takes one thread per core
	// before any second thread.
	spread bool
}

// newPicker prepares a picker that takes CPUs of avail for a container that
// already holds the CPUs of held (avail and held are disjoint). Under
// wholeCores avail must hold only CPUs of cores entirely in avail ∪ held
// (Allocator.usable).
func newPicker(tree *unitTree, avail, held cpuBits, mode pickMode) *picker {
	p := &picker{
		tree:  tree,
		avail: avail.clone(),
		free:  make([]int32, len(tree.units)),
		held:  make([]int32, len(tree.units)),
		mode:  mode,
	}
	for id := range avail.all() {
		p.add(p.free, tree.coreOf[id], 1)
	}
	for id := range held.all() {
		p.add(p.held, tree.coreOf[id], 1)
	}
	return p
}

// coreWithin reports whether every CPU of a core is in a or in b.
func coreWithin(cpus []int, a, b cpuBits) bool {
	for _, id := range cpus {
		if !a.has(id) && !b.has(id) {
			return false
		}
	}
	return true
}

// add adds delta to counts of unit u and all its ancestors.
func (p *picker) add(counts []int32, u int32, delta int32) {
	for ; u >= 0; u = p.tree.units[u].parent {
		counts[u] += delta
	}
}

// available returns how many CPUs the picker may take.
func (p *picker) available() int { return int(p.free[0]) }

// take picks up to n CPUs and returns how many it picked.
func (p *picker) take(n int) int {
	if n <= 0 {
		return 0
	}
	return p.takeFrom(0, n)
}

func (p *picker) takeCPU(id int) {
	core := p.tree.coreOf[id]
	p.avail.clear(id)
	p.add(p.free, core, -1)
	p.add(p.held, core, 1)
	p.taken = append(p.taken, id)
}

// takeFrom picks up to r CPUs inside unit u, in the packed order:
//
//  0. from children that already hold CPUs of the container (most held
//     first), so that the container stays together;
//  1. if a child can hold the remainder, from the one that holds it in the
//     deepest single unit (a NUMA node rather than only a socket, an uncore
//     cache rather than only a NUMA node), the tightest such unit first
//     (best fit, least fragmentation), then the child with the fewest free
//     CPUs, then the lowest id;
//  2. otherwise a whole free child no larger than the remainder, lowest id
//     first, and back to 1;
//  3. otherwise all of the child with the most free CPUs, and back to 1.
//
// Under full-pcpus-only the cores of a unit are taken whole, lowest id
// first, and under distribute-cpus-across-cores one thread per core at a
// time (spreadOverCores).
func (p *picker) takeFrom(u int32, r int) int {
	un := &p.tree.units[u]
	if un.level == levelCore {
		return p.takeThreads(u, r)
	}
	coreParent := p.tree.units[un.children[0]].level == levelCore
	if p.mode.spread && coreParent {
		return p.spreadOverCores(u, r)
	}
	want := r
	r -= p.takeColocated(un.children, r)
	if p.mode.wholeCores && coreParent {
		// Cores with every thread online first: a core missing a thread
		// (offline or isolated sibling) only fills an odd remainder.
		for _, full := range []bool{true, false} {
			for _, c := range un.children {
				cu := &p.tree.units[c]
				if r > 0 && (cu.size == p.tree.threads) == full && int(p.free[c]) == cu.size && cu.size <= r {
					r -= p.takeThreads(c, r)
				}
			}
		}
		return want - r
	}
	var exhausted map[int32]bool
	for r > 0 {
		best, ask := p.bestFit(un.children, r, exhausted), r
		if best < 0 {
			if best = p.firstWhole(un.children, r, exhausted); best < 0 {
				best = p.largest(un.children, exhausted)
			}
			if best < 0 {
				break
			}
			ask = int(p.free[best])
		}
		got := p.takeFrom(best, ask)
		r -= got
		if got < ask {
			if exhausted == nil {
				exhausted = map[int32]bool{}
			}
			exhausted[best] = true
		}
	}
	return want - r
}

// firstWhole returns the lowest-id child whose CPUs are all free and no more
// than r, or -1.
func (p *picker) firstWhole(children []int32, r int, exhausted map[int32]bool) int32 {
	for _, c := range children {
		if size := p.tree.units[c].size; int(p.free[c]) == size && size <= r && !exhausted[c] {
			return c
		}
	}
	return -1
}

// bestFit returns the child that holds r CPUs best (step 1 of takeFrom),
// or -1 when none can.
func (p *picker) bestFit(children []int32, r int, exhausted map[int32]bool) int32 {
	best, bestDepth, bestTight := int32(-1), 0, int32(0)
	for _, c := range children {
		if int(p.free[c]) < r || exhausted[c] {
			continue
		}
		depth, tight := p.fit(c, r)
		switch {
		case best < 0, depth > bestDepth,
			depth == bestDepth && tight < bestTight,
			depth == bestDepth && tight == bestTight && p.free[c] < p.free[best]:
			best, bestDepth, bestTight = c, depth, tight
		}
	}
	return best
}

// fit returns the depth of the deepest unit within u (u included, cores
// excluded) that has r free CPUs, and the fewest free CPUs of such a unit
// at that depth. u must have r free CPUs.
func (p *picker) fit(u int32, r int) (int, int32) {
	un := &p.tree.units[u]
	depth, tight := un.depth, p.free[u]
	if un.level == levelCore || p.tree.units[un.children[0]].level == levelCore {
		return depth, tight
	}
	for _, c := range un.children {
		if int(p.free[c]) < r {
			continue
		}
		if d, t := p.fit(c, r); d > depth || (d == depth && t < tight) {
			depth, tight = d, t
		}
	}
	return depth, tight
}

// largest returns the child with the most free CPUs, lowest id on ties, or
// -1 when none has any.
func (p *picker) largest(children []int32, exhausted map[int32]bool) int32 {
	best := int32(-1)
	for _, c := range children {
		if p.free[c] > 0 && !exhausted[c] && (best < 0 || p.free[c] > p.free[best]) {
			best = c
		}
	}
	return best
}

// takeColocated takes up to r CPUs from the children that hold CPUs of the
// container, most held first, lowest id on ties.
func (p *picker) takeColocated(children []int32, r int) int {
	got := 0
	for r > got {
		best := int32(-1)
		for _, c := range children {
			if p.held[c] > 0 && p.free[c] > 0 && (best < 0 || p.held[c] > p.held[best]) {
				best = c
			}
		}
		if best < 0 {
			break
		}
		ask := min(r-got, int(p.free[best]))
		n := p.takeFrom(best, ask)
		got += n
		if n < ask {
			// Under wholeCores the rest of this child cannot be taken in a
			// size that fits; the other steps handle the remainder.
			break
		}
	}
	return got
}

// takeThreads picks up to r free CPUs of core u, lowest id first. Under
// wholeCores it takes all the core's free CPUs or none.
func (p *picker) takeThreads(u int32, r int) int {
	f := int(p.free[u])
	if f == 0 || (p.mode.wholeCores && f > r) {
		return 0
	}
	got := 0
	for _, id := range p.tree.units[u].cpus {
		if got == r {
			break
		}
		if p.avail.has(id) {
			p.takeCPU(id)
			got++
		}
	}
	return got
}

// spreadOverCores picks up to r CPUs from the cores of unit u, one thread
// per core before any core gets a second one (distribute-cpus-across-cores),
// cores in id order.
func (p *picker) spreadOverCores(u int32, r int) int {
	got := 0
	for pass := int32(1); got < r && p.free[u] > 0; pass++ {
		for _, c := range p.tree.units[u].children {
			if got == r {
				break
			}
			if p.free[c] > 0 && p.held[c] < pass {
				got += p.takeThreads(c, 1)
			}
		}
	}
	return got
}

// takenBits returns the picked CPUs as a bitmap of the given length.
func (p *picker) takenBits(words int) cpuBits {
	b := make(cpuBits, words)
	for _, id := range p.taken {
		b.set(id)
	}
	return b
}
