package cpuallocator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/internal/sysfs"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

const (
	cpuDir  = "devices/system/cpu"
	nodeDir = "devices/system/node"
)

// Discover reads the topology from the sysfs tree rooted at sysfsRoot ("/sys"
// in production). It reads devices/system/cpu/{online,isolated},
// cpuN/topology/*, cpuN/cache/index*/*, and devices/system/node/*. Offline
// CPUs are excluded; isolated ones (isolcpus) are part of the topology,
// marked CPUInfo.Isolated, as the kubelet counts them: what they serve is
// the policy's choice. A malformed or missing file gives an error naming
// the file.
func Discover(sysfsRoot string) (*Topology, error) {
	return discover(sysfsReader{sysfs.Reader{FS: os.DirFS(sysfsRoot), Root: sysfsRoot}})
}

// DiscoverFS is Discover on a file system whose root is the sysfs root (an
// in-memory fixture in tests and benchmarks). Errors name files relative to
// that root.
func DiscoverFS(fsys fs.FS) (*Topology, error) {
	return discover(sysfsReader{sysfs.Reader{FS: fsys}})
}

// sysfsReader is the shared sysfs reader with the CPU list files of the
// topology.
type sysfsReader struct{ sysfs.Reader }

func (r sysfsReader) readList(rel string) (cpuset.CPUSet, error) {
	s, err := r.Read(rel)
	if err != nil {
		return cpuset.New(), err
	}
	set, err := cpumask.Parse(s, cpumask.MaxID)
	if err != nil {
		return cpuset.New(), fmt.Errorf("%s: malformed CPU list %q: %w", r.Name(rel), s, err)
	}
	return set, nil
}

// rawCPU is what sysfs says about one CPU before ids are made machine-wide.
type rawCPU struct {
	id, pkg, die, core int
	siblings           cpuset.CPUSet
	siblingsFile       string
	// cacheKey identifies the L3 group; "" when the CPU has no L3.
	cacheKey string
}

func discover(r sysfsReader) (*Topology, error) {
	online, err := r.readList(cpuDir + "/online")
	if err != nil {
		return nil, err
	}
	isolated := cpuset.New()
	if r.Exists(cpuDir + "/isolated") {
		if isolated, err = r.readList(cpuDir + "/isolated"); err != nil {
			return nil, err
		}
	}
	// The kernel lists isolcpus CPUs whether or not they are online.
	isolated = isolated.Intersection(online)
	if online.IsEmpty() {
		return nil, fmt.Errorf("%s: no online CPU", r.Name(cpuDir+"/online"))
	}
	raws := make([]rawCPU, 0, online.Size())
	for _, id := range online.List() {
		raw, err := readCPU(r, id)
		if err != nil {
			return nil, err
		}
		raws = append(raws, raw)
	}
	nodeOf, distances, err := readNodes(r, online)
	if err != nil {
		return nil, err
	}
	cpus, err := machineWideIDs(r, raws, online, nodeOf)
	if err != nil {
		return nil, err
	}
	for i := range cpus {
		cpus[i].Isolated = isolated.Contains(cpus[i].ID)
	}
	return NewTopology(cpus, distances)
}

func readCPU(r sysfsReader, id int) (rawCPU, error) {
	dir := fmt.Sprintf("%s/cpu%d/topology/", cpuDir, id)
	raw := rawCPU{id: id}
	var err error
	if raw.pkg, err = r.ReadInt(dir + "physical_package_id"); err != nil {
		return raw, err
	}
	if raw.pkg < 0 {
		return raw, fmt.Errorf("%s: negative package id %d", r.Name(dir+"physical_package_id"), raw.pkg)
	}
	if raw.core, err = r.ReadInt(dir + "core_id"); err != nil {
		return raw, err
	}
	// die_id appeared in Linux 5.2 and is -1 where the platform has no
	// dies; either way the die is the package.
	raw.die = -1
	if r.Exists(dir + "die_id") {
		if raw.die, err = r.ReadInt(dir + "die_id"); err != nil {
			return raw, err
		}
	}
	// core_cpus_list replaced thread_siblings_list in Linux 5.3.
	raw.siblingsFile = dir + "core_cpus_list"
	if !r.Exists(raw.siblingsFile) {
		raw.siblingsFile = dir + "thread_siblings_list"
	}
	if raw.siblings, err = r.readList(raw.siblingsFile); err != nil {
		return raw, err
	}
	raw.cacheKey, err = readL3Key(r, id, raw.pkg)
	return raw, err
}

var indexDir = regexp.MustCompile(`^index[0-9]+$`)

// readL3Key returns a key that is equal for CPUs sharing an L3 cache: the
// package and the cache id, or its shared_cpu_list where the kernel gives
// no id. It is "" for a CPU without an L3.
func readL3Key(r sysfsReader, id, pkg int) (string, error) {
	dir := fmt.Sprintf("%s/cpu%d/cache", cpuDir, id)
	entries, err := fs.ReadDir(r.FS, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", r.Name(dir), sysfs.Pathless(err))
	}
	for _, e := range entries {
		if !indexDir.MatchString(e.Name()) {
			continue
		}
		idx := path.Join(dir, e.Name())
		level, err := r.ReadInt(idx + "/level")
		if err != nil {
			return "", err
		}
		kind, err := r.Read(idx + "/type")
		if err != nil {
			return "", err
		}
		if level != 3 || kind != "Unified" {
			continue
		}
		if r.Exists(idx + "/id") {
			cacheID, err := r.ReadInt(idx + "/id")
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("package %d id %d", pkg, cacheID), nil
		}
		shared, err := r.readList(idx + "/shared_cpu_list")
		if err != nil {
			return "", err
		}
		return "cpus " + shared.String(), nil
	}
	return "", nil
}

