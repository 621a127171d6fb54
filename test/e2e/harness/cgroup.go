package harness

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// Cgroup is a cgroup of the machine, read through whichever cgroup
// hierarchy holds the cpuset controller: the cgroup v1 hierarchies (one
// per controller; a hybrid machine's cgroup2 mount without controllers is
// ignored) or the cgroup v2 unified hierarchy.
type Cgroup struct {
	// Path is the cgroup's directory inside the hierarchy, e.g.
	// /kubepods/pod<uid>/<container id> (cgroupfs driver) or
	// /kubepods.slice/kubepods-pod<uid>.slice/cri-containerd-<id>.scope
	// (systemd driver).
	Path   string
	layout cgroupLayout
}

// CgroupValues are the files of a container cgroup that resources map to.
type CgroupValues struct {
	CPUs      cpuset.CPUSet // cpuset.cpus
	Mems      cpuset.CPUSet // cpuset.mems (NUMA nodes)
	CPUShares int64         // cgroup v1 cpu.shares (0 on v2)
	CPUWeight int64         // cgroup v2 cpu.weight (0 on v1)
	CPUQuota  int64         // v1 cpu.cfs_quota_us, v2 the first field of cpu.max; -1 = no quota
	CPUPeriod int64         // v1 cpu.cfs_period_us, v2 the second field of cpu.max
	// MemoryLimit is v1 memory.limit_in_bytes (unlimited is a huge
	// page-aligned number) or v2 memory.max (unlimited reads math.MaxInt64).
	MemoryLimit int64
}

// cgroupLayout says where the machine's cgroup files are.
type cgroupLayout struct {
	// unified is the mount point of the cgroup v2 hierarchy that holds the
	// cpuset controller; "" when the controllers are in v1 hierarchies.
	unified string
	// v1 maps each cgroup v1 controller to the mount point of its
	// hierarchy.
	v1 map[string]string
}

// machineCgroups finds the machine's cgroup hierarchies: the v1 ones when
// a v1 cpuset hierarchy is mounted, else the cgroup2 mount whose root
// offers the cpuset controller.
func machineCgroups() (cgroupLayout, error) {
	mounts, err := readMounts()
	if err != nil {
		return cgroupLayout{}, err
	}
	return cgroupLayoutOf(mounts, func(point string) string {
		data, _ := os.ReadFile(filepath.Join(point, "cgroup.controllers"))
		return string(data)
	}), nil
}

// cgroupLayoutOf is machineCgroups for the given mounts; controllers
// returns the content of cgroup.controllers at a cgroup2 mount point.
func cgroupLayoutOf(mounts []mount, controllers func(point string) string) cgroupLayout {
	v1 := cgroupV1Mounts(mounts)
	if _, ok := v1["cpuset"]; ok {
		return cgroupLayout{v1: v1}
	}
	for _, m := range mounts {
		if m.fsType == "cgroup2" && containsWord(controllers(m.point), "cpuset") {
			return cgroupLayout{unified: m.point, v1: v1}
		}
	}
	return cgroupLayout{v1: v1}
}

// version is 2 when the layout is the unified hierarchy, else 1.
func (l cgroupLayout) version() int {
	if l.unified != "" {
		return 2
	}
	return 1
}

// root returns the mount point of the hierarchy of controller.
func (l cgroupLayout) root(controller string) (string, error) {
	if l.unified != "" {
		return l.unified, nil
	}
	root, ok := l.v1[controller]
	if !ok {
		return "", fmt.Errorf("no cgroup hierarchy with the %s controller is mounted (neither cgroup v1 nor a cgroup v2 hierarchy offering cpuset)", controller)
	}
	return root, nil
}

// NewCgroup returns the cgroup at path: a cgroupfs path (as in an OCI
// spec's cgroupsPath with the cgroupfs driver, or a pod's cgroup parent),
// or the systemd driver's "slice:prefix:name", which runc turns into the
// unit <prefix>-<name>.scope in the slice's directory.
func NewCgroup(path string) (*Cgroup, error) {
	dir, err := CgroupDir(path)
	if err != nil {
		return nil, err
	}
	layout, err := machineCgroups()
	if err != nil {
		return nil, err
	}
	return &Cgroup{Path: dir, layout: layout}, nil
}

