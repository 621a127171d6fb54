// Package devices finds the NUMA nodes of a container's devices, from what
// NRI shows of it: its Linux device nodes (CDI-injected ones included),
// each a type and a major:minor number, resolved through sysfs.
//
// A char or block device is found through the link dev/{char,block}/M:m
// and the first directory at or above its target that has a numa_node
// file: the PCI function the device belongs to (a block partition
// resolves through its disk). A VFIO group (/dev/vfio/N) is the functions of IOMMU group N,
// kernel/iommu_groups/N/devices/*. A device gives no hint when it has no
// sysfs entry, no numa_node above it (a virtual device such as /dev/null
// or the VFIO container /dev/vfio/vfio), or numa_node -1. A tree that
// cannot be read as the kernel writes it (a dangling or looping link, a
// link out of the sysfs root, a malformed numa_node) is an error of that
// device only, which then gives no hint either.
//
// The lookup costs about 25 system calls per device; it is meant to run
// once per container, at its creation, not on every decision.
package devices

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/internal/sysfs"
)

// Device is a Linux device node of a container, the fields of NRI's
// api.LinuxDevice that locate it.
type Device struct {
	// Path is the node's path in the container, e.g. "/dev/vfio/41".
	Path string
	// Type is "c" (char), "u" (unbuffered char), "b" (block) or "p"
	// (FIFO).
	Type string
	// Major and Minor are the device number on the host.
	Major, Minor int64
}

func (d Device) String() string {
	return fmt.Sprintf("%s (%s %d:%d)", d.Path, d.Type, d.Major, d.Minor)
}

// DeviceLocality is where one device is, or why that is not known.
type DeviceLocality struct {
	Device Device
	// Nodes are the device's NUMA nodes (the functions of a VFIO group
	// may be on several); empty when it gives no hint.
	Nodes cpuallocator.NodeMask
	// Reason says which files gave Nodes, or why the device gives no
	// hint.
	Reason string
	// Err is set when sysfs could not be read as the kernel writes it;
	// the device then gives no hint and Reason is the error's text.
	Err error
}

func (d DeviceLocality) String() string {
	if d.Nodes == 0 {
		return fmt.Sprintf("%s: no hint: %s", d.Device, d.Reason)
	}
	return fmt.Sprintf("%s: NUMA node %s: %s", d.Device, d.Nodes, d.Reason)
}

// Locality is where a container's devices are.
type Locality struct {
	// Nodes are the NUMA nodes of all the devices that give a hint;
	// empty when none does.
	Nodes cpuallocator.NodeMask
	// Devices are the devices in the order given, each with its nodes or
	// why it has none.
	Devices []DeviceLocality
}

// Err joins the errors of the devices, nil when sysfs read as expected.
func (l Locality) Err() error {
	var errs []error
	for _, d := range l.Devices {
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Device, d.Err))
		}
	}
	return errors.Join(errs...)
}

// Bounds of the device numbers Linux can represent (dev_t: 12-bit major,
// 20-bit minor) and of the functions read from one IOMMU group.
const (
	maxMajor        = 1<<12 - 1
	maxMinor        = 1<<20 - 1
	maxGroupMembers = 256
	maxNUMANodes    = 64 // what a cpuallocator.NodeMask holds
)

// Locate returns where devs are according to the sysfs tree at sysfsRoot
// ("/sys" in production). It fails only when the root is not a
// directory; a device that cannot be located has its own error in the
// result. Every link is resolved by the package, inside the root, before
// a path is handed to the system, so nothing outside the root is read.
func Locate(sysfsRoot string, devs []Device) (Locality, error) {
	if len(devs) == 0 {
		return Locality{}, nil
	}
	if info, err := os.Stat(sysfsRoot); err != nil {
		return Locality{}, fmt.Errorf("device locality: sysfs root: %w", err)
	} else if !info.IsDir() {
		return Locality{}, fmt.Errorf("device locality: sysfs root %s is not a directory", sysfsRoot)
	}
	return locate(os.DirFS(sysfsRoot).(fs.ReadLinkFS), sysfsRoot, devs), nil
}

// LocateFS is Locate on a file system rooted at the sysfs root. It must
// implement fs.ReadLinkFS, as os.DirFS and os.Root.FS do, for the links
// sysfs is made of. Reasons and errors name files relative to that root.
func LocateFS(fsys fs.ReadLinkFS, devs []Device) Locality {
	return locate(fsys, "", devs)
}

func locate(fsys fs.ReadLinkFS, root string, devs []Device) Locality {
	r := sysfs.Reader{FS: sysfs.Memo(fsys), Root: root}
	l := Locality{Devices: make([]DeviceLocality, len(devs))}
	for i, d := range devs {
		l.Devices[i] = locateOne(r, d)
		l.Nodes = l.Nodes.Union(l.Devices[i].Nodes)
	}
	return l
}

// outcome builders: a device with nodes, one without a hint, one in error.
func found(d Device, nodes cpuallocator.NodeMask, reason string) DeviceLocality {
	return DeviceLocality{Device: d, Nodes: nodes, Reason: reason}
}

func noHint(d Device, format string, args ...any) DeviceLocality {
	return DeviceLocality{Device: d, Reason: fmt.Sprintf(format, args...)}
}

func failed(d Device, err error) DeviceLocality {
	return DeviceLocality{Device: d, Reason: err.Error(), Err: err}
}

