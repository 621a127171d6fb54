package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// Reading containers' cpusets from their cgroups.
//
// NRI gives a container's cgroups path as containerd's CRI plugin puts it
// in the OCI spec (containerd 2.4, getCgroupsPath):
//
//   - cgroupfs driver: "<cgroup parent>/<container id>", e.g.
//     "/kubepods/burstable/pod<uid>/<id>";
//   - systemd driver: "<slice>:cri-containerd:<container id>" where slice
//     is the last element of the pod's cgroup parent, e.g.
//     "kubepods-burstable-pod<uid with _ for ->.slice:cri-containerd:<id>";
//     runc creates it as the scope cri-containerd-<id>.scope under the
//     slice's expanded path kubepods.slice/kubepods-burstable.slice/….
//
// The tree is the host's cgroup mount (cgroupfsRoot): cgroup v2 (unified:
// the cgroup's directory holds cpuset.cpus), cgroup v1 (a cpuset hierarchy
// mounted at <root>/cpuset, with or without systemd's hybrid cgroup2 mount
// at <root>/unified), or a v1 cpuset hierarchy as the root itself.
//
// The file read is cpuset.cpus, on v2 too, not cpuset.cpus.effective: the
// question is whether the runtime applied the update the plugin sent, and
// cpuset.cpus is exactly what runc writes from the spec (the systemd
// driver also sets AllowedCPUs, which systemd writes to the same file).
// The effective set is the kernel's result: cpuset.cpus minus CPUs the
// parent cgroups do not allow or that are offline (and on v2 the parent's
// set while cpuset.cpus is empty). It changes with things the plugin
// neither owns nor can repair by re-sending, so comparing with it would
// report a drift forever. An empty cpuset.cpus (v2: never set) is read as
// the empty set: before the container started, runc has not written it yet
// (the ledger reads it again later); after, someone cleared it: drift.

// cgroupReader reads the cpuset a container's cgroup really has.
type cgroupReader struct {
	// root is the host's cgroup filesystem root, e.g. /sys/fs/cgroup (""
	// disables).
	root string
}

func (r cgroupReader) enabled() bool { return r.root != "" }

// cpusetRoot returns the root of the hierarchy holding cpuset files: the
// v1 cpuset hierarchy <root>/cpuset when there is one, else root (cgroup
// v2, or root is a v1 cpuset mount itself). It stats the tree: a
// verification pass asks once.
func (r cgroupReader) cpusetRoot() string {
	if dir := filepath.Join(r.root, "cpuset"); dirExists(dir) {
		return dir
	}
	return r.root
}

// cpusetFile returns the file holding a container's cpuset in the
// hierarchy cpusetRoot returned, from its cgroups path in either driver's
// form.
func cpusetFile(hierarchy, cgroupsPath string) (string, error) {
	rel, err := cgroupDir(cgroupsPath)
	if err != nil {
		return "", err
	}
	return filepath.Join(hierarchy, rel, "cpuset.cpus"), nil
}

// cgroupDir turns a cgroups path as NRI delivers it into the cgroup's
// directory relative to the hierarchy root.
func cgroupDir(cgroupsPath string) (string, error) {
	if cgroupsPath == "" {
		return "", errors.New("no cgroups path")
	}
	rel := cgroupsPath
	if parts := strings.Split(cgroupsPath, ":"); len(parts) == 3 && !strings.Contains(cgroupsPath, "/") {
		slice, prefix, name := parts[0], parts[1], parts[2]
		if slice == "" {
			slice = "system.slice" // runc's default parent
		}
		dir, err := expandSlice(slice)
		if err != nil {
			return "", fmt.Errorf("cgroups path %q: %w", cgroupsPath, err)
		}
		unit := name
		if !strings.HasSuffix(name, ".slice") {
			unit = prefix + "-" + name + ".scope"
		}
		rel = filepath.Join(dir, unit)
	}
	for _, elem := range strings.Split(rel, "/") {
		if elem == ".." {
			return "", fmt.Errorf("cgroups path %q leaves the cgroup tree", cgroupsPath)
		}
	}
	return filepath.Join("/", rel), nil
}

// expandSlice turns a systemd slice name into its path, as runc does:
// "kubepods-burstable-pod1.slice" →
// "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice";
// "-.slice" is the root.
func expandSlice(slice string) (string, error) {
	name, ok := strings.CutSuffix(slice, ".slice")
	if !ok || name == "" || strings.Contains(slice, "/") {
		return "", fmt.Errorf("invalid systemd slice name %q", slice)
	}
	if name == "-" {
		return "", nil
	}
	var dirs []string
	prefix := ""
	for _, comp := range strings.Split(name, "-") {
		if comp == "" {
			return "", fmt.Errorf("invalid systemd slice name %q", slice)
		}
		prefix += comp
		dirs = append(dirs, prefix+".slice")
		prefix += "-"
	}
	return filepath.Join(dirs...), nil
}

// parseCgroupCPUs parses the text cpusText read from file.
func parseCgroupCPUs(text, file string, maxCPU int) (cpuset.CPUSet, error) {
	cpus, err := cpumask.Parse(text, maxCPU)
	if err != nil {
		return cpuset.New(), fmt.Errorf("parsing %s: %w", file, err)
	}
	return cpus, nil
}