// CgroupDir returns the directory of a cgroups path in the hierarchy: a
// cgroupfs path as it is, a systemd one ("slice:prefix:name") as runc
// places it, e.g. "kubepods-pod1.slice:cri-containerd:abc" →
// "/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope".
func CgroupDir(cgroupsPath string) (string, error) {
	parts := strings.Split(cgroupsPath, ":")
	if len(parts) == 1 {
		return filepath.Join("/", cgroupsPath), nil
	}
	if len(parts) != 3 || strings.Contains(cgroupsPath, "/") {
		return "", fmt.Errorf("cgroups path %q is neither a cgroupfs path nor systemd's slice:prefix:name", cgroupsPath)
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	if slice == "" {
		slice = "system.slice" // runc's default
	}
	dir, err := expandSlice(slice)
	if err != nil {
		return "", fmt.Errorf("cgroups path %q: %w", cgroupsPath, err)
	}
	unit := name
	if !strings.HasSuffix(name, ".slice") {
		unit = prefix + "-" + name + ".scope"
	}
	return filepath.Join("/", dir, unit), nil
}

// expandSlice turns a systemd slice name into its directory, as systemd
// and runc do: "kubepods-burstable-pod1.slice" →
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

// Version returns 1 or 2: the cgroup version the cgroup is read from.
func (g *Cgroup) Version() int { return g.layout.version() }

// Dir returns the cgroup's directory in the hierarchy of controller (the
// one directory of the unified hierarchy on cgroup v2).
func (g *Cgroup) Dir(controller string) (string, error) {
	root, err := g.layout.root(controller)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, g.Path), nil
}

// ReadFile returns the trimmed content of file in controller's hierarchy.
func (g *Cgroup) ReadFile(controller, file string) (string, error) {
	dir, err := g.Dir(controller)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return "", fmt.Errorf("read cgroup file: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// CPUs returns cpuset.cpus as written. On cgroup v2 it is empty while
// nobody has set it (the cgroup then uses its parent's CPUs; see
// AllowedCPUs), and the root cgroup has none (see EffectiveCPUs).
func (g *Cgroup) CPUs() (cpuset.CPUSet, error) { return g.readCPUSet("cpuset.cpus") }

// EffectiveCPUs returns the CPUs the kernel lets the cgroup use:
// cpuset.cpus.effective (v2), cpuset.effective_cpus (v1).
func (g *Cgroup) EffectiveCPUs() (cpuset.CPUSet, error) {
	if g.Version() == 2 {
		return g.readCPUSet("cpuset.cpus.effective")
	}
	return g.readCPUSet("cpuset.effective_cpus")
}

// AllowedCPUs returns the CPUs the cgroup's own cpuset file allows: its
// cpuset.cpus, or, on cgroup v2 where that is empty because it was never
// set, the effective set it inherits. That is what a container's cpuset
// is whether or not a runtime wrote it.
func (g *Cgroup) AllowedCPUs() (cpuset.CPUSet, error) {
	cpus, err := g.CPUs()
	if err != nil || !cpus.IsEmpty() || g.Version() == 1 {
		return cpus, err
	}
	return g.EffectiveCPUs()
}

// Mems returns cpuset.mems.
func (g *Cgroup) Mems() (cpuset.CPUSet, error) { return g.readCPUSet("cpuset.mems") }

// CPUShares returns cgroup v1's cpu.shares; cgroup v2 has cpu.weight
// instead.
func (g *Cgroup) CPUShares() (int64, error) {
	if g.Version() == 2 {
		return 0, errors.New("cgroup v2 has no cpu.shares: read CPUWeight")
	}
	return g.readInt("cpu", "cpu.shares")
}

// CPUWeight returns cgroup v2's cpu.weight; cgroup v1 has cpu.shares
// instead.
func (g *Cgroup) CPUWeight() (int64, error) {
	if g.Version() == 1 {
		return 0, errors.New("cgroup v1 has no cpu.weight: read CPUShares")
	}
	return g.readInt("cpu", "cpu.weight")
}

// CPUQuota returns the CFS quota in microseconds per period (-1 when there
// is no quota): cpu.cfs_quota_us (v1), the first field of cpu.max (v2).
func (g *Cgroup) CPUQuota() (int64, error) {
	if g.Version() == 1 {
		return g.readInt("cpu", "cpu.cfs_quota_us")
	}
	quota, _, err := g.cpuMax()
	return quota, err
}

// CPUPeriod returns the CFS period in microseconds: cpu.cfs_period_us
// (v1), the second field of cpu.max (v2).
func (g *Cgroup) CPUPeriod() (int64, error) {
	if g.Version() == 1 {
		return g.readInt("cpu", "cpu.cfs_period_us")
	}
	_, period, err := g.cpuMax()
	return period, err
}

// cpuMax reads cgroup v2's cpu.max, "<quota|max> <period>".
func (g *Cgroup) cpuMax() (quota, period int64, err error) {
	s, err := g.ReadFile("cpu", "cpu.max")
	if err != nil {
		return 0, 0, err
	}
	return parseCPUMax(s)
}

// parseCPUMax parses the content of cpu.max; "max" is -1, as v1 writes no
// quota.
func parseCPUMax(s string) (quota, period int64, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("parse cpu.max %q: want \"<quota|max> <period>\"", s)
	}
	quota = -1
	if f[0] != "max" {
		if quota, err = strconv.ParseInt(f[0], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("parse cpu.max %q: %w", s, err)
		}
	}
	if period, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("parse cpu.max %q: %w", s, err)
	}
	return quota, period, nil
}

