package devices_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/devices"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// writeTree writes d under dir/sys, and a numa_node of 7 at
// dir/outside/numa_node that nothing may read. It returns the root.
func writeTree(t testing.TB, dir string, d fakesysfs.Devices) string {
	t.Helper()
	root := filepath.Join(dir, "sys")
	if err := fakesysfs.WriteDevices(root, d); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "outside/numa_node"), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// node returns the device of the fixture whose /dev path is p, as NRI
// would list it.
func node(t testing.TB, d fakesysfs.Devices, p string) devices.Device {
	t.Helper()
	for _, n := range d.Nodes {
		if n.DevPath == p {
			return devices.Device{Path: n.DevPath, Type: n.Type, Major: int64(n.Major), Minor: int64(n.Minor)}
		}
	}
	t.Fatalf("no device %s in the fixture", p)
	return devices.Device{}
}

// noNodes is the mask of a device that gives no hint.
const noNodes = cpuallocator.NodeMask(0)

func TestLocateLayouts(t *testing.T) {
	fixture := fakesysfs.TwoNodeDevices()
	root := writeTree(t, t.TempDir(), fixture)
	dev := func(p string) devices.Device { return node(t, fixture, p) }
	tests := []struct {
		name   string
		dev    devices.Device
		nodes  cpuallocator.NodeMask
		reason string // a part of the reason
	}{
		{"NIC VF RDMA char device", dev("/dev/infiniband/uverbs0"), cpuallocator.NewNodeMask(1),
			"devices/pci0000:80/0000:80:01.0/0000:81:00.2/numa_node"},
		{"NVMe disk", dev("/dev/nvme0n1"), cpuallocator.NewNodeMask(0),
			"devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node"},
		{"NVMe partition through its disk", dev("/dev/nvme0n1p1"), cpuallocator.NewNodeMask(0),
			"0000:01:00.0/numa_node"},
		{"GPU render node", dev("/dev/dri/renderD128"), cpuallocator.NewNodeMask(1),
			"0000:83:00.0/numa_node"},
		{"VFIO group of two functions", dev("/dev/vfio/41"), cpuallocator.NewNodeMask(1),
			"VFIO group 41: 0000:82:00.0 node 1, 0000:82:00.1 node 1"},
		{"VFIO group found by its path", devices.Device{Path: "/dev/vfio/41", Type: "c", Major: 511, Minor: 7}, cpuallocator.NewNodeMask(1),
			"VFIO group 41 (from the path; no "},
		{"iommufd VFIO device", dev("/dev/vfio/devices/vfio0"), cpuallocator.NewNodeMask(1),
			"0000:82:00.0/numa_node"},
		{"numa_node -1", dev("/dev/accel/accel0"), noNodes,
			"0000:41:00.0/numa_node is -1"},
		{"virtual device", dev("/dev/null"), noNodes,
			"no numa_node in " + root + "/devices/virtual/mem/null or above it"},
		{"VFIO container", dev("/dev/vfio/vfio"), noNodes,
			"VFIO container"},
		{"no sysfs entry (NVIDIA's /dev/nvidia0)", devices.Device{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0}, noNodes,
			"no sysfs entry " + root + "/dev/char/195:0"},
		{"a block number that is only a char device", devices.Device{Path: "/dev/x", Type: "b", Major: 231, Minor: 192}, noNodes,
			"no sysfs entry " + root + "/dev/block/231:192"},
		{"unbuffered char", devices.Device{Path: "/dev/uverbs", Type: "u", Major: 231, Minor: 192}, cpuallocator.NewNodeMask(1),
			"0000:81:00.2/numa_node"},
		{"FIFO", devices.Device{Path: "/dev/fifo", Type: "p"}, noNodes,
			`type "p" is not a char or block device`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := devices.Locate(root, []devices.Device{tt.dev})
			if err != nil {
				t.Fatal(err)
			}
			got := l.Devices[0]
			if got.Err != nil {
				t.Fatalf("%s: error %v", got, got.Err)
			}
			if got.Nodes != tt.nodes || l.Nodes != tt.nodes || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("got %s (container nodes %q), want nodes %q and a reason with %q", got, l.Nodes, tt.nodes, tt.reason)
			}
			if got.Device != tt.dev {
				t.Errorf("Device = %+v, want %+v", got.Device, tt.dev)
			}
		})
	}
}

