package cpuallocator

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// Preferred CPUs (isolatedCPUs: exclusive) are taken before any other,
// never at the price of a topology rule or measure: the plain placement
// comes first; the same placement over the preferred CPUs alone replaces it
// when no worse on any measure (noWorse); otherwise its per-node (and
// per-uncore-cache) counts are refilled preferred first. Under
// full-pcpus-only cores are taken in tiers (preferred threads only, mixed,
// none). docs/design.md (isolated CPUs) has the full rule.

// Preferring returns a copy of a that takes the CPUs of preferred before
// any other, as far as the topology rules allow (see prefer.go). An empty
// set gives an allocator without preference. Every preferred CPU must be
// a CPU of the topology.
func (a *Allocator) Preferring(preferred cpuset.CPUSet) (*Allocator, error) {
	bits, unknown := a.topo.bitsOf(preferred)
	if len(unknown) > 0 {
		return nil, fmt.Errorf("preferred CPUs %s are not online CPUs of this machine: %w", cpuset.New(unknown...), ErrInvalidRequest)
	}
	c := *a
	c.prefer = nil
	if !bits.IsEmpty() {
		c.prefer = bits
	}
	return &c, nil
}

// Preferred returns the CPUs the allocator takes first (empty without
// preference).
func (a *Allocator) Preferred() cpuset.CPUSet {
	if a.prefer == nil {
		return cpuset.New()
	}
	return a.prefer.CPUSet()
}

// placePreferred is placeUsable taking the preferred CPUs first (steps 1-3
// above).
func (a *Allocator) placePreferred(avail, usable, held cpuBits, need int, stages []NodeMask, fresh bool) (cpuBits, error) {
	plain, err := a.placeUsable(avail, usable, held, need, stages, fresh)
	if err != nil || a.prefer == nil || plain.AndNot(a.prefer).IsEmpty() || !usable.Intersects(a.prefer) {
		return plain, err
	}
	prefAvail := avail.And(a.prefer)
	if prefUsable := a.usable(prefAvail, held); prefUsable.Count() >= need {
		only, err := a.placeUsable(prefAvail, prefUsable, held, need, stages, fresh)
		if err == nil && a.noWorse(only, plain, held, stages) && (!fresh || a.splitsNoMore(only, plain, held)) {
			return only, nil
		}
	}
	if refilled, ok := a.refill(a.packTree, plain, usable, held); ok && (!fresh || a.splitsNoMore(refilled, plain, held)) {
		return refilled, nil
	}
	return plain, nil
}

// splitsNoMore reports whether placement x (with held) costs no more on
// cores than y (fewest.go's shape): a new container's preference never
// costs a split core.
func (a *Allocator) splitsNoMore(x, y, held cpuBits) bool {
	return a.shapeOf(a.packTree, held, x)[2] <= a.shapeOf(a.packTree, held, y)[2]
}

// keepPreferred chooses the keep CPUs of cands a shrink keeps besides
// held (the baseline CPUs), preferred ones first; plain is the choice
// without preference.
func (a *Allocator) keepPreferred(plain, cands, held cpuBits, keep int) cpuBits {
	if a.prefer == nil || plain.AndNot(a.prefer).IsEmpty() || !cands.Intersects(a.prefer) {
		return plain
	}
	if first := a.tieredPack(a.shrinkTree, cands, held, keep); first.Count() == keep && a.noWorse(first, plain, held, nil) {
		return first
	}
	if refilled, ok := a.refill(a.shrinkTree, plain, cands, held); ok {
		return refilled
	}
	return plain
}

// noWorse reports whether placement x (with held) is at least as good as
// placement y on every topology measure the options care about.
func (a *Allocator) noWorse(x, y, held cpuBits, stages []NodeMask) bool {
	xs, ys := x.Or(held), y.Or(held)
	xn, yn := a.topo.nodesOfBits(xs), a.topo.nodesOfBits(ys)
	if xn.Count() > yn.Count() || a.topo.socketsOf(xn) > a.topo.socketsOf(yn) {
		return false
	}
	for _, stage := range stages {
		if yn.IsSubsetOf(stage) && !xn.IsSubsetOf(stage) {
			return false
		}
	}
	if a.opts.DistributeCPUsAcrossNUMA && largest(a.topo.countPerNode(xs)) > largest(a.topo.countPerNode(ys)) {
		return false
	}
	if a.opts.DistributeCPUsAcrossCores && a.distinct(xs, func(c CPUInfo) int { return c.Core }) < a.distinct(ys, func(c CPUInfo) int { return c.Core }) {
		return false
	}
	if a.opts.PreferAlignByUncoreCache && a.distinct(xs, uncoreOf) > a.distinct(ys, uncoreOf) {
		return false
	}
	return true
}