// MemoryLimit returns memory.limit_in_bytes (v1) or memory.max (v2, where
// "max" reads math.MaxInt64).
func (g *Cgroup) MemoryLimit() (int64, error) {
	if g.Version() == 1 {
		return g.readInt("memory", "memory.limit_in_bytes")
	}
	s, err := g.ReadFile("memory", "memory.max")
	if err != nil {
		return 0, err
	}
	if s == "max" {
		return math.MaxInt64, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse memory.max of %s: %w", g.Path, err)
	}
	return v, nil
}

// Values reads all of CgroupValues at once.
func (g *Cgroup) Values() (CgroupValues, error) {
	var v CgroupValues
	var err error
	if v.CPUs, err = g.CPUs(); err != nil {
		return v, err
	}
	if v.Mems, err = g.Mems(); err != nil {
		return v, err
	}
	if g.Version() == 1 {
		if v.CPUShares, err = g.CPUShares(); err != nil {
			return v, err
		}
	} else if v.CPUWeight, err = g.CPUWeight(); err != nil {
		return v, err
	}
	if v.CPUQuota, err = g.CPUQuota(); err != nil {
		return v, err
	}
	if v.CPUPeriod, err = g.CPUPeriod(); err != nil {
		return v, err
	}
	if v.MemoryLimit, err = g.MemoryLimit(); err != nil {
		return v, err
	}
	return v, nil
}

// SharesMatch reports whether the cgroup's CPU weight is what a runtime
// writes for shares: cpu.shares itself on v1, on v2 a cpu.weight of
// CPUWeightsOf(shares).
func (g *Cgroup) SharesMatch(shares int64) (bool, string, error) {
	if g.Version() == 1 {
		got, err := g.CPUShares()
		return got == shares, fmt.Sprintf("cpu.shares %d", got), err
	}
	got, err := g.CPUWeight()
	for _, w := range CPUWeightsOf(shares) {
		if got == w {
			return true, fmt.Sprintf("cpu.weight %d", got), err
		}
	}
	return false, fmt.Sprintf("cpu.weight %d (want one of %v for cpu.shares %d)", got, CPUWeightsOf(shares), shares), err
}

func (g *Cgroup) readCPUSet(file string) (cpuset.CPUSet, error) {
	s, err := g.ReadFile("cpuset", file)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("parse %s of %s: %w", file, g.Path, err)
	}
	return set, nil
}

func (g *Cgroup) readInt(controller, file string) (int64, error) {
	s, err := g.ReadFile(controller, file)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s of %s: %w", file, g.Path, err)
	}
	return v, nil
}

// CPUWeightsOf returns the cgroup v2 cpu.weight values runtimes write for
// cgroup v1 cpu.shares (the kubelet sends shares; runc and systemd
// convert): runc's linear mapping of [2, 262144] onto [1, 10000] (before
// runc 1.3.2; Debian 12's runc), and the quadratic one of runc 1.3.2 and
// later (opencontainers/cgroups), which maps the default 1024 onto the
// default 100. Tests accept either.
func CPUWeightsOf(shares int64) []int64 {
	if shares <= 0 {
		return []int64{0}
	}
	linear := 1 + ((shares-2)*9999)/262142
	var quadratic int64
	switch {
	case shares <= 2:
		quadratic = 1
	case shares >= 262144:
		quadratic = 10000
	default:
		l := math.Log2(float64(shares))
		quadratic = int64(math.Ceil(math.Pow(10, (l*l+125*l)/612.0-7.0/34.0)))
	}
	if linear == quadratic {
		return []int64{linear}
	}
	return []int64{linear, quadratic}
}

// EnableControllers enables, in the cgroup v2 directory parent, every
// controller of want that parent offers (cgroup.controllers) for its
// children (cgroup.subtree_control): a cgroup made under it has only the
// controllers enabled there. It does nothing on a v1 hierarchy.
func EnableControllers(parent string, want ...string) error {
	data, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if errors.Is(err, os.ErrNotExist) {
		return nil // not cgroup v2
	}
	if err != nil {
		return fmt.Errorf("enable cgroup controllers in %s: %w", parent, err)
	}
	var enable []string
	for _, c := range want {
		if containsWord(string(data), c) {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
		return fmt.Errorf("enable cgroup controllers %s in %s: %w", strings.Join(enable, " "), parent, err)
	}
	return nil
}

func containsWord(s, word string) bool {
	for _, f := range strings.Fields(s) {
		if f == word {
			return true
		}
	}
	return false
}
