package cpuallocator

import "sort"

// level is a layer of the allocation tree.
type level int

const (
	levelMachine level = iota
	levelSocket
	levelNUMA
	levelUncore
	levelCore
)

// unit is a node of the allocation tree: the machine, a socket, a NUMA
// node, an uncore cache group or a core. A unit below the machine is the
// intersection of its group with its parent, so the tree is well formed
// even when groups do not nest (an L3 spanning two SNC nodes, a node
// spanning two sockets).
type unit struct {
	level level
	// depth is the distance from the machine unit (the machine is 0).
	depth int
	// id is the socket, node, uncore cache or core id.
	id int
	// size is the number of CPUs in the unit.
	size     int
	parent   int32
	children []int32
	// cpus are a core's CPU ids, ascending; nil above the core level.
	cpus []int
}

// unitTree is the hierarchy the picker walks. It is built once per
// allocator and never changed.
type unitTree struct {
	units []unit
	// coreOf maps a CPU id to the index of its core unit, -1 if absent.
	coreOf []int32
	// threads is the SMT level: the size of a core with every thread.
	threads int
	// complete is set when no core misses a thread (offline siblings).
	complete bool
	// tops and groups are the units at depth 1 (sockets, or NUMA nodes
	// where a node holds several sockets) and 2 (NUMA nodes of a socket,
	// or sockets of a node); slot is a unit's index in tops or groups, -1
	// at other depths.
	tops, groups []int32
	slot         []int32
	// group maps a unit at depth 2 or below to its depth-2 ancestor, -1
	// above.
	group []int32
}

// packingLevels returns the group levels the packed order fills, largest
// unit first: sockets before NUMA nodes when a socket holds several nodes,
// NUMA nodes before sockets when a node holds several sockets (as the
// kubelet's takeByTopologyNUMAPacked does), then uncore caches if asked.
func packingLevels(t *Topology, withUncore bool) []level {
	levels := []level{levelSocket, levelNUMA}
	if len(t.nodes) < len(t.sockets) {
		levels = []level{levelNUMA, levelSocket}
	}
	if withUncore {
		levels = append(levels, levelUncore)
	}
	return levels
}

func groupID(c CPUInfo, l level) int {
	switch l {
	case levelSocket:
		return c.Socket
	case levelNUMA:
		return c.NUMANode
	case levelUncore:
		return c.UncoreCache
	default:
		return c.Core
	}
}

// coreCPUs returns the CPUs of the core of CPU id, which must be in the
// tree.
func (t *unitTree) coreCPUs(id int) []int { return t.units[t.coreOf[id]].cpus }

func buildTree(t *Topology, levels []level) *unitTree {
	tree := &unitTree{
		units:   []unit{{level: levelMachine, parent: -1}},
		coreOf:  make([]int32, len(t.index)),
		threads: t.threads,
	}
	for i := range tree.coreOf {
		tree.coreOf[i] = -1
	}
	// lookup finds a unit's child by group id while building.
	lookup := map[[2]int]int32{}
	path := append(append([]level(nil), levels...), levelCore)
	for _, c := range t.cpus {
		u := int32(0)
		for _, l := range path {
			tree.units[u].size++
			key := [2]int{int(u), groupID(c, l)}
			child, ok := lookup[key]
			if !ok {
				child = int32(len(tree.units))
				tree.units = append(tree.units, unit{level: l, depth: tree.units[u].depth + 1, id: groupID(c, l), parent: u})
				tree.units[u].children = append(tree.units[u].children, child)
				lookup[key] = child
			}
			u = child
		}
		tree.units[u].size++
		tree.units[u].cpus = append(tree.units[u].cpus, c.ID)
		tree.coreOf[c.ID] = u
	}
	tree.complete = true
	tree.group = make([]int32, len(tree.units))
	tree.slot = make([]int32, len(tree.units))
	for i := range tree.units {
		children := tree.units[i].children
		sort.Slice(children, func(a, b int) bool { return tree.units[children[a]].id < tree.units[children[b]].id })
		u := &tree.units[i]
		tree.slot[i], tree.group[i] = -1, -1
		switch {
		case u.depth == 1:
			tree.slot[i] = int32(len(tree.tops))
			tree.tops = append(tree.tops, int32(i))
		case u.depth == 2:
			tree.slot[i] = int32(len(tree.groups))
			tree.groups = append(tree.groups, int32(i))
			tree.group[i] = int32(i)
		case u.depth > 2:
			tree.group[i] = tree.group[u.parent] // parents come first
		}
		if u.level == levelCore && u.size != tree.threads {
			tree.complete = false
		}
	}
	return tree
}
