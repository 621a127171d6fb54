package scenario

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// Topologies returns the machines the scenario's expectations hold on:
// its topology, then its machines.
func (f *File) Topologies() []Topology {
	return append([]Topology{f.Topology}, f.Machines...)
}

// Discover returns the topology the plugin reads from the machine's sysfs
// tree (written in memory).
func (t Topology) Discover() (*cpuallocator.Topology, error) {
	m, err := t.Machine()
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	fsys, err := fakesysfs.FS(m)
	if err != nil {
		return nil, err
	}
	return cpuallocator.DiscoverFS(fsys)
}

// Shape describes a topology as the policy sees it, one aspect a line:
// the online CPUs and the isolated ones, and how they group into
// sockets, NUMA nodes (with their ids and the distances between them),
// dies, uncore (L3) caches and cores. The ids the kernel gives cores, caches, dies
// and sockets are left out: the policy only groups CPUs by them. Two
// topologies of the same shape get the same decisions from the policy, so
// a scenario's expectations hold on every machine of its shape.
func Shape(t *cpuallocator.Topology) []string {
	cpus := t.CPUs()
	groups := func(key func(cpuallocator.CPUInfo) int) string {
		members := map[int][]int{}
		for _, id := range cpus.List() {
			c, _ := t.CPU(id)
			members[key(c)] = append(members[key(c)], id)
		}
		var sets []cpuset.CPUSet
		for _, ids := range members {
			sets = append(sets, cpuset.New(ids...))
		}
		slices.SortFunc(sets, func(a, b cpuset.CPUSet) int { return a.List()[0] - b.List()[0] })
		out := make([]string, len(sets))
		for i, s := range sets {
			out[i] = s.String()
		}
		return strings.Join(out, " ")
	}
	isolated := "none"
	if !t.Isolated().IsEmpty() {
		isolated = t.Isolated().String()
	}
	var nodes, distances []string
	for _, n := range t.NUMANodes() {
		nodes = append(nodes, fmt.Sprintf("%d: %s", n, t.CPUsInNUMANodes(cpuallocator.NewNodeMask(n))))
		var row []string
		for _, m := range t.NUMANodes() {
			row = append(row, fmt.Sprint(t.Distance(n, m)))
		}
		distances = append(distances, strings.Join(row, " "))
	}
	return []string{
		"CPUs: " + cpus.String(),
		"isolated CPUs: " + isolated,
		"sockets: " + groups(func(c cpuallocator.CPUInfo) int { return c.Socket }),
		"NUMA nodes: " + strings.Join(nodes, ", "),
		"NUMA distances: " + strings.Join(distances, " / "),
		"dies: " + groups(func(c cpuallocator.CPUInfo) int { return c.Die }),
		"uncore caches: " + groups(func(c cpuallocator.CPUInfo) int { return c.UncoreCache }),
		"cores: " + groups(func(c cpuallocator.CPUInfo) int { return c.Core }),
	}
}

// Match returns the scenario's machine (its topology or one of its
// machines) whose shape is real's. When none is, ok is false and why says
// how real differs from each, the first differing aspect of each.
func (f *File) Match(real *cpuallocator.Topology) (t Topology, ok bool, why string, err error) {
	have := Shape(real)
	var diffs []string
	for _, t := range f.Topologies() {
		topo, err := t.Discover()
		if err != nil {
			return Topology{}, false, "", err
		}
		want := Shape(topo)
		i := 0
		for i < len(want) && want[i] == have[i] {
			i++
		}
		if i == len(want) {
			return t, true, "", nil
		}
		aspect, _, _ := strings.Cut(want[i], ": ")
		diffs = append(diffs, fmt.Sprintf("%s (%s: %s; this machine's %s)", t, aspect,
			strings.TrimPrefix(want[i], aspect+": "), strings.TrimPrefix(have[i], aspect+": ")))
	}
	return Topology{}, false, fmt.Sprintf("this machine (%s) is none of the scenario's machines: %s",
		summary(real), strings.Join(diffs, "; ")), nil
}

// summary is a topology's counts, for messages.
func summary(t *cpuallocator.Topology) string {
	cores := map[int]bool{}
	for _, id := range t.CPUs().List() {
		c, _ := t.CPU(id)
		cores[c.Core] = true
	}
	return fmt.Sprintf("%s, %s, %s, %s of %s", count(t.CPUs().Size(), "CPU"), count(len(t.Sockets()), "socket"),
		count(len(t.NUMANodes()), "NUMA node"), count(len(cores), "core"), count(t.ThreadsPerCore(), "thread"))
}

// count writes n things, e.g. "1 socket", "2 sockets".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// String writes the topology as a scenario names it, e.g.
// "{sockets: 2, coresPerNUMA: 4, threadsPerCore: 2}".
func (t Topology) String() string {
	var fields []string
	add := func(key string, v any, set bool) {
		if set {
			fields = append(fields, fmt.Sprintf("%s: %v", key, v))
		}
	}
	add("kep", t.KEP, t.KEP != "")
	add("layout", t.Layout, t.Layout != "")
	add("sockets", t.Sockets, t.Sockets != 0)
	add("numaPerSocket", t.NUMAPerSocket, t.NUMAPerSocket != 0)
	add("coresPerNUMA", t.CoresPerNUMA, t.CoresPerNUMA != 0)
	add("threadsPerCore", t.ThreadsPerCore, t.ThreadsPerCore != 0)
	add("l3PerNUMA", t.L3PerNUMA, t.L3PerNUMA != 0)
	add("numbering", t.Numbering, t.Numbering != "")
	add("isolated", fmt.Sprintf("%q", t.Isolated), t.Isolated != "")
	var rows []string
	for _, row := range t.Distances {
		cols := make([]string, len(row))
		for i, d := range row {
			cols[i] = fmt.Sprint(d)
		}
		rows = append(rows, "["+strings.Join(cols, ", ")+"]")
	}
	add("distances", "["+strings.Join(rows, ", ")+"]", t.Distances != nil)
	return "{" + strings.Join(fields, ", ") + "}"
}