func TestLocateContainer(t *testing.T) {
	fixture := fakesysfs.TwoNodeDevices()
	root := writeTree(t, t.TempDir(), fixture)
	dev := func(p string) devices.Device { return node(t, fixture, p) }
	tests := []struct {
		name  string
		devs  []devices.Device
		nodes cpuallocator.NodeMask
	}{
		{"none", nil, noNodes},
		{"DPDK: a VFIO group, the container node and /dev/null",
			[]devices.Device{dev("/dev/vfio/vfio"), dev("/dev/vfio/41"), dev("/dev/null")}, cpuallocator.NewNodeMask(1)},
		{"only devices without a hint",
			[]devices.Device{dev("/dev/null"), dev("/dev/vfio/vfio"), dev("/dev/accel/accel0")}, noNodes},
		{"devices on both nodes",
			[]devices.Device{dev("/dev/nvme0n1p1"), dev("/dev/dri/renderD128"), dev("/dev/infiniband/uverbs0")}, cpuallocator.NewNodeMask(0, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := devices.Locate(root, tt.devs)
			if err != nil {
				t.Fatal(err)
			}
			if l.Nodes != tt.nodes || len(l.Devices) != len(tt.devs) || l.Err() != nil {
				t.Fatalf("Locate = nodes %q, %d devices, err %v; want nodes %q, %d devices", l.Nodes, len(l.Devices), l.Err(), tt.nodes, len(tt.devs))
			}
			for i, d := range l.Devices {
				if d.Device != tt.devs[i] {
					t.Errorf("device %d is %s, want %s (the order given)", i, d.Device, tt.devs[i])
				}
			}
		})
	}
}

