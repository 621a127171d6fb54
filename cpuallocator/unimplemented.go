package cpuallocator

// Placeholders so that the API compiles before the implementation lands.
// The implementation replaces this file.

import "k8s.io/utils/cpuset"

type topologyImpl struct{}
type allocatorImpl struct{}

func newNodeMask(nodes ...int) NodeMask {
	var m NodeMask
	for _, n := range nodes {
		m |= 1 << uint(n)
	}
	return m
}
func (o StaticPolicyOptions) validate() error                       { panic("unimplemented") }
func discover(string) (*Topology, error)                            { panic("unimplemented") }
func newTopology([]CPUInfo, map[int]map[int]int) (*Topology, error) { panic("unimplemented") }
func (topologyImpl) cpus() cpuset.CPUSet                            { panic("unimplemented") }
func (topologyImpl) cpu(int) (CPUInfo, bool)                        { panic("unimplemented") }
func (topologyImpl) numaNodes() []int                               { panic("unimplemented") }
func (topologyImpl) sockets() []int                                 { panic("unimplemented") }
func (topologyImpl) threadsPerCore() int                            { panic("unimplemented") }
func (topologyImpl) cpusInNUMANodes(NodeMask) cpuset.CPUSet         { panic("unimplemented") }
func (topologyImpl) numaNodesOf(cpuset.CPUSet) NodeMask             { panic("unimplemented") }
func (topologyImpl) coreSiblings(int) cpuset.CPUSet                 { panic("unimplemented") }
func (topologyImpl) distance(int, int) int                          { panic("unimplemented") }
func (topologyImpl) String() string                                 { panic("unimplemented") }
func newAllocator(*Topology, StaticPolicyOptions, TopologyOptions) (*Allocator, error) {
	panic("unimplemented")
}
func (*Allocator) allocate(cpuset.CPUSet, int, NodeMask) (cpuset.CPUSet, error) {
	panic("unimplemented")
}
func (*Allocator) grow(cpuset.CPUSet, cpuset.CPUSet, int, NodeMask) (cpuset.CPUSet, error) {
	panic("unimplemented")
}
func (*Allocator) shrink(cpuset.CPUSet, cpuset.CPUSet, int) (cpuset.CPUSet, error) {
	panic("unimplemented")
}
func (*Allocator) numaHints(cpuset.CPUSet, cpuset.CPUSet, int) []NUMAHint { panic("unimplemented") }
func (*Allocator) reservedCPUs(int) (cpuset.CPUSet, error)                { panic("unimplemented") }
