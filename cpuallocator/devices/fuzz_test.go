package devices_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/devices"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// outsideNode is the numa_node of the file next to the sysfs root that
// nothing inside may read.
const outsideNode = 63

// FuzzLocate adds to the fixture server a device entry and a link with
// any targets (the link also the one member of IOMMU group 4000) and a
// numa_node with any content, and locates a device through them, one of
// any number and path, and the VFIO group. Whatever the tree, Locate ends, reads
// nothing outside the root, and agrees with LocateFS on an os.Root, whose
// file system refuses by itself to leave the root, where Locate (on
// os.DirFS) has only the package's own link resolution to keep it inside.
func FuzzLocate(f *testing.F) {
	seeds := []struct {
		entry, link, numa, path, typ string
		major, minor                 int64
	}{
		{"../../devices/virtual/fz/a", "../../pci0000:80/0000:80:01.0", "1", "/dev/x", "c", 243, 0},
		{"../../devices/virtual/fz/a/b", "..", "0", "/dev/vfio/41", "c", 511, 0},
		{"../../devices/virtual/fz/a", "../fz/a", "1", "/dev/vfio/vfio", "c", 10, 196},
		{"../../devices/virtual/fz/a/c/d", ".", "3\n", "/dev/vfio/4000", "c", 4000, 1},
		{"../../devices/virtual/fz/a", "..", "1", "/dev/vfio/4000", "c", 4000, 1},
		{"../../devices/virtual/fz/a/x/y", "a", "-1", "/dev/vfio/../../etc", "b", 259, 1},
		{"../../../outside", "../../../../outside", "63", "/dev/vfio/4000", "c", 1, 3},
		{"../../devices/virtual/fz/a", "../../../../outside", "7", "/dev/vfio/noiommu-4000", "u", 4095, 1<<20 - 1},
		{"/sys/devices", "/", "x", "", "p", -1, -1},
		{"4000:0/../4000:0", "a/a/a/a", "\x00", "/dev/vfio/99999999999", "", 0, 0},
	}
	for _, s := range seeds {
		f.Add(s.entry, s.link, s.numa, s.path, s.typ, s.major, s.minor)
	}
	dir := f.TempDir()
	d := fakesysfs.TwoNodeDevices()
	d.Files = map[string]string{"kernel/iommu_groups/4000/devices/.keep": ""}
	root := writeTree(f, dir, d)
	if err := os.WriteFile(filepath.Join(dir, "outside/numa_node"), []byte(strconv.Itoa(outsideNode)), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "kernel/iommu_groups/4000/devices/.keep")); err != nil {
		f.Fatal(err)
	}
	osRoot, err := os.OpenRoot(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { osRoot.Close() })
	entry := filepath.Join(root, "dev/char/4000:0")
	fz := filepath.Join(root, "devices/virtual/fz")
	member := filepath.Join(root, "kernel/iommu_groups/4000/devices/m")
	f.Fuzz(func(t *testing.T, entryTarget, linkTarget, numa, devPath, typ string, major, minor int64) {
		if len(numa) > 64 {
			t.Skip()
		}
		t.Cleanup(func() {
			for _, p := range []string{entry, fz, member} {
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
			}
		})
		if err := os.MkdirAll(fz, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fz, "numa_node"), []byte(numa), 0o644); err != nil {
			t.Fatal(err)
		}
		// Targets the kernel cannot store (NUL, empty, too long) are
		// no trees at all.
		if os.Symlink(entryTarget, entry) != nil || os.Symlink(linkTarget, filepath.Join(fz, "a")) != nil ||
			os.Symlink("../../../../devices/virtual/fz/a", member) != nil {
			t.Skip()
		}
		devs := []devices.Device{
			{Path: devPath, Type: typ, Major: 4000, Minor: 0},
			{Path: devPath, Type: typ, Major: major, Minor: minor},
			{Path: "/dev/vfio/4000", Type: "c", Major: 4000, Minor: 1},
		}
		l, err := devices.Locate(root, devs)
		if err != nil {
			t.Fatal(err)
		}
		lfs := devices.LocateFS(osRoot.FS().(fs.ReadLinkFS), devs)
		if n, err := strconv.Atoi(strings.TrimSpace(numa)); (err != nil || n != outsideNode) && l.Nodes.Has(outsideNode) {
			t.Fatalf("Locate read the numa_node outside the root: %+v", l)
		}
		for i := range devs {
			a, b := l.Devices[i], lfs.Devices[i]
			if a.Nodes != b.Nodes || (a.Err == nil) != (b.Err == nil) {
				t.Fatalf("device %d: Locate gives %s, LocateFS on an os.Root %s", i, a, b)
			}
			if a.Reason == "" {
				t.Fatalf("device %d: no reason: %+v", i, a)
			}
		}
	})
}
