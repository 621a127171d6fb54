package fakesysfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteDevices(t *testing.T) {
	root := t.TempDir()
	if err := WriteDevices(root, TwoNodeDevices()); err != nil {
		t.Fatal(err)
	}
	links := []struct{ link, target string }{
		{"dev/block/259:1", "../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1"},
		{"dev/char/231:192", "../../devices/pci0000:80/0000:80:01.0/0000:81:00.2/infiniband_verbs/uverbs0"},
		{"dev/char/243:0", "../../devices/virtual/vfio/41"},
		{"dev/char/1:3", "../../devices/virtual/mem/null"},
		{"kernel/iommu_groups/41/devices/0000:82:00.1", "../../../../devices/pci0000:80/0000:80:02.0/0000:82:00.1"},
		{"devices/pci0000:80/0000:80:02.0/0000:82:00.1/iommu_group", "../../../../kernel/iommu_groups/41"},
		{"devices/pci0000:80/0000:80:01.0/0000:81:00.2/infiniband_verbs/uverbs0/device", "../.."},
		{"devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0/nvme0n1/device", "../../.."},
	}
	for _, l := range links {
		got, err := os.Readlink(filepath.Join(root, l.link))
		if err != nil {
			t.Errorf("readlink %s: %v", l.link, err)
			continue
		}
		if got != l.target {
			t.Errorf("%s -> %s, want %s", l.link, got, l.target)
		}
		// Every link of the kernel's layout leads somewhere.
		if _, err := os.Stat(filepath.Join(root, l.link)); err != nil {
			t.Errorf("%s dangles: %v", l.link, err)
		}
	}
	files := []struct{ file, want string }{
		{"devices/pci0000:80/0000:80:01.0/0000:81:00.2/numa_node", "1"},
		{"devices/pci0000:40/0000:40:01.0/0000:41:00.0/numa_node", "-1"},
		{"devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1/dev", "259:1"},
		{"devices/virtual/misc/vfio/dev", "10:196"},
	}
	for _, f := range files {
		if got, ok := readTree(t, root, f.file); !ok || got != f.want {
			t.Errorf("%s = %q (exists %v), want %q", f.file, got, ok, f.want)
		}
	}
	// A partition has no device link: it resolves through its disk.
	if _, err := os.Lstat(filepath.Join(root, "devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1/device")); !os.IsNotExist(err) {
		t.Errorf("the partition has a device link (err %v)", err)
	}
}

func TestWriteDevicesExtras(t *testing.T) {
	root := t.TempDir()
	d := TwoNodeDevices()
	d.Links = map[string]string{"dev/char/240:6": "240:6"}
	d.Files = map[string]string{"devices/pci0000:80/0000:80:01.0/numa_node": "garbage\n"}
	if err := WriteDevices(root, d); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(filepath.Join(root, "dev/char/240:6")); got != "240:6" {
		t.Errorf("extra link -> %q", got)
	}
	if got, _ := readTree(t, root, "devices/pci0000:80/0000:80:01.0/numa_node"); got != "garbage" {
		t.Errorf("extra file = %q", got)
	}
}

func TestDevicesValidate(t *testing.T) {
	fn := func(addr, parent string) PCIFunction { return PCIFunction{Addr: addr, Parent: parent} }
	tests := []struct {
		name string
		d    Devices
		want string
	}{
		{"bad address", Devices{PCI: []PCIFunction{fn("0:1:2.3", "")}}, "address"},
		{"duplicate", Devices{PCI: []PCIFunction{fn("0000:00:01.0", ""), fn("0000:00:01.0", "")}}, "twice"},
		{"unknown parent", Devices{PCI: []PCIFunction{fn("0000:01:00.0", "0000:00:01.0")}}, "not listed"},
		{"parent loop", Devices{PCI: []PCIFunction{fn("0000:01:00.0", "0000:02:00.0"), fn("0000:02:00.0", "0000:01:00.0")}}, "loop"},
		{"negative group", Devices{PCI: []PCIFunction{{Addr: "0000:00:01.0", IOMMUGroup: -1}}}, "IOMMU"},
		{"bad type", Devices{Nodes: []DeviceNode{{Type: "p", Dir: "x"}}}, "type"},
		{"same number", Devices{Nodes: []DeviceNode{{Type: "c", Major: 1, Minor: 3, Dir: "a"}, {Type: "c", Major: 1, Minor: 3, Dir: "b"}}}, "twice"},
		{"escaping dir", Devices{Nodes: []DeviceNode{{Type: "c", Major: 1, Minor: 3, Dir: "../x"}}}, "clean relative"},
		{"node parent", Devices{Nodes: []DeviceNode{{Type: "c", Major: 1, Minor: 3, Dir: "x", Parent: "0000:00:01.0"}}}, "not listed"},
		{"absolute link", Devices{Links: map[string]string{"/etc/x": "y"}}, "clean relative"},
		{"file below a link", Devices{Links: map[string]string{"a": "../.."}, Files: map[string]string{"a/b": "x"}}, "below the extra link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.d.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
			if err := WriteDevices(t.TempDir(), tt.d); err == nil {
				t.Fatal("WriteDevices wrote invalid devices")
			}
		})
	}
	if err := TwoNodeDevices().Validate(); err != nil {
		t.Fatalf("TwoNodeDevices: %v", err)
	}
}
