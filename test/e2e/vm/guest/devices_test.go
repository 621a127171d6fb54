//go:build vmguest

package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/devices"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/vm"
)

// nodeDisk is the disk QEMU attached to a NUMA node (vm.Layout.NodeDisks).
type nodeDisk struct {
	node         int
	path         string // its device node, "/dev/vdb"
	major, minor int64
}

// device is the disk as NRI shows a container's device node.
func (d nodeDisk) device() devices.Device {
	return devices.Device{Path: d.path, Type: "b", Major: d.major, Minor: d.minor}
}

// nodeDisks returns the disks of the NUMA nodes, found by their serials
// in /sys/block, by node.
func nodeDisks(t testing.TB) map[int]nodeDisk {
	t.Helper()
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		t.Fatal(err)
	}
	serials := map[string]int{}
	for n := range 2 {
		serials[vm.NodeDiskSerial(n)] = n
	}
	disks := map[int]nodeDisk{}
	for _, e := range entries {
		serial, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "serial"))
		if err != nil {
			continue // not a virtio disk
		}
		n, ok := serials[strings.TrimSpace(string(serial))]
		if !ok {
			continue
		}
		dev := readSys(t, filepath.Join("/sys/block", e.Name(), "dev"))
		majorText, minorText, _ := strings.Cut(dev, ":")
		major, err1 := strconv.ParseInt(majorText, 10, 64)
		minor, err2 := strconv.ParseInt(minorText, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("/sys/block/%s/dev: %q is not major:minor", e.Name(), dev)
		}
		disks[n] = nodeDisk{node: n, path: "/dev/" + e.Name(), major: major, minor: minor}
	}
	return disks
}

// nodeDevicePaths returns the disks' device nodes by NUMA node, for
// e2etest.ScenarioOptions.NodeDevices.
func nodeDevicePaths(disks map[int]nodeDisk) map[int]string {
	paths := map[int]string{}
	for n, d := range disks {
		paths[n] = d.path
	}
	return paths
}

// wantNodeDisks checks that each NUMA node has its disk and that the
// plugin's device lookup (cpuallocator/devices, on this kernel's sysfs)
// finds it on its node: the PCI expander bridge's proximity domain read
// by the kernel from the firmware's tables, as on a real server.
func wantNodeDisks(t *testing.T) {
	t.Helper()
	disks := nodeDisks(t)
	for n := range 2 {
		d, ok := disks[n]
		if !ok {
			t.Errorf("no disk with serial %s in /sys/block: the boot attaches one to each NUMA node", vm.NodeDiskSerial(n))
			continue
		}
		loc, err := devices.Locate("/sys", []devices.Device{d.device()})
		if err != nil {
			t.Fatal(err)
		}
		if want := cpuallocator.NewNodeMask(n); loc.Nodes != want || loc.Err() != nil {
			t.Errorf("NUMA node %d's disk: located %s (%v), want NUMA node %d", n, loc.Devices[0], loc.Err(), n)
			continue
		}
		t.Logf("NUMA node %d's disk: %s", n, loc.Devices[0])
	}
}

// String names the disk in messages.
func (d nodeDisk) String() string {
	return fmt.Sprintf("%s (%d:%d, NUMA node %d)", d.path, d.major, d.minor, d.node)
}
