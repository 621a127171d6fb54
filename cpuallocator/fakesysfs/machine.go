package fakesysfs

import (
	"fmt"
	"sort"
)

// NoL3 is the L3 value of a CPU without an L3 cache.
const NoL3 = -1

// CPU describes one present logical CPU as sysfs reports it.
type CPU struct {
	// ID is the logical CPU number (cpuN).
	ID int
	// Socket is physical_package_id.
	Socket int
	// Die is die_id, numbered within the package as Linux does.
	Die int
	// Core is core_id, unique within the package (Linux does not promise
	// more).
	Core int
	// Node is the NUMA node whose cpulist holds the CPU.
	Node int
	// L3 is the L3 cache id, or NoL3.
	L3 int
}

// Quirks select the shapes of sysfs that older kernels or unusual
// platforms produce.
type Quirks struct {
	// OmitDieID leaves out topology/die_id (kernels before 5.2).
	OmitDieID bool
	// OmitCacheID leaves out cache/indexK/id, so caches can only be grouped
	// by shared_cpu_list.
	OmitCacheID bool
	// OmitNodeDirs leaves out devices/system/node (kernels without NUMA).
	OmitNodeDirs bool
	// OmitCoreCPUsList leaves out topology/core_cpus_list (kernels before
	// 5.3 only have thread_siblings_list).
	OmitCoreCPUsList bool
	// OmitL1L2 writes only the L3 cache directory (index3), which keeps very
	// large trees quick to write.
	OmitL1L2 bool
}

// Machine is everything Write needs to produce a tree.
type Machine struct {
	// CPUs are the present CPUs, online or not.
	CPUs []CPU
	// Offline are the ids of CPUs that are present but offline.
	Offline []int
	// Isolated are the ids of CPUs listed in devices/system/cpu/isolated.
	Isolated []int
	// Distances[i][j] is the distance from NUMA node i to node j. Nodes are
	// numbered 0..len(Distances)-1. Nil means 10 on the diagonal and 20
	// elsewhere.
	Distances [][]int
	// Quirks select kernel-specific shapes of the tree.
	Quirks Quirks
}

// NumNodes returns the number of NUMA nodes of the machine.
func (m Machine) NumNodes() int {
	n := 0
	for _, c := range m.CPUs {
		if c.Node+1 > n {
			n = c.Node + 1
		}
	}
	if len(m.Distances) > n {
		n = len(m.Distances)
	}
	return n
}

// Validate checks that the machine can be written: unique CPU ids, known
// offline and isolated CPUs, nodes numbered densely from 0 and a square
// distance matrix that covers them.
func (m Machine) Validate() error {
	if len(m.CPUs) == 0 {
		return fmt.Errorf("machine has no CPUs")
	}
	seen := make(map[int]bool, len(m.CPUs))
	nodes := make(map[int]bool)
	for _, c := range m.CPUs {
		if c.ID < 0 || c.Socket < 0 || c.Die < 0 || c.Core < 0 || c.Node < 0 || c.L3 < NoL3 {
			return fmt.Errorf("cpu %d: negative id in %+v", c.ID, c)
		}
		if seen[c.ID] {
			return fmt.Errorf("cpu %d listed twice", c.ID)
		}
		seen[c.ID] = true
		nodes[c.Node] = true
	}
	for _, list := range [][]int{m.Offline, m.Isolated} {
		for _, id := range list {
			if !seen[id] {
				return fmt.Errorf("cpu %d is offline or isolated but not present", id)
			}
		}
	}
	n := m.NumNodes()
	for node := 0; node < n; node++ {
		if !nodes[node] && m.Distances == nil {
			return fmt.Errorf("NUMA node %d has no CPUs (nodes must be numbered densely)", node)
		}
	}
	if m.Distances != nil {
		if len(m.Distances) != n {
			return fmt.Errorf("distance matrix has %d rows for %d NUMA nodes", len(m.Distances), n)
		}
		for i, row := range m.Distances {
			if len(row) != n {
				return fmt.Errorf("distance matrix row %d has %d columns for %d NUMA nodes", i, len(row), n)
			}
		}
	}
	return nil
}

// distance returns the distance from node a to node b.
func (m Machine) distance(a, b int) int {
	if m.Distances != nil {
		return m.Distances[a][b]
	}
	if a == b {
		return 10
	}
	return 20
}

// sortedCPUs returns the CPUs ordered by id.
func (m Machine) sortedCPUs() []CPU {
	cpus := append([]CPU(nil), m.CPUs...)
	sort.Slice(cpus, func(i, j int) bool { return cpus[i].ID < cpus[j].ID })
	return cpus
}
