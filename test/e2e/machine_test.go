//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"testing"

	"k8s.io/utils/cpuset"
)

// sysCPU is where the kernel describes the CPUs.
const sysCPU = "/sys/devices/system/cpu"

// machine is this machine's CPUs as the plugin sees them, read from sysfs
// (the plugin's default sysfsRoot), so that the scenarios derive the
// cpusets they expect instead of assuming a number of CPUs.
type machine struct {
	// cpus are the online CPUs, isolated ones included (the scenarios run
	// with isolatedCPUs: shared, the default): the CPUs the plugin
	// manages, and its shared pool while nothing is pinned.
	cpus cpuset.CPUSet
	// cores are the CPUs of cpus grouped by physical core, in the order of
	// each core's lowest CPU (the order the plugin numbers cores in).
	cores []cpuset.CPUSet
	// unpredictable says why the exclusive CPUs the plugin picks are not
	// predicted on this machine ("" when they are: one socket, one NUMA
	// node).
	unpredictable string
}

// readMachine reads the machine's CPU topology.
func readMachine(t *testing.T) *machine {
	t.Helper()
	m, err := newMachine()
	if err != nil {
		t.Fatalf("read the CPU topology: %v", err)
	}
	return m
}

func newMachine() (*machine, error) {
	online, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	m := &machine{cpus: online}
	if m.cpus.IsEmpty() {
		return nil, fmt.Errorf("no online CPU")
	}

	packages := map[int]bool{}
	seen := cpuset.New()
	for _, id := range m.cpus.List() {
		dir := filepath.Join(sysCPU, fmt.Sprintf("cpu%d", id), "topology")
		pkg, err := readInt(filepath.Join(dir, "physical_package_id"))
		if err != nil {
			return nil, err
		}
		packages[pkg] = true
		if seen.Contains(id) {
			continue
		}
		// core_cpus_list replaced thread_siblings_list in Linux 5.3.
		siblings, err := readList(filepath.Join(dir, "core_cpus_list"))
		if errors.Is(err, fs.ErrNotExist) {
			siblings, err = readList(filepath.Join(dir, "thread_siblings_list"))
		}
		if err != nil {
			return nil, err
		}
		core := siblings.Intersection(m.cpus).Union(cpuset.New(id))
		m.cores = append(m.cores, core)
		seen = seen.Union(core)
	}

	nodes, err := numaNodesOf(m.cpus)
	if err != nil {
		return nil, err
	}
	switch {
	case len(packages) > 1:
		m.unpredictable = fmt.Sprintf("%d sockets", len(packages))
	case nodes > 1:
		m.unpredictable = fmt.Sprintf("%d NUMA nodes", nodes)
	}
	return m, nil
}

// numaNodesOf counts the NUMA nodes holding CPUs of cpus; a kernel without
// NUMA nodes in sysfs has one.
func numaNodesOf(cpus cpuset.CPUSet) (int, error) {
	lists, err := filepath.Glob("/sys/devices/system/node/node[0-9]*/cpulist")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range lists {
		set, err := readList(l)
		if err != nil {
			return 0, err
		}
		if !set.Intersection(cpus).IsEmpty() {
			n++
		}
	}
	return max(n, 1), nil
}

// needCPUs skips the test when the machine has fewer than n CPUs for the
// plugin; what says what the scenario needs them for.
func (m *machine) needCPUs(t *testing.T, n int, what string) {
	t.Helper()
	if m.cpus.Size() < n {
		t.Skipf("this scenario needs at least %d CPUs (%s); this machine has %d (%s)", n, what, m.cpus.Size(), m.cpus)
	}
}

// firstCPU is the lowest CPU of the machine, the one the scenarios reserve
// for the system (CPU 0 on nearly every machine).
func (m *machine) firstCPU() cpuset.CPUSet { return cpuset.New(m.cpus.List()[0]) }

// oneExclusive predicts the CPU the plugin gives a new container asking
// for one exclusive CPU when the CPUs of available are free. On a machine
// with one socket and one NUMA node the packed order (the kubelet's) takes
// it from the core with the fewest free CPUs, the first such core in the
// order of their lowest CPU, and there its lowest free CPU: so a partly
// taken core is filled before a whole one is split. ok is false when the
// machine's topology makes the choice depend on more than that.
func (m *machine) oneExclusive(available cpuset.CPUSet) (cpu cpuset.CPUSet, ok bool) {
	if m.unpredictable != "" {
		return cpuset.New(), false
	}
	best := cpuset.New()
	for _, core := range m.cores {
		free := core.Intersection(available)
		if !free.IsEmpty() && (best.IsEmpty() || free.Size() < best.Size()) {
			best = free
		}
	}
	if best.IsEmpty() {
		return cpuset.New(), false
	}
	return cpuset.New(best.List()[0]), true
}

// onlineCPUs reads the machine's online CPUs.
func onlineCPUs() (cpuset.CPUSet, error) {
	return readList(filepath.Join(sysCPU, "online"))
}

func readList(path string) (cpuset.CPUSet, error) {
	data, err := readFile(path)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	set, err := cpuset.Parse(data)
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("parse CPU list %q of %s: %w", data, path, err)
	}
	return set, nil
}

func readInt(path string) (int, error) {
	data, err := readFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(data)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}
