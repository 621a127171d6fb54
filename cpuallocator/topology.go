package cpuallocator

import (
	"fmt"
	"math/bits"
	"sort"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// Topology is the CPU topology of a machine. It is immutable once built and
// safe for concurrent use.
type Topology struct {
	// cpus are the online CPUs ordered by id.
	cpus []CPUInfo
	// index maps a CPU id to its position in cpus, -1 when absent.
	index []int32
	// nodeOf maps a CPU id to its NUMA node (meaningless when absent).
	nodeOf []int8
	all    cpuset.CPUSet
	// isolated are the CPUs of all marked Isolated.
	isolated cpuset.CPUSet
	// allBits is all as a bitmap; every cpuBits of this topology has its
	// length.
	allBits  cpuBits
	nodes    []int
	sockets  []int
	nodeCPUs map[int]cpuset.CPUSet
	nodeBits map[int]cpuBits
	// nodeSocket is the socket of each node's lowest CPU (a node spanning
	// sockets is rare and then counts for its first socket).
	nodeSocket map[int]int
	coreCPUs   map[int][]int
	distances  map[int]map[int]int
	// threads is the SMT level.
	threads int
}

// NewTopology builds a topology from explicit CPU descriptions (used by the
// simulator and tests). distances[i][j] is the distance from NUMA node i to
// node j; nil means 10 on the diagonal and 20 elsewhere.
func NewTopology(cpus []CPUInfo, distances map[int]map[int]int) (*Topology, error) {
	if len(cpus) == 0 {
		return nil, fmt.Errorf("topology has no CPUs")
	}
	t := &Topology{
		cpus:       append([]CPUInfo(nil), cpus...),
		nodeCPUs:   map[int]cpuset.CPUSet{},
		nodeBits:   map[int]cpuBits{},
		nodeSocket: map[int]int{},
		coreCPUs:   map[int][]int{},
		distances:  map[int]map[int]int{},
	}
	sort.Slice(t.cpus, func(i, j int) bool { return t.cpus[i].ID < t.cpus[j].ID })
	if t.cpus[0].ID < 0 {
		return nil, fmt.Errorf("cpu %d: negative CPU id", t.cpus[0].ID)
	}
	maxID := t.cpus[len(t.cpus)-1].ID
	t.index = make([]int32, maxID+1)
	for i := range t.index {
		t.index[i] = -1
	}
	t.nodeOf = make([]int8, maxID+1)
	t.allBits = cpumask.New(maxID)
	coreOf := map[int]CPUInfo{}
	nodeIDs := map[int][]int{}
	socketSet := map[int]bool{}
	var isolated []int
	for i, c := range t.cpus {
		if t.index[c.ID] >= 0 {
			return nil, fmt.Errorf("cpu %d is described twice", c.ID)
		}
		if c.NUMANode < 0 || c.NUMANode >= maxNUMANodes {
			return nil, fmt.Errorf("cpu %d: NUMA node %d is out of range 0-%d", c.ID, c.NUMANode, maxNUMANodes-1)
		}
		if c.Socket < 0 || c.Core < 0 || c.Die < 0 || c.UncoreCache < 0 {
			return nil, fmt.Errorf("cpu %d: negative id in %+v", c.ID, c)
		}
		if first, ok := coreOf[c.Core]; !ok {
			coreOf[c.Core] = c
		} else if first.Socket != c.Socket || first.Die != c.Die || first.NUMANode != c.NUMANode || first.UncoreCache != c.UncoreCache {
			return nil, fmt.Errorf("cpus %d and %d share core %d but not its socket, die, NUMA node and uncore cache (%+v, %+v)", first.ID, c.ID, c.Core, first, c)
		}
		t.index[c.ID] = int32(i)
		t.nodeOf[c.ID] = int8(c.NUMANode)
		t.allBits.Add(c.ID)
		if c.Isolated {
			isolated = append(isolated, c.ID)
		}
		t.coreCPUs[c.Core] = append(t.coreCPUs[c.Core], c.ID)
		nodeIDs[c.NUMANode] = append(nodeIDs[c.NUMANode], c.ID)
		if _, ok := t.nodeSocket[c.NUMANode]; !ok {
			t.nodeSocket[c.NUMANode] = c.Socket
		}
		socketSet[c.Socket] = true
		if n := len(t.coreCPUs[c.Core]); n > t.threads {
			t.threads = n
		}
	}
	t.all = cpuset.New(t.allBits.IDs()...)
	t.isolated = cpuset.New(isolated...)
	for node, ids := range nodeIDs {
		t.nodes = append(t.nodes, node)
		t.nodeCPUs[node] = cpuset.New(ids...)
		b := cpumask.New(maxID)
		for _, id := range ids {
			b.Add(id)
		}
		t.nodeBits[node] = b
	}
	sort.Ints(t.nodes)
	for s := range socketSet {
		t.sockets = append(t.sockets, s)
	}
	sort.Ints(t.sockets)
	for _, a := range t.nodes {
		t.distances[a] = map[int]int{}
		for _, b := range t.nodes {
			switch d, ok := distances[a][b]; {
			case distances == nil && a == b:
				t.distances[a][b] = 10
			case distances == nil:
				t.distances[a][b] = 20
			case !ok:
				return nil, fmt.Errorf("no distance from NUMA node %d to node %d", a, b)
			case d <= 0:
				return nil, fmt.Errorf("distance from NUMA node %d to node %d is %d, want a positive number", a, b, d)
			default:
				t.distances[a][b] = d
			}
		}
	}
	return t, nil
}

// CPUs returns the online CPUs, isolated ones included.
func (t *Topology) CPUs() cpuset.CPUSet { return t.all }

// Isolated returns the online CPUs the kernel isolates (isolcpus).
func (t *Topology) Isolated() cpuset.CPUSet { return t.isolated }

// CPU returns the description of one CPU.
func (t *Topology) CPU(id int) (CPUInfo, bool) {
	if id < 0 || id >= len(t.index) || t.index[id] < 0 {
		return CPUInfo{}, false
	}
	return t.cpus[t.index[id]], true
}

// NUMANodes returns the NUMA node ids, ascending.
func (t *Topology) NUMANodes() []int { return append([]int(nil), t.nodes...) }

// Sockets returns the socket ids, ascending.
func (t *Topology) Sockets() []int { return append([]int(nil), t.sockets...) }

// ThreadsPerCore returns the SMT level (the largest number of online
// threads of any core).
func (t *Topology) ThreadsPerCore() int { return t.threads }

// CPUsInNUMANodes returns the CPUs of the nodes in mask.
func (t *Topology) CPUsInNUMANodes(mask NodeMask) cpuset.CPUSet {
	var sets []cpuset.CPUSet
	for _, n := range mask.Nodes() {
		if s, ok := t.nodeCPUs[n]; ok {
			sets = append(sets, s)
		}
	}
	return cpuset.New().Union(sets...)
}

// MaskInNUMANodes returns the CPUs of the NUMA nodes in mask as a bitmap:
// CPUsInNUMANodes without building a set (the nodes' bitmaps are made
// once, with the topology).
func (t *Topology) MaskInNUMANodes(mask NodeMask) cpumask.Mask { return t.bitsInNodes(mask) }

// NUMANodesOf returns the NUMA nodes that the given CPUs belong to.
func (t *Topology) NUMANodesOf(cpus cpuset.CPUSet) NodeMask {
	var m NodeMask
	for _, id := range cpus.UnsortedList() {
		if c, ok := t.CPU(id); ok {
			m |= 1 << uint(c.NUMANode)
		}
	}
	return m
}

// CoreSiblings returns the CPUs of the core that cpu belongs to (cpu
// included).
func (t *Topology) CoreSiblings(cpu int) cpuset.CPUSet {
	c, ok := t.CPU(cpu)
	if !ok {
		return cpuset.New()
	}
	return cpuset.New(t.coreCPUs[c.Core]...)
}

// Distance returns the NUMA distance from node a to node b, or 0 when
// either is not a NUMA node of the topology.
func (t *Topology) Distance(a, b int) int { return t.distances[a][b] }

// String describes the topology for humans (the `topology` subcommand).
func (t *Topology) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d CPUs (%s), %d sockets, %d NUMA nodes, %d cores, %d threads per core\n",
		len(t.cpus), t.all, len(t.sockets), len(t.nodes), len(t.coreCPUs), t.threads)
	group := func(key func(CPUInfo) int) (ids []int, members map[int][]int) {
		members = map[int][]int{}
		for _, c := range t.cpus {
			k := key(c)
			if _, ok := members[k]; !ok {
				ids = append(ids, k)
			}
			members[k] = append(members[k], c.ID)
		}
		sort.Ints(ids)
		return ids, members
	}
	sockets, socketCPUs := group(func(c CPUInfo) int { return c.Socket })
	for _, s := range sockets {
		fmt.Fprintf(&b, "socket %d: CPUs %s\n", s, cpuset.New(socketCPUs[s]...))
	}
	dies, dieCPUs := group(func(c CPUInfo) int { return c.Die })
	for _, d := range dies {
		fmt.Fprintf(&b, "die %d: CPUs %s\n", d, cpuset.New(dieCPUs[d]...))
	}
	for _, n := range t.nodes {
		dist := make([]string, len(t.nodes))
		for i, m := range t.nodes {
			dist[i] = fmt.Sprint(t.distances[n][m])
		}
		fmt.Fprintf(&b, "NUMA node %d: CPUs %s, distances %s\n", n, t.nodeCPUs[n], strings.Join(dist, " "))
	}
	caches, cacheCPUs := group(func(c CPUInfo) int { return c.UncoreCache })
	for _, u := range caches {
		fmt.Fprintf(&b, "uncore cache %d: CPUs %s\n", u, cpuset.New(cacheCPUs[u]...))
	}
	isolated := "none"
	if !t.isolated.IsEmpty() {
		isolated = t.isolated.String()
	}
	fmt.Fprintf(&b, "isolated CPUs (isolcpus): %s\n", isolated)
	return b.String()
}

