package cpuallocator

import "sort"

// The placement rule (docs/design.md, "Topology and allocation"): the CPUs
// of a new container use the fewest sockets, then the fewest NUMA nodes,
// then the fewest split cores that the free CPUs allow, so that no other
// choice is better on one of the three without being worse on another.
// The packed order meets it in most cases; pack measures its pick and,
// when a better shape exists, places the request again inside the groups
// of the best one (fewestSearch, placeInGroups).

// shape is how widely a pick spreads, compared in order: the top units of
// the tree it touches (sockets, or NUMA nodes where a node holds several
// sockets), the depth-2 units (NUMA nodes, or sockets), and its cost on
// cores: the cores the container holds in part, under
// distribute-cpus-across-cores the CPUs stacked on a core it already
// uses, nothing under full-pcpus-only.
type shape [3]int

func (s shape) less(o shape) bool {
	for i := range s {
		if s[i] != o[i] {
			return s[i] < o[i]
		}
	}
	return false
}

// fewest returns picked, the packed order's pick of CPUs of avail for a
// container holding held, or a pick of as many CPUs of a better shape.
func (a *Allocator) fewest(avail, held cpuBits, picked cpuBits) cpuBits {
	tree := a.packTree
	got := a.shapeOf(tree, held, picked)
	if a.plainlyLeast(tree, held, picked, got) {
		return picked
	}
	r := picked.Count()
	search := a.newFewestSearch(tree, avail, held, r)
	if search == nil || got == search.lowerBound() {
		return picked
	}
	best, ok := search.run()
	if !ok || !best.less(got) {
		return picked
	}
	alt := a.placeInGroups(tree, avail, held, search.bestSet, r)
	if alt.Count() == r && a.shapeOf(tree, held, alt).less(got) {
		return alt
	}
	return picked
}

// plainlyLeast reports, without looking at the free CPUs, whether no pick
// of as many CPUs can have a smaller shape than got: it uses no unit
// beyond the container's own (or one of each for a container holding
// none) and no core a pick of that size could avoid.
func (a *Allocator) plainlyLeast(tree *unitTree, held, picked cpuBits, got shape) bool {
	heldShape := a.shapeOf(tree, held, a.topo.newBits())
	if got[0] > max(heldShape[0], 1) || got[1] > max(heldShape[1], 1) {
		return false
	}
	switch n := picked.Count(); {
	case got[2] == 0:
		return true
	case a.mode.spread || a.mode.wholeCores:
		return false
	default:
		// A size the SMT level does not divide splits a core on a
		// machine whose cores all have every thread.
		return got[2] == 1 && n%tree.threads != 0 && tree.complete
	}
}

// groupStats is what a set of depth-2 units offers a request.
type groupStats struct {
	free int // CPUs to take
	// whole are the CPUs of cores entirely free, wholeSmall the number of
	// such cores missing threads (offline siblings).
	whole, wholeSmall int
	cores             int // cores with a CPU to take
}

func (g *groupStats) add(o groupStats) {
	g.free += o.free
	g.whole += o.whole
	g.wholeSmall += o.wholeSmall
	g.cores += o.cores
}

// coreCost is the lowest cost on cores of taking r of the CPUs g offers.
// It is exact up to two threads per core and a lower bound beyond.
func (a *Allocator) coreCost(g groupStats, r int) int {
	switch {
	case a.mode.wholeCores:
		return 0
	case a.mode.spread:
		return max(0, r-g.cores)
	}
	t := a.topo.threads
	if r <= g.whole {
		if r%t != 0 && g.wholeSmall == 0 {
			return 1
		}
		return 0
	}
	// Every CPU beyond the whole cores comes from a core in part, which
	// gives at most t-1.
	return (r - g.whole + t - 2) / max(t-1, 1)
}

// fewestSearch finds, for r CPUs of a picker's free CPUs, the groups
// (depth-2 units of the tree) whose CPUs make the best shape.
type fewestSearch struct {
	a    *Allocator
	tree *unitTree
	r    int
	// stats holds what each group offers, by slot; heldGroup and heldTop
	// mark the groups and top units the container already touches.
	stats              []groupStats
	heldGroup, heldTop []bool
	baseTop, baseGrp   int
	// mandatory are the container's groups that offer CPUs (taking from
	// them costs no unit), groups the others, most free first.
	mandatory, groups []int32
	suffix            []int // suffix[i]: free CPUs of groups[i:]
	// The search state, over group slots.
	tops     []int32 // per top slot: groups chosen under it
	chosen   []int32
	best     shape
	bestSet  []int32 // group units
	bestFree int
	found    bool
	visits   int
}

// fewestBudget bounds the sets a search visits; beyond it the best found
// so far stands (machines of up to 8 NUMA nodes stay far below it).
const fewestBudget = 4096

