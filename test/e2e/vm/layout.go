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
	// NodeDisks attaches a small disk to each NUMA node: a virtio block
	// device behind a PCI expander bridge of the node (QEMU's pxb with
	// numa_node, which the firmware's ACPI tables give a proximity
	// domain), so that its PCI function's numa_node in sysfs is the node,
	// as a NIC's or a GPU's is on a two-socket server. Its serial is
	// NodeDiskSerial(n); it reads zeroes and stores nothing.
	NodeDisks bool
}

// NodeDiskSerial is the serial number of the disk of NUMA node n (see
// Layout.NodeDisks), as the guest reads it in /sys/block/*/serial.
func NodeDiskSerial(n int) string { return fmt.Sprintf("numa-node-%d", n) }

// nodeDiskBus is the PCI bus number of node n's expander bridge: apart
// from the main bus (0) and from each other, with room for bridges
// behind them.
func nodeDiskBus(n int) int { return 32 * (n + 1) }

// Production is the layout of the suite: 16 vCPUs, 2 sockets, SMT 2, 2
// NUMA nodes, 4 GiB, a disk on each NUMA node.
var Production = Layout{Sockets: 2, CoresPerSocket: 4, ThreadsPerCore: 2, MemoryMiB: 4096, CPUModel: "Skylake-Server", NodeDisks: true}

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
	if l.NodeDisks {
		for n := range l.Sockets {
			args = append(args,
				"-blockdev", fmt.Sprintf("driver=null-co,node-name=disk%d,size=%d,read-zeroes=on", n, 1<<20),
				"-device", fmt.Sprintf("pxb,id=pxb%d,bus=pci.0,bus_nr=%d,numa_node=%d", n, nodeDiskBus(n), n),
				"-device", fmt.Sprintf("virtio-blk-pci,drive=disk%d,bus=pxb%d,serial=%s", n, n, NodeDiskSerial(n)))
		}
	}
	return args
}