// newBits returns an empty bitmap sized for this topology.
func (t *Topology) newBits() cpuBits { return make(cpuBits, len(t.allBits)) }

// bitsOf converts s to a bitmap and returns the CPUs of s that are not in
// the topology.
func (t *Topology) bitsOf(s cpuset.CPUSet) (cpuBits, []int) {
	b := t.newBits()
	var unknown []int
	for _, id := range s.UnsortedList() {
		if id < 0 || id >= len(t.index) || t.index[id] < 0 {
			unknown = append(unknown, id)
			continue
		}
		b.Add(id)
	}
	return b, unknown
}

// bitsOfMask is bitsOf for a mask: a copy of m sized for this topology,
// and the CPUs of m that are not in the topology.
func (t *Topology) bitsOfMask(m cpumask.Mask) (cpuBits, []int) {
	b := t.newBits()
	copy(b, m)
	var unknown []int
	for i, w := range m {
		extra := w
		if i < len(t.allBits) {
			extra &^= t.allBits[i]
			b[i] &^= extra
		}
		for ; extra != 0; extra &= extra - 1 {
			unknown = append(unknown, i*64+bits.TrailingZeros64(extra))
		}
	}
	return b, unknown
}

// nodesOfBits returns the NUMA nodes of the CPUs in b.
func (t *Topology) nodesOfBits(b cpuBits) NodeMask {
	var m NodeMask
	for _, n := range t.nodes {
		if b.Intersects(t.nodeBits[n]) {
			m |= 1 << uint(n)
		}
	}
	return m
}

