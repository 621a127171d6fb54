package fakesysfs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// NoNUMANode is the numa_node the kernel shows for a device whose firmware
// gives no locality.
const NoNUMANode = -1

// PCIFunction is a PCI function: a NIC's physical or virtual function, an
// NVMe controller, a GPU, or a bridge (root port) other functions sit
// behind. It is written at devices/pci<domain>:<bus>/[<parent>/...]<Addr>.
type PCIFunction struct {
	// Addr is the function's address, domain:bus:device.function, e.g.
	// "0000:81:00.2".
	Addr string
	// Parent is the address of the bridge it sits behind; "" for a
	// function on a root bus.
	Parent string
	// Node is the content of numa_node, NoNUMANode included.
	Node int
	// OmitNUMANode leaves numa_node out.
	OmitNUMANode bool
	// IOMMUGroup is the group it is in under kernel/iommu_groups; 0 is
	// none (the kernel numbers groups from 0, fixtures from 1).
	IOMMUGroup int
}

// DeviceNode is a char or block device as sysfs shows it: a directory with
// a dev file ("major:minor") and the link dev/{char,block}/major:minor to
// it.
type DeviceNode struct {
	// Type is "c" or "b".
	Type string
	// Major and Minor are the device number.
	Major, Minor int
	// Parent is the address of the PCI function the device belongs to;
	// "" for a virtual device, written under devices/virtual.
	Parent string
	// Dir is the device's directory below its parent function, or below
	// devices/virtual for a virtual device, e.g. "nvme/nvme0/nvme0n1",
	// "drm/renderD128", "vfio/12", "mem/null". A block partition is a
	// directory inside its disk's: "nvme/nvme0/nvme0n1/nvme0n1p1".
	Dir string
	// DevPath is the node's path under /dev ("/dev/nvme0n1"). It is not
	// written; tests hand it to the code under test as the container sees
	// the device.
	DevPath string
}

// Devices is the device part of a sysfs tree: PCI functions, the device
// nodes that belong to them or to no device, and extra links and files to
// imitate broken or hostile trees.
type Devices struct {
	// PCI are the PCI functions. A parent must be listed too.
	PCI []PCIFunction
	// Nodes are the char and block devices.
	Nodes []DeviceNode
	// Links are extra symbolic links, path under the sysfs root → target,
	// written as given (dangling, looping or escaping ones included).
	Links map[string]string
	// Files are extra files, path under the sysfs root → content; they
	// replace a file the rest would write.
	Files map[string]string
}

var pciAddr = regexp.MustCompile(`^([0-9a-f]{4}):([0-9a-f]{2}):[0-9a-f]{2}\.[0-7]$`)

// Validate checks that the devices can be written: well-formed unique PCI
// addresses with listed parents, device nodes of a known type with unique
// numbers, relative directories, and parents that exist.
func (d Devices) Validate() error {
	fns := make(map[string]PCIFunction, len(d.PCI))
	for _, f := range d.PCI {
		if !pciAddr.MatchString(f.Addr) {
			return fmt.Errorf("PCI function %q: address is not domain:bus:device.function in lower-case hex", f.Addr)
		}
		if _, dup := fns[f.Addr]; dup {
			return fmt.Errorf("PCI function %s listed twice", f.Addr)
		}
		if f.IOMMUGroup < 0 {
			return fmt.Errorf("PCI function %s: negative IOMMU group %d", f.Addr, f.IOMMUGroup)
		}
		fns[f.Addr] = f
	}
	for _, f := range d.PCI {
		seen := map[string]bool{}
		for p := f.Parent; p != ""; p = fns[p].Parent {
			if _, ok := fns[p]; !ok {
				return fmt.Errorf("PCI function %s: parent %s is not listed", f.Addr, p)
			}
			if seen[p] {
				return fmt.Errorf("PCI function %s: its parents make a loop", f.Addr)
			}
			seen[p] = true
		}
	}
	for p := range d.Links {
		if err := validExtra(p, d.Links); err != nil {
			return fmt.Errorf("link %s: %w", p, err)
		}
	}
	for p := range d.Files {
		if err := validExtra(p, d.Links); err != nil {
			return fmt.Errorf("file %s: %w", p, err)
		}
	}
	numbers := map[string]bool{}
	for _, n := range d.Nodes {
		if n.Type != "c" && n.Type != "b" {
			return fmt.Errorf("device %s: type %q is neither c nor b", n.Dir, n.Type)
		}
		key := fmt.Sprintf("%s %d:%d", n.Type, n.Major, n.Minor)
		if numbers[key] {
			return fmt.Errorf("device %s: number %s listed twice", n.Dir, key)
		}
		numbers[key] = true
		if n.Major < 0 || n.Minor < 0 {
			return fmt.Errorf("device %s: negative number %s", n.Dir, key)
		}
		if n.Dir == "" || path.IsAbs(n.Dir) || path.Clean(n.Dir) != n.Dir || strings.HasPrefix(n.Dir, "..") {
			return fmt.Errorf("device %s: directory must be a clean relative path", n.Dir)
		}
		if _, ok := fns[n.Parent]; n.Parent != "" && !ok {
			return fmt.Errorf("device %s: parent %s is not listed", n.Dir, n.Parent)
		}
	}
	return nil
}

