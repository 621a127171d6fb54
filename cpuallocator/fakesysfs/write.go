package fakesysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/utils/cpuset"
)

// Write writes the sysfs files that describe m under root, as the kernel
// shows them in /sys: root/devices/system/cpu/... and
// root/devices/system/node/.... Offline CPUs get only cpuN/online (0); they
// are left out of every list of CPUs except offline, possible and present.
func Write(root string, m Machine) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("invalid machine: %w", err)
	}
	files := m.files()
	if err := writeFiles(root, files); err != nil {
		return fmt.Errorf("write sysfs tree under %s: %w", root, err)
	}
	return nil
}

// FS returns the tree Write would write for m, in memory, rooted where the
// sysfs root would be. Tests edit it to break files; benchmarks use it to
// set up very large machines without touching the disk.
func FS(m Machine) (*MemFS, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("invalid machine: %w", err)
	}
	fsys := NewMemFS()
	for p, content := range m.files() {
		fsys.WriteFile(filepath.ToSlash(p), content)
	}
	return fsys, nil
}

// fileSet maps a path relative to the sysfs root to its content.
type fileSet map[string]string

func (f fileSet) add(content string, path ...string) {
	f[filepath.Join(path...)] = content + "\n"
}

func (m Machine) files() fileSet {
	const cpuDir, nodeDir = "devices/system/cpu", "devices/system/node"
	cpus := m.sortedCPUs()
	offline := cpuset.New(m.Offline...)
	var present, online []int
	for _, c := range cpus {
		present = append(present, c.ID)
		if !offline.Contains(c.ID) {
			online = append(online, c.ID)
		}
	}
	onlineSet := cpuset.New(online...)

	// Lists of online CPUs per group, keyed the way the kernel derives each.
	type coreKey struct{ socket, die, core int }
	type dieKey struct{ socket, die int }
	type cacheKey struct{ socket, l3 int }
	coreList := groupLists(cpus, onlineSet, func(c CPU) (coreKey, bool) { return coreKey{c.Socket, c.Die, c.Core}, true })
	socketList := groupLists(cpus, onlineSet, func(c CPU) (int, bool) { return c.Socket, true })
	dieList := groupLists(cpus, onlineSet, func(c CPU) (dieKey, bool) { return dieKey{c.Socket, c.Die}, true })
	nodeList := groupLists(cpus, onlineSet, func(c CPU) (int, bool) { return c.Node, true })
	cacheList := groupLists(cpus, onlineSet, func(c CPU) (cacheKey, bool) { return cacheKey{c.Socket, c.L3}, c.L3 != NoL3 })
	list := func(ids []int) string { return cpuset.New(ids...).String() }

	f := fileSet{}
	f.add(list(online), cpuDir, "online")
	f.add(offline.String(), cpuDir, "offline")
	f.add(list(present), cpuDir, "possible")
	f.add(list(present), cpuDir, "present")
	f.add(cpuset.New(m.Isolated...).String(), cpuDir, "isolated")
	for _, c := range cpus {
		dir := filepath.Join(cpuDir, "cpu"+strconv.Itoa(c.ID))
		if !onlineSet.Contains(c.ID) {
			f.add("0", dir, "online")
			continue
		}
		f.add("1", dir, "online")
		siblings := coreList[coreKey{c.Socket, c.Die, c.Core}]
		topo := filepath.Join(dir, "topology")
		f.add(strconv.Itoa(c.Socket), topo, "physical_package_id")
		f.add(strconv.Itoa(c.Core), topo, "core_id")
		f.add(siblings, topo, "thread_siblings_list")
		f.add(socketList[c.Socket], topo, "core_siblings_list")
		if !m.Quirks.OmitDieID {
			f.add(strconv.Itoa(c.Die), topo, "die_id")
			f.add(dieList[dieKey{c.Socket, c.Die}], topo, "die_cpus_list")
		}
		if !m.Quirks.OmitCoreCPUsList {
			f.add(siblings, topo, "core_cpus_list")
			f.add(socketList[c.Socket], topo, "package_cpus_list")
		}
		cache := filepath.Join(dir, "cache")
		if !m.Quirks.OmitL1L2 {
			m.addCache(f, filepath.Join(cache, "index0"), 1, "Data", siblings, c.Core)
			m.addCache(f, filepath.Join(cache, "index1"), 1, "Instruction", siblings, c.Core)
			m.addCache(f, filepath.Join(cache, "index2"), 2, "Unified", siblings, c.Core)
		}
		if c.L3 != NoL3 {
			m.addCache(f, filepath.Join(cache, "index3"), 3, "Unified", cacheList[cacheKey{c.Socket, c.L3}], c.L3)
		}
	}

	if m.Quirks.OmitNodeDirs {
		return f
	}
	n := m.NumNodes()
	nodes := make([]int, n)
	for i := range nodes {
		nodes[i] = i
	}
	f.add(list(nodes), nodeDir, "online")
	f.add(list(nodes), nodeDir, "possible")
	var withCPUs []int
	for node := 0; node < n; node++ {
		dir := filepath.Join(nodeDir, "node"+strconv.Itoa(node))
		cpulist, ok := nodeList[node]
		if ok {
			withCPUs = append(withCPUs, node)
		}
		f.add(cpulist, dir, "cpulist")
		row := make([]string, n)
		for j := range row {
			row[j] = strconv.Itoa(m.distance(node, j))
		}
		f.add(strings.Join(row, " "), dir, "distance")
	}
	f.add(list(withCPUs), nodeDir, "has_cpu")
	return f
}

// groupLists returns, for every group key, the cpulist of the online CPUs
// in the group. keyOf says which group a CPU is in, if any.
func groupLists[K comparable](cpus []CPU, online cpuset.CPUSet, keyOf func(CPU) (K, bool)) map[K]string {
	members := map[K][]int{}
	for _, c := range cpus {
		if k, ok := keyOf(c); ok && online.Contains(c.ID) {
			members[k] = append(members[k], c.ID)
		}
	}
	lists := make(map[K]string, len(members))
	for k, ids := range members {
		lists[k] = cpuset.New(ids...).String()
	}
	return lists
}

func (m Machine) addCache(f fileSet, dir string, level int, kind, shared string, id int) {
	f.add(strconv.Itoa(level), dir, "level")
	f.add(kind, dir, "type")
	f.add(shared, dir, "shared_cpu_list")
	if !m.Quirks.OmitCacheID {
		f.add(strconv.Itoa(id), dir, "id")
	}
}

// writeFiles creates the directories, then writes the files with a few
// workers: a 4096-CPU tree has tens of thousands of files.
func writeFiles(root string, files fileSet) error {
	paths := make([]string, 0, len(files))
	dirs := map[string]bool{}
	for p := range files {
		paths = append(paths, p)
		dirs[filepath.Dir(p)] = true
	}
	sort.Strings(paths)
	for d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	workers := runtime.GOMAXPROCS(0) * 4
	work := make(chan string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if err := os.WriteFile(filepath.Join(root, p), []byte(files[p]), 0o644); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var firstErr error
send:
	for _, p := range paths {
		select {
		case work <- p:
		case firstErr = <-errs:
			break send
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if firstErr == nil {
		firstErr = <-errs
	}
	return firstErr
}