// bitsInNodes returns the CPUs of the nodes in mask as a bitmap.
func (t *Topology) bitsInNodes(mask NodeMask) cpuBits {
	b := t.newBits()
	for _, n := range mask.Nodes() {
		if nb, ok := t.nodeBits[n]; ok {
			for i := range b {
				b[i] |= nb[i]
			}
		}
	}
	return b
}

// socketsOf returns the number of distinct sockets of the nodes in mask.
func (t *Topology) socketsOf(mask NodeMask) int {
	seen := map[int]bool{}
	for _, n := range mask.Nodes() {
		if s, ok := t.nodeSocket[n]; ok {
			seen[s] = true
		}
	}
	return len(seen)
}

// knownNodes returns the mask of the topology's NUMA nodes.
func (t *Topology) knownNodes() NodeMask { return newNodeMask(t.nodes...) }

// socketNodes widens mask to every NUMA node of the sockets its nodes are
// on (align-by-socket).
func (t *Topology) socketNodes(mask NodeMask) NodeMask {
	sockets := map[int]bool{}
	for _, n := range mask.Nodes() {
		if s, ok := t.nodeSocket[n]; ok {
			sockets[s] = true
		}
	}
	out := mask
	for _, n := range t.nodes {
		if sockets[t.nodeSocket[n]] {
			out |= 1 << uint(n)
		}
	}
	return out
}

// pairDistance returns the sum of the distances between every ordered pair
// of distinct nodes of mask.
func (t *Topology) pairDistance(mask NodeMask) int {
	nodes := mask.Nodes()
	sum := 0
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				sum += t.distances[a][b]
			}
		}
	}
	return sum
}
