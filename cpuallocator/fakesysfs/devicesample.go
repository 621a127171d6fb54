package fakesysfs

// TwoNodeDevices is the device tree of a two-node server with the devices
// that pods pinned next to them use, one of each layout device locality
// must read:
//
//   - node 0 (root bus 0000:00): an NVMe controller 0000:01:00.0 with the
//     disk nvme0n1 (b 259:0) and its partition nvme0n1p1 (b 259:1);
//   - node 1 (root bus 0000:80): a NIC whose virtual function 0000:81:00.2
//     has the RDMA char device uverbs0 (c 231:192); a two-function device
//     0000:82:00.0-1 bound to vfio-pci in IOMMU group 41 (c 243:0,
//     /dev/vfio/41), the first one also as an iommufd VFIO device
//     (c 237:0, /dev/vfio/devices/vfio0); a GPU 0000:83:00.0 with its DRM render node
//     renderD128 (c 226:128);
//   - root bus 0000:40, whose firmware gives no node: an accelerator
//     0000:41:00.0 with numa_node -1 and its char device accel0 (c 261:0);
//   - virtual devices: /dev/null (c 1:3) and the VFIO container
//     /dev/vfio/vfio (c 10:196), with no numa_node anywhere above them.
//
// Write a CPU topology with two NUMA nodes into the same root for a whole
// machine.
func TwoNodeDevices() Devices {
	return Devices{
		PCI: []PCIFunction{
			{Addr: "0000:00:01.0", Node: 0, IOMMUGroup: 1},
			{Addr: "0000:01:00.0", Parent: "0000:00:01.0", Node: 0, IOMMUGroup: 2},
			{Addr: "0000:80:01.0", Node: 1, IOMMUGroup: 30},
			{Addr: "0000:81:00.0", Parent: "0000:80:01.0", Node: 1, IOMMUGroup: 31},
			{Addr: "0000:81:00.2", Parent: "0000:80:01.0", Node: 1, IOMMUGroup: 32},
			{Addr: "0000:80:02.0", Node: 1, IOMMUGroup: 40},
			{Addr: "0000:82:00.0", Parent: "0000:80:02.0", Node: 1, IOMMUGroup: 41},
			{Addr: "0000:82:00.1", Parent: "0000:80:02.0", Node: 1, IOMMUGroup: 41},
			{Addr: "0000:80:03.0", Node: 1, IOMMUGroup: 50},
			{Addr: "0000:83:00.0", Parent: "0000:80:03.0", Node: 1, IOMMUGroup: 51},
			{Addr: "0000:40:01.0", Node: NoNUMANode, IOMMUGroup: 60},
			{Addr: "0000:41:00.0", Parent: "0000:40:01.0", Node: NoNUMANode, IOMMUGroup: 61},
		},
		Nodes: []DeviceNode{
			{Type: "b", Major: 259, Minor: 0, Parent: "0000:01:00.0", Dir: "nvme/nvme0/nvme0n1", DevPath: "/dev/nvme0n1"},
			{Type: "b", Major: 259, Minor: 1, Parent: "0000:01:00.0", Dir: "nvme/nvme0/nvme0n1/nvme0n1p1", DevPath: "/dev/nvme0n1p1"},
			{Type: "c", Major: 231, Minor: 192, Parent: "0000:81:00.2", Dir: "infiniband_verbs/uverbs0", DevPath: "/dev/infiniband/uverbs0"},
			{Type: "c", Major: 243, Minor: 0, Dir: "vfio/41", DevPath: "/dev/vfio/41"},
			{Type: "c", Major: 237, Minor: 0, Parent: "0000:82:00.0", Dir: "vfio-dev/vfio0", DevPath: "/dev/vfio/devices/vfio0"},
			{Type: "c", Major: 226, Minor: 128, Parent: "0000:83:00.0", Dir: "drm/renderD128", DevPath: "/dev/dri/renderD128"},
			{Type: "c", Major: 261, Minor: 0, Parent: "0000:41:00.0", Dir: "accel/accel0", DevPath: "/dev/accel/accel0"},
			{Type: "c", Major: 1, Minor: 3, Dir: "mem/null", DevPath: "/dev/null"},
			{Type: "c", Major: 10, Minor: 196, Dir: "misc/vfio", DevPath: "/dev/vfio/vfio"},
		},
	}
}
