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
	for i := range tree.units {
		children := tree.units[i].children
		sort.Slice(children, func(a, b int) bool { return tree.units[children[a]].id < tree.units[children[b]].id })
		if tree.units[i].level == levelCore && tree.units[i].size != tree.threads {
			tree.complete = false
		}
	}
	return tree
}