// TestLocateBrokenTrees checks that trees the kernel would not write give
// an error naming the device and the file, or no hint, never a node read
// from outside the root. The cases share one tree (TwoNodeDevices with
// every case's additions, each on device numbers of its own) unless they
// change what the others need.
func TestLocateBrokenTrees(t *testing.T) {
	const vf = "devices/pci0000:80/0000:80:01.0/0000:81:00.2"
	char := func(minor int64) devices.Device {
		return devices.Device{Path: "/dev/x", Type: "c", Major: 240, Minor: minor}
	}
	group := func(n int64) devices.Device {
		return devices.Device{Path: "/dev/vfio/" + strconv.FormatInt(n, 10), Type: "c", Major: 243, Minor: n}
	}
	under := func(minor int, parent string) fakesysfs.DeviceNode {
		return fakesysfs.DeviceNode{Type: "c", Major: 240, Minor: minor, Parent: parent, Dir: "x" + strconv.Itoa(minor) + "/y"}
	}
	groupNode := func(n int) fakesysfs.DeviceNode {
		return fakesysfs.DeviceNode{Type: "c", Major: 243, Minor: n, Dir: "vfio/" + strconv.Itoa(n)}
	}
	link := func(p, target string) func(*fakesysfs.Devices) {
		return func(d *fakesysfs.Devices) { d.Links[p] = target }
	}
	file := func(p, content string) func(*fakesysfs.Devices) {
		return func(d *fakesysfs.Devices) { d.Files[p] = content }
	}
	pci := func(fns ...fakesysfs.PCIFunction) func(*fakesysfs.Devices) {
		return func(d *fakesysfs.Devices) { d.PCI = append(d.PCI, fns...) }
	}
	tests := []struct {
		name     string
		dev      devices.Device
		node     fakesysfs.DeviceNode // added to the tree when Type is set
		change   func(*fakesysfs.Devices)
		mkdir    string                // an empty directory to add
		alone    *fakesysfs.Devices    // a tree of its own instead
		nodes    cpuallocator.NodeMask // the expected nodes
		err      string                // "" for no error
		notExist bool
	}{
		{name: "dangling link", dev: char(5), err: "0000:00:09.0: no such file", notExist: true,
			change: link("dev/char/240:5", "../../devices/pci0000:00/0000:00:09.0/gone")},
		{name: "link to itself", dev: char(6), err: "more than 40 symbolic links",
			change: link("dev/char/240:6", "240:6")},
		{name: "two links in a loop", dev: char(7), err: "more than 40 symbolic links",
			change: func(d *fakesysfs.Devices) {
				d.Links["dev/char/240:7"] = "../block/240:7"
				d.Links["dev/block/240:7"] = "../char/240:7"
			}},
		{name: "link out of the root", dev: char(8), err: "above the sysfs root",
			change: link("dev/char/240:8", "../../../outside")},
		{name: "absolute link", dev: char(9), err: "absolute path",
			change: link("dev/char/240:9", "/sys/devices/virtual")},
		{name: "numa_node a link out of the root", dev: char(11), err: "is not a regular file",
			node: under(11, "0000:81:00.2"), change: link(vf+"/x11/y/numa_node", "../../../../../../outside/numa_node")},
		{name: "numa_node a directory", dev: char(12), err: "is not a regular file",
			node: under(12, "0000:81:00.2"), mkdir: vf + "/x12/y/numa_node"},
		{name: "malformed numa_node", dev: char(13), err: `malformed integer "node1"`,
			node: under(13, "0000:87:00.0"), change: func(d *fakesysfs.Devices) {
				pci(fakesysfs.PCIFunction{Addr: "0000:87:00.0", Parent: "0000:80:03.0"})(d)
				file("devices/pci0000:80/0000:80:03.0/0000:87:00.0/numa_node", "node1\n")(d)
			}},
		{name: "numa_node beyond the allocator's 64", dev: char(14), err: "NUMA node 64 is not -1 nor below 64",
			node: under(14, "0000:88:00.0"), change: pci(fakesysfs.PCIFunction{Addr: "0000:88:00.0", Parent: "0000:80:03.0", Node: 64})},
		{name: "numa_node below -1", dev: char(15), err: "NUMA node -2",
			node: under(15, "0000:89:00.0"), change: pci(fakesysfs.PCIFunction{Addr: "0000:89:00.0", Parent: "0000:80:03.0", Node: -2})},
		{name: "device number out of range", dev: devices.Device{Path: "/dev/x", Type: "c", Major: 4096}, err: "out of Linux's range"},
		{name: "negative device number", dev: devices.Device{Path: "/dev/x", Type: "b", Major: 8, Minor: -1}, err: "out of Linux's range"},
		{name: "VFIO path of a group sysfs does not have", dev: group(99), err: "VFIO group 99 (from the path", notExist: true},
		{name: "VFIO group with a dangling member", dev: group(77), err: "VFIO group 77", notExist: true,
			node: groupNode(77), change: link("kernel/iommu_groups/77/devices/0000:99:00.0", "../../../../devices/pci0000:99/0000:99:00.0")},
		{name: "VFIO group whose directory loops", dev: group(78), err: "more than 40 symbolic links",
			node: groupNode(78), change: link("kernel/iommu_groups/78", "78")},
		{name: "VFIO group whose member leads out", dev: group(79), err: "above the sysfs root",
			node: groupNode(79), change: link("kernel/iommu_groups/79/devices/0000:99:00.0", "../../../../../outside")},
		{name: "VFIO group with a file for a member", dev: group(82), err: "not a directory",
			node: groupNode(82), change: file("kernel/iommu_groups/82/devices/0000:99:00.0", "")},
		{name: "dev/char a link out of the root", dev: char(10), err: "above the sysfs root",
			alone: &fakesysfs.Devices{Links: map[string]string{"dev/char": "../../outside"}}},

		// Trees that give a plain answer.
		{name: "empty VFIO group", dev: group(80), node: groupNode(80), mkdir: "kernel/iommu_groups/80/devices"},
		{name: "VFIO group on node 1 and on no node", dev: group(81), nodes: cpuallocator.NewNodeMask(1),
			node: groupNode(81), change: pci(
				fakesysfs.PCIFunction{Addr: "0000:84:00.0", Parent: "0000:80:02.0", Node: 1, IOMMUGroup: 81},
				fakesysfs.PCIFunction{Addr: "0000:41:00.1", Parent: "0000:40:01.0", Node: fakesysfs.NoNUMANode, IOMMUGroup: 81})},
		{name: "function without numa_node: its bridge's", dev: char(16), nodes: cpuallocator.NewNodeMask(1),
			node: under(16, "0000:85:00.0"), change: pci(fakesysfs.PCIFunction{Addr: "0000:85:00.0", Parent: "0000:80:03.0", OmitNUMANode: true})},
		{name: "function -1 behind a bridge on node 1: the first numa_node wins", dev: char(17),
			node: under(17, "0000:86:00.0"), change: pci(fakesysfs.PCIFunction{Addr: "0000:86:00.0", Parent: "0000:80:03.0", Node: fakesysfs.NoNUMANode})},
		{name: "no dev/char at all", dev: char(18),
			alone: &fakesysfs.Devices{PCI: []fakesysfs.PCIFunction{{Addr: "0000:00:01.0"}}}},
	}
	shared := fakesysfs.TwoNodeDevices()
	shared.Links, shared.Files = map[string]string{}, map[string]string{}
	for _, tt := range tests {
		if tt.alone != nil {
			continue
		}
		if tt.node.Type != "" {
			shared.Nodes = append(shared.Nodes, tt.node)
		}
		if tt.change != nil {
			tt.change(&shared)
		}
	}
	sharedRoot := writeTree(t, t.TempDir(), shared)
	for _, tt := range tests {
		if tt.mkdir != "" {
			if err := os.MkdirAll(filepath.Join(sharedRoot, tt.mkdir), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := sharedRoot
			if tt.alone != nil {
				root = writeTree(t, t.TempDir(), *tt.alone)
			}
			for name, locate := range map[string]func([]devices.Device) devices.Locality{
				"Locate": func(devs []devices.Device) devices.Locality {
					l, err := devices.Locate(root, devs)
					if err != nil {
						t.Fatal(err)
					}
					return l
				},
				// os.Root's file system refuses itself to leave the root.
				"LocateFS/os.Root": func(devs []devices.Device) devices.Locality {
					r, err := os.OpenRoot(root)
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					return devices.LocateFS(r.FS().(fs.ReadLinkFS), devs)
				},
			} {
				l := locate([]devices.Device{tt.dev})
				got := l.Devices[0]
				if got.Nodes != tt.nodes || l.Nodes != tt.nodes {
					t.Errorf("%s: %s, want nodes %q", name, got, tt.nodes)
				}
				if tt.err == "" {
					if got.Err != nil || l.Err() != nil {
						t.Errorf("%s: %s: unexpected error %v", name, got, got.Err)
					}
					continue
				}
				if got.Err == nil || !strings.Contains(got.Err.Error(), tt.err) || got.Reason != got.Err.Error() {
					t.Errorf("%s: %s: error %v, want one with %q", name, got, got.Err, tt.err)
				}
				if errors.Is(got.Err, fs.ErrNotExist) != tt.notExist {
					t.Errorf("%s: errors.Is(%v, fs.ErrNotExist) = %v, want %v", name, got.Err, !tt.notExist, tt.notExist)
				}
				if err := l.Err(); err == nil || !strings.Contains(err.Error(), tt.dev.String()+": ") {
					t.Errorf("%s: Locality.Err() = %v, want it to name %s", name, err, tt.dev)
				}
			}
		})
	}
}

func TestLocateRoot(t *testing.T) {
	if l, err := devices.Locate(filepath.Join(t.TempDir(), "missing"), nil); err != nil || l.Nodes != 0 || len(l.Devices) != 0 {
		t.Errorf("no devices: Locate = %+v, %v; want nothing without opening the root", l, err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := devices.Locate(missing, []devices.Device{{Path: "/dev/null", Type: "c", Major: 1, Minor: 3}})
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: %v", err)
	}
}

func TestStrings(t *testing.T) {
	d := devices.DeviceLocality{
		Device: devices.Device{Path: "/dev/vfio/41", Type: "c", Major: 243, Minor: 0},
		Nodes:  cpuallocator.NewNodeMask(0, 1), Reason: "VFIO group 41: ...",
	}
	if got, want := d.String(), "/dev/vfio/41 (c 243:0): NUMA node 0-1: VFIO group 41: ..."; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	d.Nodes = 0
	if got, want := d.String(), "/dev/vfio/41 (c 243:0): no hint: VFIO group 41: ..."; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