// newFewestSearch reads what the free CPUs avail offer. It returns nil
// where the rule is not checked: a container that holds part of a core
// with free CPUs (growth completes its cores first).
func (a *Allocator) newFewestSearch(tree *unitTree, avail, held cpuBits, r int) *fewestSearch {
	if r <= 0 {
		return nil
	}
	s := &fewestSearch{
		a: a, tree: tree, r: r,
		stats:     make([]groupStats, len(tree.groups)),
		heldGroup: make([]bool, len(tree.groups)),
		heldTop:   make([]bool, len(tree.tops)),
	}
	for id := range avail.All() {
		c := tree.coreOf[id]
		if !lowestOfCore(tree, c, id, avail) {
			continue
		}
		f := 0
		for _, sib := range tree.units[c].cpus {
			switch {
			case avail.Has(sib):
				f++
			case held.Has(sib):
				return nil
			}
		}
		s.stats[tree.slot[tree.group[c]]].addCore(tree, c, f)
	}
	for id := range held.All() {
		g := tree.group[tree.coreOf[id]]
		if gs := tree.slot[g]; !s.heldGroup[gs] {
			s.heldGroup[gs] = true
			s.baseGrp++
		}
		if ts := tree.slot[tree.units[g].parent]; !s.heldTop[ts] {
			s.heldTop[ts] = true
			s.baseTop++
		}
	}
	for gs, g := range tree.groups {
		switch {
		case s.stats[gs].free == 0:
		case s.heldGroup[gs]:
			s.mandatory = append(s.mandatory, g)
		default:
			s.groups = append(s.groups, g)
		}
	}
	// Most free first (stable: lowest unit first on ties), so the first
	// sets visited are the greedy ones.
	free := func(g int32) int { return s.stats[tree.slot[g]].free }
	groups := s.groups
	for i := 1; i < len(groups); i++ {
		for j := i; j > 0 && free(groups[j]) > free(groups[j-1]); j-- {
			groups[j], groups[j-1] = groups[j-1], groups[j]
		}
	}
	s.suffix = make([]int, len(groups)+1)
	for i := len(groups) - 1; i >= 0; i-- {
		s.suffix[i] = s.suffix[i+1] + free(groups[i])
	}
	return s
}

// statsOfBits is what the CPUs of b offer a new container.
func statsOfBits(tree *unitTree, b cpuBits) groupStats {
	var g groupStats
	for id := range b.All() {
		c := tree.coreOf[id]
		if !lowestOfCore(tree, c, id, b) {
			continue
		}
		f := 0
		for _, sib := range tree.units[c].cpus {
			if b.Has(sib) {
				f++
			}
		}
		g.addCore(tree, c, f)
	}
	return g
}

// addCore counts core c, f of whose CPUs are free.
func (g *groupStats) addCore(tree *unitTree, c int32, f int) {
	g.free += f
	g.cores++
	if size := tree.units[c].size; f == size {
		g.whole += f
		if size < tree.threads {
			g.wholeSmall++
		}
	}
}

// lowestOfCore reports whether id is the lowest CPU of core c in b.
func lowestOfCore(tree *unitTree, c int32, id int, b cpuBits) bool {
	for _, sib := range tree.units[c].cpus {
		if sib >= id {
			return true
		}
		if b.Has(sib) {
			return false
		}
	}
	return true
}

func (s *fewestSearch) statsOf(g int32) groupStats { return s.stats[s.tree.slot[g]] }

// lowerBound is a shape no pick beats: each count taken on its own.
func (s *fewestSearch) lowerBound() shape {
	var all groupStats
	for _, g := range s.mandatory {
		all.add(s.statsOf(g))
	}
	extraGroups, need := 0, s.r-all.free
	for _, g := range s.groups {
		all.add(s.statsOf(g))
		if need > 0 {
			need -= s.statsOf(g).free
			extraGroups++
		}
	}
	// Top units: the free CPUs under each one the container does not
	// touch yet, most first.
	perTop := make([]int, len(s.tree.tops))
	need = s.r
	for _, g := range append(append([]int32(nil), s.mandatory...), s.groups...) {
		if ts := s.tree.slot[s.tree.units[g].parent]; s.heldTop[ts] {
			need -= s.statsOf(g).free
		} else {
			perTop[ts] += s.statsOf(g).free
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(perTop)))
	extraTops := 0
	for _, f := range perTop {
		if need <= 0 || f == 0 {
			break
		}
		need -= f
		extraTops++
	}
	return shape{s.baseTop + extraTops, s.baseGrp + extraGroups, s.a.coreCost(all, s.r)}
}

// run searches the sets of groups that offer r CPUs, the container's own
// always in, and returns the best shape found.
func (s *fewestSearch) run() (shape, bool) {
	var base groupStats
	for _, g := range s.mandatory {
		base.add(s.statsOf(g))
	}
	s.chosen = append(s.chosen[:0], s.mandatory...)
	s.tops = make([]int32, len(s.tree.tops))
	s.visit(0, base, s.baseTop, s.baseGrp)
	return s.best, s.found
}

