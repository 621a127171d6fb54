package devices_test

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/devices"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// BenchmarkLocate locates the devices of one container, as the plugin
// would once at its creation: a NIC VF's RDMA device, an NVMe partition, a
// VFIO group of two functions and a GPU render node, on a tree on disk.
// It is about 110 system calls (strace -c): 50 stat, 6 readlink, 5
// numa_node files read and one directory listed (opened, read, closed).
func BenchmarkLocate(b *testing.B) {
	fixture := fakesysfs.TwoNodeDevices()
	root := writeTree(b, b.TempDir(), fixture)
	var devs []devices.Device
	for _, p := range []string{"/dev/infiniband/uverbs0", "/dev/nvme0n1p1", "/dev/vfio/41", "/dev/dri/renderD128"} {
		devs = append(devs, node(b, fixture, p))
	}
	want := cpuallocator.NewNodeMask(0, 1)
	for b.Loop() {
		l, err := devices.Locate(root, devs)
		if err != nil || l.Nodes != want {
			b.Fatalf("Locate = %q, %v", l.Nodes, err)
		}
	}
}