// validExtra checks the path of an extra link or file: relative, clean,
// and not below an extra link, which could lead the writer out of the root.
func validExtra(p string, links map[string]string) error {
	if !fs.ValidPath(p) || p == "." {
		return fmt.Errorf("not a clean relative path")
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if _, ok := links[dir]; ok {
			return fmt.Errorf("below the extra link %s", dir)
		}
	}
	return nil
}

// pciDir returns the directory of the function addr, relative to the
// sysfs root.
func (d Devices) pciDir(addr string) string {
	parents := map[string]string{}
	for _, f := range d.PCI {
		parents[f.Addr] = f.Parent
	}
	chain := []string{addr}
	for p := parents[addr]; p != ""; p = parents[p] {
		chain = append([]string{p}, chain...)
	}
	m := pciAddr.FindStringSubmatch(chain[0])
	return path.Join(append([]string{"devices", "pci" + m[1] + ":" + m[2]}, chain...)...)
}

// nodeDir returns the directory of the device n, relative to the sysfs
// root.
func (d Devices) nodeDir(n DeviceNode) string {
	if n.Parent == "" {
		return path.Join("devices/virtual", n.Dir)
	}
	return path.Join(d.pciDir(n.Parent), n.Dir)
}

// relLink returns the target of a link at from that points to to, both
// relative to the sysfs root, as the kernel writes it: relative.
func relLink(from, to string) string {
	rel, err := filepath.Rel(filepath.Dir(filepath.FromSlash(from)), filepath.FromSlash(to))
	if err != nil {
		panic(err) // both are relative paths
	}
	return filepath.ToSlash(rel)
}

// WriteDevices writes the device part of a sysfs tree under root, as the
// kernel shows it in /sys: the functions under devices/pci*, their
// numa_node and iommu_group, the device directories with dev and device,
// dev/char and dev/block, and kernel/iommu_groups/N/devices. It adds to
// what Write wrote for the CPUs when given the same root.
func WriteDevices(root string, d Devices) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("invalid devices: %w", err)
	}
	files := map[string]string{}
	links := map[string]string{}
	for _, f := range d.PCI {
		dir := d.pciDir(f.Addr)
		files[path.Join(dir, "uevent")] = "PCI_SLOT_NAME=" + f.Addr + "\n"
		if !f.OmitNUMANode {
			files[path.Join(dir, "numa_node")] = strconv.Itoa(f.Node) + "\n"
		}
		if f.IOMMUGroup != 0 {
			group := path.Join("kernel/iommu_groups", strconv.Itoa(f.IOMMUGroup))
			member := path.Join(group, "devices", f.Addr)
			links[member] = relLink(member, dir)
			links[path.Join(dir, "iommu_group")] = relLink(path.Join(dir, "iommu_group"), group)
		}
	}
	for _, n := range d.Nodes {
		dir := d.nodeDir(n)
		number := fmt.Sprintf("%d:%d", n.Major, n.Minor)
		files[path.Join(dir, "dev")] = number + "\n"
		files[path.Join(dir, "uevent")] = fmt.Sprintf("MAJOR=%d\nMINOR=%d\nDEVNAME=%s\n", n.Major, n.Minor, path.Base(n.Dir))
		if n.Parent != "" && !d.isPartition(n) {
			links[path.Join(dir, "device")] = relLink(path.Join(dir, "device"), d.pciDir(n.Parent))
		}
		class := "char"
		if n.Type == "b" {
			class = "block"
		}
		entry := path.Join("dev", class, number)
		links[entry] = relLink(entry, dir)
	}
	for p, target := range d.Links {
		links[p] = target
	}
	for p, content := range d.Files {
		files[p] = content
	}
	if err := writeTree(root, files, links); err != nil {
		return fmt.Errorf("write device tree under %s: %w", root, err)
	}
	return nil
}

// isPartition reports whether n's directory is inside another block
// device's: partitions have no device link of their own.
func (d Devices) isPartition(n DeviceNode) bool {
	if n.Type != "b" {
		return false
	}
	for _, o := range d.Nodes {
		if o.Type == "b" && o.Parent == n.Parent && strings.HasPrefix(n.Dir, o.Dir+"/") {
			return true
		}
	}
	return false
}

// writeTree writes files, then links, parents first; links replace what
// is at their path.
func writeTree(root string, files, links map[string]string) error {
	for _, p := range sortedKeys(files) {
		name := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(name, []byte(files[p]), 0o644); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(links) {
		name := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if err := os.RemoveAll(name); err != nil {
			return err
		}
		if err := os.Symlink(links[p], name); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
