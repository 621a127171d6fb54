package vm

import (
	"fmt"
	"strconv"
)

// Layout is the guest's CPU and memory topology: one NUMA node per socket,
// the vCPUs numbered core by core with a core's threads adjacent (CPUs
// 2k and 2k+1 are siblings), as QEMU numbers them.
type Layout struct {
	Sockets, CoresPerSocket, ThreadsPerCore int
	// MemoryMiB is the guest's memory, split evenly over the NUMA nodes.
	MemoryMiB int
	// CPUModel is QEMU's -cpu model. It must show SMT siblings to the
	// guest: Skylake-Server does; "max" and "EPYC" do not.
	CPUModel string
}

// Production is the layout of the suite: 16 vCPUs, 2 sockets, SMT 2, 2
// NUMA nodes, 4 GiB.
var Production = Layout{Sockets: 2, CoresPerSocket: 4, ThreadsPerCore: 2, MemoryMiB: 4096, CPUModel: "Skylake-Server"}

// CPUs is the number of vCPUs.
func (l Layout) CPUs() int { return l.Sockets * l.CoresPerSocket * l.ThreadsPerCore }

// cpusPerNode is the number of vCPUs of one NUMA node (one socket).
func (l Layout) cpusPerNode() int { return l.CoresPerSocket * l.ThreadsPerCore }

// qemuArgs returns QEMU's CPU, memory and NUMA arguments for the layout.
func (l Layout) qemuArgs() []string {
	args := []string{
		"-cpu", l.CPUModel,
		"-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,threads=%d", l.CPUs(), l.Sockets, l.CoresPerSocket, l.ThreadsPerCore),
		"-m", strconv.Itoa(l.MemoryMiB) + "M",
	}
	per := l.MemoryMiB / l.Sockets
	for n := range l.Sockets {
		first := n * l.cpusPerNode()
		args = append(args,
			"-object", fmt.Sprintf("memory-backend-ram,id=m%d,size=%dM", n, per),
			"-numa", fmt.Sprintf("node,nodeid=%d,cpus=%d-%d,memdev=m%d", n, first, first+l.cpusPerNode()-1, n))
	}
	return args
}