func locateOne(r sysfs.Reader, d Device) DeviceLocality {
	var class string
	switch d.Type {
	case "c", "u":
		class = "char"
	case "b":
		class = "block"
	default:
		return noHint(d, "type %q is not a char or block device", d.Type)
	}
	if d.Major < 0 || d.Major > maxMajor || d.Minor < 0 || d.Minor > maxMinor {
		return failed(d, fmt.Errorf("device number %d:%d is out of Linux's range", d.Major, d.Minor))
	}
	// The entry is looked up in dev/char resolved, a directory that is no
	// link, so that its absence is told from a dangling link.
	entry := fmt.Sprintf("dev/%s/%d:%d", class, d.Major, d.Minor)
	classDir, err := r.Resolve(path.Dir(entry))
	if err == nil {
		entry = path.Join(classDir, path.Base(entry))
		_, err = fs.Lstat(r.FS, entry)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return failed(d, fmt.Errorf("stat %s: %w", r.Name(entry), sysfs.Pathless(err)))
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		if group, ok := vfioGroupOfPath(d.Path); ok && class == "char" {
			return locateGroup(r, d, group, fmt.Sprintf("VFIO group %d (from the path; no %s)", group, r.Name(entry)))
		}
		return noHint(d, "no sysfs entry %s (the driver registers no device there)", r.Name(entry))
	}
	if err != nil {
		return failed(d, err)
	}
	dir, err := r.Resolve(entry)
	if err != nil {
		return failed(d, err)
	}
	if group, ok := vfioGroupOfDir(dir); ok {
		return locateGroup(r, d, group, fmt.Sprintf("VFIO group %d", group))
	}
	if dir == "devices/virtual/misc/vfio" {
		return noHint(d, "the VFIO container %s has no device of its own", r.Name(dir))
	}
	node, file, err := nodeAbove(r, dir)
	switch {
	case err != nil:
		return failed(d, err)
	case file == "":
		return noHint(d, "no numa_node in %s or above it (a virtual device)", r.Name(dir))
	case node < 0:
		return noHint(d, "%s is -1 (the firmware gives no node)", r.Name(file))
	}
	return found(d, cpuallocator.NewNodeMask(node), r.Name(file))
}

// nodeAbove returns the content of the numa_node file of dir or of its
// closest ancestor that has one, and that file; file is "" when none has.
// A numa_node below -1, at or above maxNUMANodes, malformed or not a
// regular file is an error.
func nodeAbove(r sysfs.Reader, dir string) (node int, file string, err error) {
	for ; dir != "." && dir != "/"; dir = path.Dir(dir) {
		file = path.Join(dir, "numa_node")
		info, err := fs.Lstat(r.FS, file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("stat %s: %w", r.Name(file), sysfs.Pathless(err))
		}
		if !info.Mode().IsRegular() {
			return 0, "", fmt.Errorf("%s is not a regular file (%s)", r.Name(file), info.Mode().Type())
		}
		node, err := r.ReadInt(file)
		if err != nil {
			return 0, "", err
		}
		if node < -1 || node >= maxNUMANodes {
			return 0, "", fmt.Errorf("%s: NUMA node %d is not -1 nor below %d", r.Name(file), node, maxNUMANodes)
		}
		return node, file, nil
	}
	return 0, "", nil
}

var (
	vfioGroupDir  = regexp.MustCompile(`^devices/virtual/vfio/(?:noiommu-)?([0-9]{1,9})$`)
	vfioGroupPath = regexp.MustCompile(`^/dev/vfio/(?:noiommu-)?([0-9]{1,9})$`)
)

// vfioGroupOfDir returns the IOMMU group of a VFIO group's sysfs
// directory, devices/virtual/vfio/N (noiommu-N without an IOMMU).
func vfioGroupOfDir(dir string) (int, bool) {
	return groupOf(vfioGroupDir, dir)
}

// vfioGroupOfPath returns the IOMMU group a VFIO group's node is named
// after in /dev/vfio.
func vfioGroupOfPath(p string) (int, bool) {
	if p == "" {
		return 0, false
	}
	return groupOf(vfioGroupPath, path.Clean(p))
}

func groupOf(re *regexp.Regexp, s string) (int, bool) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// locateGroup returns the nodes of the functions of IOMMU group id.
// Functions with numa_node -1 or none give no hint; the group's nodes are
// those of the others.
func locateGroup(r sysfs.Reader, d Device, id int, what string) DeviceLocality {
	dir, err := r.Resolve(fmt.Sprintf("kernel/iommu_groups/%d/devices", id))
	if err != nil {
		return failed(d, fmt.Errorf("%s: %w", what, err))
	}
	entries, err := r.ReadDir(dir)
	if err != nil {
		return failed(d, fmt.Errorf("%s: %w", what, err))
	}
	if len(entries) == 0 {
		return noHint(d, "%s: %s is empty", what, r.Name(dir))
	}
	if len(entries) > maxGroupMembers {
		return failed(d, fmt.Errorf("%s: %s lists %d devices, more than %d", what, r.Name(dir), len(entries), maxGroupMembers))
	}
	var nodes cpuallocator.NodeMask
	parts := make([]string, 0, len(entries))
	for _, e := range entries {
		fn, err := r.Resolve(path.Join(dir, e.Name()))
		if err != nil {
			return failed(d, fmt.Errorf("%s: %w", what, err))
		}
		node, file, err := nodeAbove(r, fn)
		switch {
		case err != nil:
			return failed(d, fmt.Errorf("%s: %w", what, err))
		case file == "":
			parts = append(parts, e.Name()+" no numa_node")
		case node < 0:
			parts = append(parts, e.Name()+" node -1")
		default:
			nodes = nodes.Union(cpuallocator.NewNodeMask(node))
			parts = append(parts, fmt.Sprintf("%s node %d", e.Name(), node))
		}
	}
	return found(d, nodes, what+": "+strings.Join(parts, ", "))
}
