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
	// exact is set under wholeCores when the free parts of the cores differ
	// in size (see wholecores.go): every take then keeps the rest of the
	// request reachable (takeExactFrom).
	exact bool
	// sizes holds, in exact mode, a coreSizes of threads+1 counters per
	// unit: the cores under the unit by their free CPUs.
	sizes []int32
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
		avail: avail.Clone(),
		free:  make([]int32, len(tree.units)),
		held:  make([]int32, len(tree.units)),
		mode:  mode,
	}
	for id := range avail.All() {
		p.add(p.free, tree.coreOf[id], 1)
	}
	// Only cores missing threads or partly held make parts of different
	// sizes.
	partial := !tree.complete
	for id := range held.All() {
		core := tree.coreOf[id]
		p.add(p.held, core, 1)
		partial = partial || p.free[core] > 0
	}
	if mode.wholeCores && partial {
		p.initSizes()
	}
	return p
}

// initSizes switches to exact mode when the free parts of the cores differ
// in size, and then counts them per unit.
func (p *picker) initSizes() {
	stride := p.tree.threads + 1
	root := make(coreSizes, stride)
	for c := range p.tree.units {
		if p.tree.units[c].level == levelCore && p.free[c] > 0 {
			root[p.free[c]]++
		}
	}
	if root.total() == 0 || root.only() != 0 {
		return
	}
	p.exact = true
	p.sizes = make([]int32, len(p.tree.units)*stride)
	for c := range p.tree.units {
		if f := p.free[c]; p.tree.units[c].level == levelCore && f > 0 {
			for u := int32(c); u >= 0; u = p.tree.units[u].parent {
				p.sizes[int(u)*stride+int(f)]++
			}
		}
	}
}

// sizesOf returns the whole-core parts under unit u (exact mode only). The
// result aliases the picker's counters: copy it before taking CPUs.
func (p *picker) sizesOf(u int32) coreSizes {
	stride := p.tree.threads + 1
	return coreSizes(p.sizes[int(u)*stride : int(u+1)*stride : int(u+1)*stride])
}

// coreWithin reports whether every CPU of a core is in a or in b.
func coreWithin(cpus []int, a, b cpuBits) bool {
	for _, id := range cpus {
		if !a.Has(id) && !b.Has(id) {
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

// take picks up to n CPUs and returns how many it picked. In exact mode it
// picks the most whole cores can make up, n when they can.
func (p *picker) take(n int) int {
	if n <= 0 {
		return 0
	}
	if !p.exact {
		return p.takeFrom(0, n)
	}
	n = p.sizesOf(0).largestAtMost(min(n, p.available()))
	before := len(p.taken)
	p.takeExactFrom(0, n)
	return len(p.taken) - before
}

// share returns how many of want CPUs to take from this picker: all it
// can, unless rest is not nil (under full-pcpus-only with whole cores of
// different sizes): then the most that leaves a remainder of rest.total
// the whole cores of rest.cpus, which this picker cannot take, make up.
func (p *picker) share(want int, rest *remainder) int {
	n := min(want, p.available())
	if rest == nil || !p.mode.wholeCores {
		return n
	}
	return max(largestSplit(p.tree.sizesOf(p.avail), p.tree.sizesOf(rest.cpus), rest.total, n), 0)
}

func (p *picker) takeCPU(id int) {
	core := p.tree.coreOf[id]
	if p.exact {
		p.moveSize(core)
	}
	p.avail.Remove(id)
	p.add(p.free, core, -1)
	p.add(p.held, core, 1)
	p.taken = append(p.taken, id)
}

// moveSize updates the exact-mode counters of core's ancestors for one
// more CPU of core taken.
func (p *picker) moveSize(core int32) {
	stride := p.tree.threads + 1
	f := int(p.free[core])
	for u := core; u >= 0; u = p.tree.units[u].parent {
		p.sizes[int(u)*stride+f]--
		if f > 1 {
			p.sizes[int(u)*stride+f-1]++
		}
	}
}

// holds reports whether unit u can give exactly r CPUs: it has r free
// ones and, in exact mode, whole cores that add up to r.
func (p *picker) holds(u int32, r int) bool {
	return int(p.free[u]) >= r && (!p.exact || p.sizesOf(u).canMake(r))
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
// first (in exact mode takeExactFrom follows this order instead), and
// under distribute-cpus-across-cores one thread per core at a time
// (spreadOverCores).
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
		if exhausted[c] || !p.holds(c, r) {
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
// excluded) that holds r CPUs, and the fewest free CPUs of such a unit at
// that depth. u must hold r CPUs.
func (p *picker) fit(u int32, r int) (int, int32) {
	un := &p.tree.units[u]
	depth, tight := un.depth, p.free[u]
	if un.level == levelCore || p.tree.units[un.children[0]].level == levelCore {
		return depth, tight
	}
	for _, c := range un.children {
		if !p.holds(c, r) {
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
		best := p.mostHeld(children, nil)
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

// mostHeld returns the child outside skip that holds the most CPUs of the
// container and has free ones, lowest id on ties, or -1.
func (p *picker) mostHeld(children []int32, skip map[int32]bool) int32 {
	best := int32(-1)
	for _, c := range children {
		if p.held[c] > 0 && p.free[c] > 0 && !skip[c] && (best < 0 || p.held[c] > p.held[best]) {
			best = c
		}
	}
	return best
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
		if p.avail.Has(id) {
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
		b.Add(id)
	}
	return b
}