func uncoreOf(c CPUInfo) int { return c.UncoreCache }

func largest(c nodeCounts) int {
	m := 0
	for _, v := range c {
		m = max(m, v)
	}
	return m
}

// distinct counts the distinct values of key over the CPUs of b.
func (a *Allocator) distinct(b cpuBits, key func(CPUInfo) int) int {
	seen := map[int]bool{}
	for id := range b.All() {
		seen[key(a.topo.cpus[a.topo.index[id]])] = true
	}
	return len(seen)
}

// refill takes, in each cell of plain (its NUMA nodes, split by uncore
// cache under prefer-align-cpus-by-uncorecache), as many CPUs of cands as
// plain does, preferred ones first. It reports false when a cell falls
// short (whole cores that do not add up): the caller keeps plain.
func (a *Allocator) refill(tree *unitTree, plain, cands, held cpuBits) (cpuBits, bool) {
	picked := a.topo.newBits()
	for _, cell := range a.cells(plain) {
		want := plain.And(cell).Count()
		got := a.tieredPack(tree, cands.And(cell), held.Or(picked), want)
		if got.Count() != want {
			return nil, false
		}
		picked = picked.Or(got)
	}
	return picked, true
}

// cells splits the CPUs of the topology that b touches into the groups
// refill keeps counts of: NUMA nodes, or NUMA node and uncore cache under
// prefer-align-cpus-by-uncorecache. Cells are unions of whole cores.
func (a *Allocator) cells(b cpuBits) []cpuBits {
	type key struct{ node, cache int }
	index := map[key]int{}
	var cells []cpuBits
	keyOf := func(c CPUInfo) key {
		if a.opts.PreferAlignByUncoreCache {
			return key{c.NUMANode, c.UncoreCache}
		}
		return key{c.NUMANode, -1}
	}
	touched := map[key]bool{}
	for id := range b.All() {
		touched[keyOf(a.topo.cpus[a.topo.index[id]])] = true
	}
	for _, c := range a.topo.cpus {
		k := keyOf(c)
		if !touched[k] {
			continue
		}
		i, ok := index[k]
		if !ok {
			i = len(cells)
			index[k] = i
			cells = append(cells, a.topo.newBits())
		}
		cells[i].Add(c.ID)
	}
	return cells
}

// tieredPack takes want CPUs of avail for a container holding held in the
// packed order of tree, tier by tier (see tiers): each tier gives the most
// it can while the later tiers can still make up the rest.
// avail must hold only CPUs of cores entirely in avail ∪ held.
func (a *Allocator) tieredPack(tree *unitTree, avail, held cpuBits, want int) cpuBits {
	tiers := a.tiers(avail)
	got := a.topo.newBits()
	for i, tier := range tiers {
		left := want - got.Count()
		if left <= 0 {
			break
		}
		p := newPicker(tree, tier, held.Or(got), a.mode)
		if i < len(tiers)-1 {
			later := a.topo.newBits()
			for _, t := range tiers[i+1:] {
				later = later.Or(t)
			}
			p.take(p.share(left, leftFor(later, left)))
		} else {
			p.take(left)
		}
		got = got.Or(p.takenBits(len(avail)))
	}
	return got
}

// tiers splits avail by what taking a CPU costs the other CPUs: the
// preferred CPUs, then the others; under full-pcpus-only, where a core's
// CPUs in avail are taken together, the cores by how many non-preferred
// CPUs they have in avail, fewest first. Empty tiers are left out.
func (a *Allocator) tiers(avail cpuBits) []cpuBits {
	if !a.opts.FullPCPUsOnly {
		return nonEmpty(avail.And(a.prefer), avail.AndNot(a.prefer))
	}
	byCost := make([]cpuBits, a.topo.threads+1)
	for id := range avail.All() {
		cost := 0
		for _, sibling := range a.plainTree.coreCPUs(id) {
			if avail.Has(sibling) && !a.prefer.Has(sibling) {
				cost++
			}
		}
		if byCost[cost] == nil {
			byCost[cost] = a.topo.newBits()
		}
		byCost[cost].Add(id)
	}
	return nonEmpty(byCost...)
}

func nonEmpty(sets ...cpuBits) []cpuBits {
	var out []cpuBits
	for _, s := range sets {
		if s != nil && !s.IsEmpty() {
			out = append(out, s)
		}
	}
	return out
}
