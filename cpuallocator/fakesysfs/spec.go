package fakesysfs

import (
	"fmt"
)

// Numbering is how Linux numbers the SMT siblings of a core.
type Numbering int

const (
	// SiblingsAdjacent numbers the threads of core k as k·T … k·T+T-1
	// (T threads per core): core 0 = {0,1}, core 1 = {2,3}, ...
	SiblingsAdjacent Numbering = iota
	// SiblingsOffset numbers thread t of core k as t·C+k (C cores in the
	// machine): core 0 = {0,C}, core 1 = {1,C+1}, ... as on most x86
	// servers.
	SiblingsOffset
)

// Spec describes a regular machine: Sockets × NUMAPerSocket NUMA nodes,
// each with CoresPerNUMA cores of ThreadsPerCore threads. Zero counts other
// than Sockets and CoresPerNUMA mean 1.
type Spec struct {
	Sockets        int
	DiesPerSocket  int
	NUMAPerSocket  int
	CoresPerNUMA   int
	ThreadsPerCore int
	// L3PerNUMA splits each NUMA node's cores into this many L3 groups of
	// consecutive cores.
	L3PerNUMA int
	// NoL3 leaves every CPU without an L3 cache.
	NoL3      bool
	Numbering Numbering
	// Offline and Isolated are CPU ids.
	Offline  []int
	Isolated []int
	// Distances overrides the default NUMA distances: 10 local, 11 between
	// nodes of one socket, 21 between sockets.
	Distances [][]int
	Quirks    Quirks
}

func orOne(n int) int {
	if n == 0 {
		return 1
	}
	return n
}

// NumCPUs returns the number of present CPUs of the machine.
func (s Spec) NumCPUs() int {
	return s.Sockets * orOne(s.NUMAPerSocket) * s.CoresPerNUMA * orOne(s.ThreadsPerCore)
}

// Machine expands the spec into a machine description.
//
// Cores are numbered socket by socket, NUMA node by NUMA node. Dies split a
// socket's cores into equal consecutive runs, as do L3 groups within a NUMA
// node. core_id and die_id restart at 0 in every package, as on Linux.
func (s Spec) Machine() (Machine, error) {
	dies, numa, threads, l3 := orOne(s.DiesPerSocket), orOne(s.NUMAPerSocket), orOne(s.ThreadsPerCore), orOne(s.L3PerNUMA)
	switch {
	case s.Sockets <= 0 || s.CoresPerNUMA <= 0:
		return Machine{}, fmt.Errorf("spec needs positive Sockets and CoresPerNUMA, got %d and %d", s.Sockets, s.CoresPerNUMA)
	case dies < 0 || numa < 0 || threads < 0 || l3 < 0:
		return Machine{}, fmt.Errorf("spec has a negative count: %+v", s)
	case dies > numa*s.CoresPerNUMA:
		return Machine{}, fmt.Errorf("spec has %d dies per socket but only %d cores per socket", dies, numa*s.CoresPerNUMA)
	case l3 > s.CoresPerNUMA:
		return Machine{}, fmt.Errorf("spec has %d L3 groups per NUMA node but only %d cores per node", l3, s.CoresPerNUMA)
	}
	coresPerSocket := numa * s.CoresPerNUMA
	totalCores := s.Sockets * coresPerSocket
	m := Machine{
		CPUs:      make([]CPU, 0, totalCores*threads),
		Offline:   s.Offline,
		Isolated:  s.Isolated,
		Distances: s.Distances,
		Quirks:    s.Quirks,
	}
	for core := 0; core < totalCores; core++ {
		socket := core / coresPerSocket
		inSocket := core % coresPerSocket
		node := core / s.CoresPerNUMA
		inNode := core % s.CoresPerNUMA
		cache := node*l3 + inNode*l3/s.CoresPerNUMA
		if s.NoL3 {
			cache = NoL3
		}
		for t := 0; t < threads; t++ {
			id := core*threads + t
			if s.Numbering == SiblingsOffset {
				id = t*totalCores + core
			}
			m.CPUs = append(m.CPUs, CPU{
				ID:     id,
				Socket: socket,
				Die:    inSocket * dies / coresPerSocket,
				Core:   inSocket,
				Node:   node,
				L3:     cache,
			})
		}
	}
	if m.Distances == nil {
		m.Distances = defaultDistances(s.Sockets, numa)
	}
	return m, m.Validate()
}

// defaultDistances gives 10 on the diagonal, 11 between nodes of one socket
// and 21 between sockets.
func defaultDistances(sockets, numaPerSocket int) [][]int {
	n := sockets * numaPerSocket
	d := make([][]int, n)
	for i := range d {
		d[i] = make([]int, n)
		for j := range d[i] {
			switch {
			case i == j:
				d[i][j] = 10
			case i/numaPerSocket == j/numaPerSocket:
				d[i][j] = 11
			default:
				d[i][j] = 21
			}
		}
	}
	return d
}

// GenerateFS returns the tree of the machine the spec describes as an
// in-memory file system (see FS).
func GenerateFS(spec Spec) (*MemFS, error) {
	m, err := spec.Machine()
	if err != nil {
		return nil, err
	}
	return FS(m)
}

// Generate writes the tree of the machine the spec describes under root.
func Generate(root string, spec Spec) error {
	m, err := spec.Machine()
	if err != nil {
		return err
	}
	return Write(root, m)
}