var nodeDirName = regexp.MustCompile(`^node([0-9]+)$`)

// readNodes maps every online CPU to its NUMA node and reads the distance
// matrix. Without node directories the machine is one node, 0.
func readNodes(r sysfsReader, online cpuset.CPUSet) (map[int]int, map[int]map[int]int, error) {
	entries, err := fs.ReadDir(r.FS, nodeDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("read %s: %w", r.Name(nodeDir), sysfs.Pathless(err))
	}
	var nodes []int
	for _, e := range entries {
		if m := nodeDirName.FindStringSubmatch(e.Name()); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil || n >= maxNUMANodes {
				return nil, nil, fmt.Errorf("%s: NUMA node ids must be below %d", r.Name(nodeDir+"/"+e.Name()), maxNUMANodes)
			}
			nodes = append(nodes, n)
		}
	}
	nodeOf := make(map[int]int, online.Size())
	if len(nodes) == 0 {
		for _, id := range online.UnsortedList() {
			nodeOf[id] = 0
		}
		return nodeOf, map[int]map[int]int{0: {0: 10}}, nil
	}
	sort.Ints(nodes)
	distances := make(map[int]map[int]int, len(nodes))
	for _, n := range nodes {
		dir := fmt.Sprintf("%s/node%d/", nodeDir, n)
		cpus, err := r.readList(dir + "cpulist")
		if err != nil {
			return nil, nil, err
		}
		for _, id := range cpus.Intersection(online).UnsortedList() {
			if other, ok := nodeOf[id]; ok {
				return nil, nil, fmt.Errorf("%s: cpu %d is also in NUMA node %d", r.Name(dir+"cpulist"), id, other)
			}
			nodeOf[id] = n
		}
		row, err := r.Read(dir + "distance")
		if err != nil {
			return nil, nil, err
		}
		fields := strings.Fields(row)
		if len(fields) != len(nodes) {
			return nil, nil, fmt.Errorf("%s: %d distances for %d NUMA nodes in %q", r.Name(dir+"distance"), len(fields), len(nodes), row)
		}
		distances[n] = make(map[int]int, len(nodes))
		for i, f := range fields {
			d, err := strconv.Atoi(f)
			if err != nil || d <= 0 {
				return nil, nil, fmt.Errorf("%s: malformed distance %q", r.Name(dir+"distance"), f)
			}
			distances[n][nodes[i]] = d
		}
	}
	for _, id := range online.List() {
		if _, ok := nodeOf[id]; !ok {
			return nil, nil, fmt.Errorf("cpu %d is online but in no %s", id, r.Name(nodeDir+"/node*/cpulist"))
		}
	}
	return nodeOf, distances, nil
}

// machineWideIDs turns per-package core and die ids and cache keys into
// machine-wide ids, numbered in the order of each group's lowest CPU, and
// checks that the sibling lists agree with the core ids.
func machineWideIDs(r sysfsReader, raws []rawCPU, online cpuset.CPUSet, nodeOf map[int]int) ([]CPUInfo, error) {
	type coreKey struct{ pkg, die, core int }
	type dieKey struct{ pkg, die int }
	coreIDs, dieIDs, cacheIDs := map[coreKey]int{}, map[dieKey]int{}, map[string]int{}
	coreMembers := map[coreKey][]int{}
	cpus := make([]CPUInfo, 0, len(raws))
	// raws are ordered by CPU id, so first-seen order is lowest-CPU order.
	for _, raw := range raws {
		ck := coreKey{raw.pkg, raw.die, raw.core}
		if _, ok := coreIDs[ck]; !ok {
			coreIDs[ck] = len(coreIDs)
		}
		coreMembers[ck] = append(coreMembers[ck], raw.id)
		dk := dieKey{raw.pkg, raw.die}
		if _, ok := dieIDs[dk]; !ok {
			dieIDs[dk] = len(dieIDs)
		}
		key := raw.cacheKey
		if key == "" {
			key = fmt.Sprintf("package %d without L3", raw.pkg)
		}
		if _, ok := cacheIDs[key]; !ok {
			cacheIDs[key] = len(cacheIDs)
		}
		cpus = append(cpus, CPUInfo{
			ID:          raw.id,
			Core:        coreIDs[ck],
			Socket:      raw.pkg,
			Die:         dieIDs[dk],
			NUMANode:    nodeOf[raw.id],
			UncoreCache: cacheIDs[key],
		})
	}
	for _, raw := range raws {
		members := cpuset.New(coreMembers[coreKey{raw.pkg, raw.die, raw.core}]...)
		if listed := raw.siblings.Intersection(online); !listed.Equals(members) {
			return nil, fmt.Errorf("%s lists CPUs %s but the CPUs with the same package, die and core_id are %s",
				r.Name(raw.siblingsFile), listed, members)
		}
	}
	return cpus, nil
}
