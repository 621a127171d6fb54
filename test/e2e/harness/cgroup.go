package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// Cgroup is a cgroup v1 path (as in an OCI spec's cgroupsPath with the
// cgroupfs driver), read through each controller's hierarchy.
type Cgroup struct {
	// Path is the cgroup's path inside every hierarchy, e.g.
	// /kubepods/pod<uid>/<container id>.
	Path   string
	mounts map[string]string // controller → hierarchy mount point
}

// CgroupValues are the files of a container cgroup that resources map to.
type CgroupValues struct {
	CPUs        cpuset.CPUSet // cpuset.cpus
	Mems        cpuset.CPUSet // cpuset.mems (NUMA nodes)
	CPUShares   int64         // cpu.shares
	CPUQuota    int64         // cpu.cfs_quota_us; -1 = no quota
	CPUPeriod   int64         // cpu.cfs_period_us
	MemoryLimit int64         // memory.limit_in_bytes; unlimited is a huge page-aligned number
}

// NewCgroup returns the cgroup at path in the machine's cgroup v1
// hierarchies. A systemd-style path (slice:prefix:name) is refused.
func NewCgroup(path string) (*Cgroup, error) {
	if strings.Contains(path, ":") {
		return nil, fmt.Errorf("cgroup %q: systemd cgroup paths are not supported, only cgroupfs", path)
	}
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	return &Cgroup{Path: path, mounts: cgroupV1Mounts(mounts)}, nil
}

// Dir returns the cgroup's directory in the hierarchy of controller.
func (g *Cgroup) Dir(controller string) (string, error) {
	root, ok := g.mounts[controller]
	if !ok {
		return "", fmt.Errorf("no cgroup v1 hierarchy with the %s controller is mounted", controller)
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

// CPUs returns cpuset.cpus.
func (g *Cgroup) CPUs() (cpuset.CPUSet, error) { return g.readCPUSet("cpuset.cpus") }

// Mems returns cpuset.mems.
func (g *Cgroup) Mems() (cpuset.CPUSet, error) { return g.readCPUSet("cpuset.mems") }

// CPUShares returns cpu.shares.
func (g *Cgroup) CPUShares() (int64, error) { return g.readInt("cpu", "cpu.shares") }

// CPUQuota returns cpu.cfs_quota_us (-1 when there is no quota).
func (g *Cgroup) CPUQuota() (int64, error) { return g.readInt("cpu", "cpu.cfs_quota_us") }

// CPUPeriod returns cpu.cfs_period_us.
func (g *Cgroup) CPUPeriod() (int64, error) { return g.readInt("cpu", "cpu.cfs_period_us") }

// MemoryLimit returns memory.limit_in_bytes.
func (g *Cgroup) MemoryLimit() (int64, error) { return g.readInt("memory", "memory.limit_in_bytes") }

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
	if v.CPUShares, err = g.CPUShares(); err != nil {
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