func (s *fewestSearch) visit(i int, cur groupStats, tops, grps int) {
	s.visits++
	if cur.free >= s.r {
		sh := shape{tops, grps, s.a.coreCost(cur, s.r)}
		if !s.found || sh.less(s.best) || (sh == s.best && cur.free < s.bestFree) {
			s.best, s.bestFree, s.found = sh, cur.free, true
			s.bestSet = append(s.bestSet[:0], s.chosen...)
		}
		return
	}
	if s.visits > fewestBudget || cur.free+s.suffix[i] < s.r {
		return
	}
	// One more group adds a group and perhaps a top unit: stop when that
	// cannot beat the best counts.
	if s.found && (tops > s.best[0] || (tops == s.best[0] && grps+1 > s.best[1])) {
		return
	}
	for j := i; j < len(s.groups); j++ {
		g := s.groups[j]
		ts := s.tree.slot[s.tree.units[g].parent]
		newTop := 0
		if !s.heldTop[ts] && s.tops[ts] == 0 {
			newTop = 1
		}
		next := cur
		next.add(s.statsOf(g))
		s.tops[ts]++
		s.chosen = append(s.chosen, g)
		s.visit(j+1, next, tops+newTop, grps+1)
		s.chosen = s.chosen[:len(s.chosen)-1]
		s.tops[ts]--
	}
}

// shapeOf measures a pick for a container holding held.
func (a *Allocator) shapeOf(tree *unitTree, held, picked cpuBits) shape {
	groups, tops := make([]bool, len(tree.groups)), make([]bool, len(tree.tops))
	var sh shape
	mark := func(id int) {
		g := tree.group[tree.coreOf[id]]
		if gs := tree.slot[g]; !groups[gs] {
			groups[gs] = true
			sh[1]++
		}
		if ts := tree.slot[tree.units[g].parent]; !tops[ts] {
			tops[ts] = true
			sh[0]++
		}
	}
	for id := range held.All() {
		mark(id)
	}
	for id := range picked.All() {
		mark(id)
		c := tree.coreOf[id]
		switch {
		case a.mode.wholeCores:
		case a.mode.spread:
			if !lowestOfCore(tree, c, id, picked) {
				sh[2]++ // stacked on a core the pick already uses
			}
		case lowestOfCore(tree, c, id, picked):
			for _, sib := range tree.units[c].cpus {
				if !picked.Has(sib) && !held.Has(sib) {
					sh[2]++ // a core the container holds in part
					break
				}
			}
		}
	}
	return sh
}

// placeInGroups takes r CPUs of avail inside the given groups for a
// container holding held, the cores in the order of their cost: under
// the packed order whole free cores first (with as many cores missing a
// thread as an odd count needs) and CPUs of cores in part for the rest;
// under distribute-cpus-across-cores one CPU per core first. Each take
// stays close to the ones before (the picker's colocation).
func (a *Allocator) placeInGroups(tree *unitTree, avail, held cpuBits, groups []int32, r int) cpuBits {
	in := make([]bool, len(tree.groups))
	for _, g := range groups {
		in[tree.slot[g]] = true
	}
	// part: CPUs of cores in part (spread: every CPU but a core's lowest);
	// small and full: whole free cores missing threads or not (spread: a
	// core's lowest free CPU, in full).
	part, small, full := a.topo.newBits(), a.topo.newBits(), a.topo.newBits()
	for id := range avail.All() {
		c := tree.coreOf[id]
		if !in[tree.slot[tree.group[c]]] {
			continue
		}
		size := tree.units[c].size
		switch {
		case a.mode.wholeCores:
			full.Add(id)
		case a.mode.spread:
			if lowestOfCore(tree, c, id, avail) {
				full.Add(id)
			} else {
				part.Add(id)
			}
		case !coreWithin(tree.units[c].cpus, avail, avail):
			part.Add(id)
		case size < tree.threads:
			small.Add(id)
		default:
			full.Add(id)
		}
	}
	var steps []cpuBits
	var counts []int
	switch whole := small.Count() + full.Count(); {
	case a.mode.wholeCores:
		steps, counts = []cpuBits{full}, []int{r}
	case a.mode.spread:
		steps, counts = []cpuBits{full, part}, []int{min(r, full.Count()), max(r-full.Count(), 0)}
	case r > whole:
		steps, counts = []cpuBits{part, small.Or(full)}, []int{r - whole, whole}
	case tree.threads == 2 && small.Count() > 0:
		// r = 2a + b: b single-thread cores, as few as the parity and
		// the two-thread cores allow.
		b := max(r-full.Count(), r%2)
		steps, counts = []cpuBits{small, full}, []int{b, r - b}
	case r%tree.threads != 0 && part.Count() > 0:
		k := min(r%tree.threads, part.Count())
		steps, counts = []cpuBits{part, small.Or(full)}, []int{k, r - k}
	default:
		steps, counts = []cpuBits{small.Or(full)}, []int{r}
	}
	picked := a.topo.newBits()
	for i, from := range steps {
		if counts[i] == 0 {
			continue
		}
		p := newPicker(tree, from, held.Or(picked), a.mode)
		p.take(counts[i])
		picked = picked.Or(p.takenBits(len(avail)))
	}
	return picked
}
