package devices_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/devices"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// The devices of a DPDK container and of a container with a GPU and a
// disk, on the fixture server of fakesysfs.TwoNodeDevices.
func ExampleLocateFS() {
	dir, err := os.MkdirTemp("", "sysfs")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "sys")
	if err := fakesysfs.WriteDevices(root, fakesysfs.TwoNodeDevices()); err != nil {
		panic(err)
	}
	sysfs := os.DirFS(root).(fs.ReadLinkFS)
	for _, devs := range [][]devices.Device{
		{
			{Path: "/dev/vfio/vfio", Type: "c", Major: 10, Minor: 196},
			{Path: "/dev/vfio/41", Type: "c", Major: 243, Minor: 0},
			{Path: "/dev/null", Type: "c", Major: 1, Minor: 3},
		},
		{
			{Path: "/dev/dri/renderD128", Type: "c", Major: 226, Minor: 128},
			{Path: "/dev/nvme0n1p1", Type: "b", Major: 259, Minor: 1},
			{Path: "/dev/accel/accel0", Type: "c", Major: 261, Minor: 0},
			{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0},
		},
	} {
		l := devices.LocateFS(sysfs, devs)
		fmt.Printf("NUMA nodes %q\n", l.Nodes)
		for _, d := range l.Devices {
			fmt.Println(" ", d)
		}
	}
	// Output:
	// NUMA nodes "1"
	//   /dev/vfio/vfio (c 10:196): no hint: the VFIO container devices/virtual/misc/vfio has no device of its own
	//   /dev/vfio/41 (c 243:0): NUMA node 1: VFIO group 41: 0000:82:00.0 node 1, 0000:82:00.1 node 1
	//   /dev/null (c 1:3): no hint: no numa_node in devices/virtual/mem/null or above it (a virtual device)
	// NUMA nodes "0-1"
	//   /dev/dri/renderD128 (c 226:128): NUMA node 1: devices/pci0000:80/0000:80:03.0/0000:83:00.0/numa_node
	//   /dev/nvme0n1p1 (b 259:1): NUMA node 0: devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node
	//   /dev/accel/accel0 (c 261:0): no hint: devices/pci0000:40/0000:40:01.0/0000:41:00.0/numa_node is -1 (the firmware gives no node)
	//   /dev/nvidia0 (c 195:0): no hint: no sysfs entry dev/char/195:0 (the driver registers no device there)
}