// cpusReader reads containers' cpuset.cpus files with plain system calls
// into a buffer it reuses. A verification pass reads one file per
// container it checks — after a reply that updated the shared containers,
// one per shared container — and os.ReadFile's file object, fstat and
// fresh buffer cost as much again as the read itself
// (BenchmarkCPUsFileRead). Not safe for concurrent use.
type cpusReader struct{ buf []byte }

// read returns the text of a container's cpuset.cpus file (cpusetFile),
// in r's buffer until the next read. A file that does not exist gives an
// error that wraps fs.ErrNotExist.
func (r *cpusReader) read(file string) ([]byte, error) {
	data, err := r.readFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading cpuset: %w", err)
	}
	return bytes.TrimSpace(data), nil
}

// readFile returns the content of the file at path, in r's buffer until
// the next read.
func (r *cpusReader) readFile(path string) ([]byte, error) {
	fd, err := ignoringEINTR(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 4096) // a cgroup file's page
	}
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := ignoringEINTR(func() (int, error) { return unix.Read(fd, r.buf[n:]) })
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return r.buf[:n], nil
		}
		n += m
	}
}

// ignoringEINTR calls f again while it fails with EINTR.
func ignoringEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// describe says what kind of cgroup tree the root is, and returns an
// error when the plugin cannot verify containers' cpusets in it: no cpuset
// files, or not the host's tree but a cgroup namespace's view of the
// plugin's own cgroup (what a container sees at /sys/fs/cgroup unless the
// host's tree is mounted there), or no kubepods cgroup in it.
func (r cgroupReader) describe() (string, error) {
	exists := func(rel ...string) bool {
		_, err := os.Stat(filepath.Join(append([]string{r.root}, rel...)...))
		return err == nil
	}
	if fi, err := os.Stat(r.root); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("cgroupfsRoot %s is not a directory", r.root)
	}
	var kind string
	switch {
	case exists("cpuset", "cpuset.cpus"):
		kind = "cgroup v1, cpuset hierarchy at " + filepath.Join(r.root, "cpuset")
		if exists("unified", "cgroup.controllers") {
			kind = "cgroup v1 with systemd's hybrid cgroup2 mount, cpuset hierarchy at " + filepath.Join(r.root, "cpuset")
		}
		// Only the top cpuset has cpuset.memory_pressure_enabled.
		if !exists("cpuset", "cpuset.memory_pressure_enabled") {
			return kind, fmt.Errorf("cgroupfsRoot %s: %s is not the top of the cpuset hierarchy (a container's view of its own cgroup?); mount the host's cgroup tree", r.root, filepath.Join(r.root, "cpuset"))
		}
	case exists("cgroup.controllers"):
		kind = "cgroup v2 (unified)"
		// Only non-root cgroups have cgroup.type: a cgroup namespace shows
		// the container's own cgroup as the root of its mount.
		if exists("cgroup.type") {
			return kind, fmt.Errorf("cgroupfsRoot %s is a cgroup below the root (the plugin's own cgroup namespace?), not the host's cgroup tree: mount the host's /sys/fs/cgroup and point cgroupfsRoot at it", r.root)
		}
		data, err := os.ReadFile(filepath.Join(r.root, "cgroup.controllers"))
		if err == nil && !containsWord(string(data), "cpuset") {
			return kind, fmt.Errorf("cgroupfsRoot %s: the cpuset controller is not available (cgroup.controllers: %q)", r.root, strings.TrimSpace(string(data)))
		}
	case exists("cpuset.cpus"):
		kind = "cgroup v1 cpuset hierarchy"
		if !exists("cpuset.memory_pressure_enabled") {
			return kind, fmt.Errorf("cgroupfsRoot %s is not the top of the cpuset hierarchy (a container's view of its own cgroup?); mount the host's cgroup tree", r.root)
		}
	default:
		return "", fmt.Errorf("cgroupfsRoot %s holds neither a cgroup v1 cpuset hierarchy nor a cgroup v2 tree", r.root)
	}
	base := r.cpusetRoot()
	if !dirExists(filepath.Join(base, "kubepods")) && !dirExists(filepath.Join(base, "kubepods.slice")) {
		return kind, fmt.Errorf("cgroupfsRoot %s (%s): no kubepods or kubepods.slice cgroup under %s: is it the host's tree, and does the kubelet run with cgroupsPerQOS?", r.root, kind, base)
	}
	return kind, nil
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func containsWord(s, word string) bool { return slices.Contains(strings.Fields(s), word) }

// logCgroupTree says at start where container cpusets are verified, and
// warns when they cannot be.
func (p *Plugin) logCgroupTree() {
	if !p.cgroups.enabled() {
		p.log.Info("cgroupfsRoot is empty: containers' cpusets are not verified")
		return
	}
	kind, err := p.cgroups.describe()
	if err != nil {
		p.log.WithError(err).Warn("containers' cpusets may not be verifiable; updates containerd fails to apply go unnoticed")
		return
	}
	p.log.WithFields(map[string]any{"cgroupfsRoot": p.cgroups.root, "tree": kind}).Info("containers' cpusets are verified in their cgroups")
}
