package placement

import (
	"fmt"
	"sort"

	"github.com/go-logr/logr"
	cadvisorapi "github.com/google/cadvisor/info/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// Machine is one fixture machine with the topology each side sees.
type Machine struct {
	Name    string
	Ours    *cpuallocator.Topology
	Kubelet *topology.CPUTopology
	// Info is the machine as cadvisor reports it to the kubelet (its
	// topology manager reads the NUMA nodes from it).
	Info *cadvisorapi.MachineInfo
	// place holds, per online CPU, where Shape counts it.
	place map[int]place
	// coreSize is the number of online CPUs of each core.
	coreSize map[coreKey]int
}

type coreKey struct{ socket, core int }

type place struct {
	core coreKey
	node int
}

// MachineSpec names a fixture: a generated regular machine or a
// hand-written layout of a real one.
type MachineSpec struct {
	Name   string
	Spec   fakesysfs.Spec
	Layout string
}

// NewMachine builds both topologies of a fixture.
func NewMachine(ms MachineSpec) (*Machine, error) {
	var (
		m   fakesysfs.Machine
		err error
	)
	if ms.Layout != "" {
		m, err = fakesysfs.Layout(ms.Layout)
	} else {
		m, err = ms.Spec.Machine()
	}
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", ms.Name, err)
	}
	fsys, err := fakesysfs.FS(m)
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", ms.Name, err)
	}
	ours, err := cpuallocator.DiscoverFS(fsys)
	if err != nil {
		return nil, fmt.Errorf("machine %s: discovering the sysfs tree: %w", ms.Name, err)
	}
	info := cadvisorMachineInfo(m)
	kube, err := topology.Discover(logr.Discard(), info)
	if err != nil {
		return nil, fmt.Errorf("machine %s: kubelet topology: %w", ms.Name, err)
	}
	if !kube.CPUDetails.CPUs().Equals(ours.CPUs()) {
		return nil, fmt.Errorf("machine %s: the kubelet sees CPUs %s, the plugin %s", ms.Name, kube.CPUDetails.CPUs(), ours.CPUs())
	}
	mach := &Machine{Name: ms.Name, Ours: ours, Kubelet: kube, Info: info, place: map[int]place{}, coreSize: map[coreKey]int{}}
	for _, c := range online(m) {
		k := coreKey{c.Socket, c.Core}
		mach.place[c.ID] = place{core: k, node: c.Node}
		mach.coreSize[k]++
	}
	return mach, nil
}

// online returns the CPUs of m that are online: the CPUs both sides
// manage, isolated ones included (the fixtures used here have none offline
// or isolated).
func online(m fakesysfs.Machine) []fakesysfs.CPU {
	off := cpuset.New(m.Offline...)
	var out []fakesysfs.CPU
	for _, c := range m.CPUs {
		if !off.Contains(c.ID) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// cadvisorMachineInfo describes m as cadvisor's sysinfo.GetNodesInfo
// reports the machine's sysfs tree to the kubelet: per NUMA node its cores
// (grouped by package and core_id, threads in id order), and an L3 cache
// as the core's uncore cache only when it does not span the core's whole
// NUMA node (cadvisor files a cache shared by exactly the node's CPUs as a
// node cache, and the kubelet then aligns by socket instead).
func cadvisorMachineInfo(m fakesysfs.Machine) *cadvisorapi.MachineInfo {
	cpus := online(m)
	l3Size := map[[2]int]int{}
	for _, c := range cpus {
		if c.L3 != fakesysfs.NoL3 {
			l3Size[[2]int{c.Socket, c.L3}]++
		}
	}
	nodeCPUs := map[int]int{}
	type nodeCore struct{ node, socket, core int }
	var order []nodeCore
	threads := map[nodeCore][]int{}
	l3 := map[nodeCore]int{}
	sockets := map[int]bool{}
	for _, c := range cpus {
		k := nodeCore{c.Node, c.Socket, c.Core}
		if _, ok := threads[k]; !ok {
			order = append(order, k)
			l3[k] = c.L3
		}
		threads[k] = append(threads[k], c.ID)
		nodeCPUs[c.Node]++
		sockets[c.Socket] = true
	}
	nodes := map[int]*cadvisorapi.Node{}
	var ids []int
	for _, k := range order {
		n, ok := nodes[k.node]
		if !ok {
			n = &cadvisorapi.Node{Id: k.node}
			nodes[k.node] = n
			ids = append(ids, k.node)
		}
		core := cadvisorapi.Core{Id: k.core, SocketID: k.socket, Threads: threads[k]}
		if id := l3[k]; id != fakesysfs.NoL3 && l3Size[[2]int{k.socket, id}] != nodeCPUs[k.node] {
			core.UncoreCaches = []cadvisorapi.Cache{{Id: id, Level: 3, Type: "Unified"}}
		}
		n.Cores = append(n.Cores, core)
	}
	sort.Ints(ids)
	info := &cadvisorapi.MachineInfo{NumCores: len(cpus), NumSockets: len(sockets)}
	for _, id := range ids {
		info.Topology = append(info.Topology, *nodes[id])
	}
	return info
}

// NodesOf returns the NUMA nodes of cpus on the fixture machine.
func (m *Machine) NodesOf(cpus cpuset.CPUSet) cpuallocator.NodeMask {
	var nodes []int
	for _, id := range cpus.UnsortedList() {
		nodes = append(nodes, m.place[id].node)
	}
	return cpuallocator.NewNodeMask(nodes...)
}

// Shape is what the placement rule compares of a pick.
type Shape struct {
	// SplitCores counts the cores the pick uses only in part: it shares
	// them with another container or leaves their other CPUs free. Under
	// distribute-cpus-across-cores, whose point is to use cores in part,
	// it counts instead the CPUs beyond the first of a core in the pick
	// (threads stacked on a core).
	SplitCores int
	NUMANodes  int
	Sockets    int
}

func (s Shape) String() string {
	return fmt.Sprintf("%d split cores, %d NUMA nodes, %d sockets", s.SplitCores, s.NUMANodes, s.Sockets)
}

// WorseThan reports whether s is no better than o on any count and worse
// on one: the picks the placement rule forbids.
func (s Shape) WorseThan(o Shape) bool {
	return s != o && s.SplitCores >= o.SplitCores && s.NUMANodes >= o.NUMANodes && s.Sockets >= o.Sockets
}

// ShapeOf measures a pick on the fixture machine, independently of either
// side's topology model, as the rule compares picks under the static
// policy option.
func (m *Machine) ShapeOf(cpus cpuset.CPUSet, option string) Shape {
	used := map[coreKey]int{}
	nodes, sockets := map[int]bool{}, map[int]bool{}
	for _, id := range cpus.UnsortedList() {
		p := m.place[id]
		used[p.core]++
		nodes[p.node] = true
		sockets[p.core.socket] = true
	}
	s := Shape{NUMANodes: len(nodes), Sockets: len(sockets)}
	if option == "distribute-cpus-across-cores" {
		s.SplitCores = cpus.Size() - len(used)
		return s
	}
	for k, n := range used {
		if n < m.coreSize[k] {
			s.SplitCores++
		}
	}
	return s
}
