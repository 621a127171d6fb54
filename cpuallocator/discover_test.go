package cpuallocator_test

import (
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"k8s.io/utils/cpuset"
)

// checkDiscovered compares a discovered topology with the machine its tree
// was written from.
func checkDiscovered(t *testing.T, topo *cpuallocator.Topology, m fakesysfs.Machine) {
	t.Helper()
	offline := cpuset.New(m.Offline...)
	var usable []fakesysfs.CPU
	for _, c := range m.CPUs {
		if !offline.Contains(c.ID) {
			usable = append(usable, c)
		}
	}
	var ids []int
	for _, c := range usable {
		ids = append(ids, c.ID)
	}
	if got, want := topo.CPUs(), cpuset.New(ids...); !got.Equals(want) {
		t.Fatalf("CPUs() = %s, want %s", got, want)
	}
	// Isolated CPUs are in the topology, marked; offline ones are not,
	// even when isolcpus names them.
	isolated := cpuset.New(m.Isolated...).Difference(offline)
	if got := topo.Isolated(); !got.Equals(isolated) {
		t.Errorf("Isolated() = %s, want %s", got, isolated)
	}
	for _, c := range usable {
		if info, _ := topo.CPU(c.ID); info.Isolated != isolated.Contains(c.ID) {
			t.Errorf("CPU(%d).Isolated = %v, want %v", c.ID, info.Isolated, isolated.Contains(c.ID))
		}
	}
	nodeOf := func(c fakesysfs.CPU) int {
		if m.Quirks.OmitNodeDirs {
			return 0
		}
		return c.Node
	}
	sameCore := func(a, b fakesysfs.CPU) bool { return a.Socket == b.Socket && a.Die == b.Die && a.Core == b.Core }
	sameDie := func(a, b fakesysfs.CPU) bool { return a.Socket == b.Socket && (a.Die == b.Die || m.Quirks.OmitDieID) }
	sameL3 := func(a, b fakesysfs.CPU) bool { return a.Socket == b.Socket && a.L3 == b.L3 }
	coreSize := map[int]int{}
	sockets, nodes := map[int]bool{}, map[int]bool{}
	for _, a := range usable {
		ia, ok := topo.CPU(a.ID)
		if !ok {
			t.Fatalf("CPU(%d) not found", a.ID)
		}
		if ia.ID != a.ID || ia.Socket != a.Socket || ia.NUMANode != nodeOf(a) {
			t.Errorf("CPU(%d) = %+v, want socket %d, node %d", a.ID, ia, a.Socket, nodeOf(a))
		}
		coreSize[ia.Core]++
		sockets[a.Socket] = true
		nodes[nodeOf(a)] = true
		var siblings []int
		for _, b := range usable {
			ib, _ := topo.CPU(b.ID)
			if got, want := ia.Core == ib.Core, sameCore(a, b); got != want {
				t.Errorf("cpus %d and %d: same core = %v, want %v", a.ID, b.ID, got, want)
			}
			if got, want := ia.Die == ib.Die, sameDie(a, b); got != want {
				t.Errorf("cpus %d and %d: same die = %v, want %v", a.ID, b.ID, got, want)
			}
			if got, want := ia.UncoreCache == ib.UncoreCache, sameL3(a, b); got != want {
				t.Errorf("cpus %d and %d: same uncore cache = %v, want %v", a.ID, b.ID, got, want)
			}
			if sameCore(a, b) {
				siblings = append(siblings, b.ID)
			}
		}
		if got, want := topo.CoreSiblings(a.ID), cpuset.New(siblings...); !got.Equals(want) {
			t.Errorf("CoreSiblings(%d) = %s, want %s", a.ID, got, want)
		}
	}
	// Machine-wide core ids are 0..n-1, numbered by each core's lowest CPU.
	lastCore := -1
	for _, id := range topo.CPUs().List() {
		c, _ := topo.CPU(id)
		if c.Core > lastCore+1 {
			t.Errorf("cpu %d has core id %d after core %d: ids not dense in CPU order", id, c.Core, lastCore)
		}
		lastCore = max(lastCore, c.Core)
	}
	threads := 0
	for _, n := range coreSize {
		threads = max(threads, n)
	}
	if got := topo.ThreadsPerCore(); got != threads {
		t.Errorf("ThreadsPerCore() = %d, want %d", got, threads)
	}
	if got, want := topo.Sockets(), sortedKeys(sockets); !reflect.DeepEqual(got, want) {
		t.Errorf("Sockets() = %v, want %v", got, want)
	}
	if got, want := topo.NUMANodes(), sortedKeys(nodes); !reflect.DeepEqual(got, want) {
		t.Errorf("NUMANodes() = %v, want %v", got, want)
	}
	for _, a := range topo.NUMANodes() {
		for _, b := range topo.NUMANodes() {
			want := 10
			if !m.Quirks.OmitNodeDirs {
				want = m.Distances[a][b]
			}
			if got := topo.Distance(a, b); got != want {
				t.Errorf("Distance(%d, %d) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func sortedKeys(m map[int]bool) []int {
	return cpuset.New(keys(m)...).List()
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// shuffled renumbers the CPUs of m in a random order, as some firmware
// does, to check that nothing depends on regular numbering.
func shuffled(m fakesysfs.Machine, seed int64) fakesysfs.Machine {
	r := rand.New(rand.NewSource(seed))
	perm := r.Perm(len(m.CPUs))
	out := m
	out.CPUs = make([]fakesysfs.CPU, len(m.CPUs))
	for i, c := range m.CPUs {
		c.ID = perm[i]
		out.CPUs[i] = c
	}
	return out
}

func TestDiscover(t *testing.T) {
	machine := func(spec fakesysfs.Spec) fakesysfs.Machine {
		m, err := spec.Machine()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	layout := func(name string) fakesysfs.Machine {
		m, err := fakesysfs.Layout(name)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	smt2 := fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 3, ThreadsPerCore: 2, L3PerNUMA: 1}
	with := func(s fakesysfs.Spec, change func(*fakesysfs.Spec)) fakesysfs.Spec {
		change(&s)
		return s
	}
	tests := []struct {
		name string
		m    fakesysfs.Machine
		// onDisk writes the tree to a directory and uses Discover, as in
		// production; the others use an in-memory tree and DiscoverFS.
		onDisk bool
	}{
		{"KEP-5554 use-case machine", machine(fakesysfs.KEP5554UseCases()), true},
		{"KEP-5554 checkpoint machine", machine(fakesysfs.KEP5554Checkpoint()), false},
		{"siblings adjacent", machine(smt2), false},
		{"siblings offset", machine(with(smt2, func(s *fakesysfs.Spec) { s.Numbering = fakesysfs.SiblingsOffset })), false},
		{"4 threads per core", machine(fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4, ThreadsPerCore: 4, Numbering: fakesysfs.SiblingsOffset}), false},
		{"dies", machine(with(smt2, func(s *fakesysfs.Spec) { s.DiesPerSocket = 3 })), false},
		{"L3 groups per node", machine(with(smt2, func(s *fakesysfs.Spec) { s.L3PerNUMA = 3 })), false},
		{"no L3", machine(with(smt2, func(s *fakesysfs.Spec) { s.NoL3 = true })), false},
		{"offline and isolated CPUs", machine(with(smt2, func(s *fakesysfs.Spec) { s.Offline = []int{1, 7}; s.Isolated = []int{2, 3, 7, 20} })), false},
		{"isolcpus=2-N", machine(with(smt2, func(s *fakesysfs.Spec) { s.Isolated = seq(2, smt2.NumCPUs()-1) })), true},
		{"every CPU isolated", machine(with(smt2, func(s *fakesysfs.Spec) { s.Isolated = seq(0, smt2.NumCPUs()-1) })), false},
		{"no die_id", machine(with(smt2, func(s *fakesysfs.Spec) { s.DiesPerSocket = 1; s.Quirks.OmitDieID = true })), false},
		{"no cache id", machine(with(smt2, func(s *fakesysfs.Spec) { s.L3PerNUMA = 3; s.Quirks.OmitCacheID = true })), false},
		{"no node dirs", machine(with(fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4, ThreadsPerCore: 2}, func(s *fakesysfs.Spec) { s.Quirks.OmitNodeDirs = true })), false},
		{"no core_cpus_list", machine(with(smt2, func(s *fakesysfs.Spec) { s.Quirks.OmitCoreCPUsList = true })), false},
		{"only L3 cache dirs", machine(with(smt2, func(s *fakesysfs.Spec) { s.Quirks.OmitL1L2 = true })), false},
		{"explicit distances", machine(with(smt2, func(s *fakesysfs.Spec) {
			s.Distances = [][]int{{10, 12, 30, 31}, {12, 10, 32, 33}, {30, 32, 10, 14}, {31, 33, 14, 10}}
		})), false},
		{"Intel Xeon SNC-2 layout", layout("intel-xeon-gold-6338-snc2"), false},
		{"AMD EPYC NPS2 layout", layout("amd-epyc-7313-2s-nps2"), true},
		{"shuffled AMD EPYC layout", shuffled(layout("amd-epyc-7313-2s-nps2"), 1), false},
		{"shuffled generated machine", shuffled(machine(with(smt2, func(s *fakesysfs.Spec) { s.L3PerNUMA = 3 })), 2), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var topo *cpuallocator.Topology
			if tc.onDisk {
				root := t.TempDir()
				if err := fakesysfs.Write(root, tc.m); err != nil {
					t.Fatal(err)
				}
				var err error
				if topo, err = cpuallocator.Discover(root); err != nil {
					t.Fatal(err)
				}
			} else {
				topo = topologyOfMachine(t, tc.m)
			}
			checkDiscovered(t, topo, tc.m)
		})
	}
}

func TestDiscoverLayoutShapes(t *testing.T) {
	tests := []struct {
		layout           string
		nodes, caches    int
		siblingsOf       int
		siblings         string
		node1, cache0CPU string
	}{
		{layout: "intel-xeon-gold-6338-snc2", nodes: 4, caches: 2, siblingsOf: 5, siblings: "5,69", node1: "16-31,80-95"},
		{layout: "amd-epyc-7313-2s-nps2", nodes: 4, caches: 8, siblingsOf: 33, siblings: "1,33", node1: "8-15,40-47"},
	}
	for _, tc := range tests {
		t.Run(tc.layout, func(t *testing.T) {
			m, err := fakesysfs.Layout(tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			topo := topologyOfMachine(t, m)
			caches := map[int]bool{}
			for _, id := range topo.CPUs().List() {
				c, _ := topo.CPU(id)
				caches[c.UncoreCache] = true
			}
			if len(topo.NUMANodes()) != tc.nodes || len(caches) != tc.caches {
				t.Errorf("got %d nodes and %d uncore caches, want %d and %d", len(topo.NUMANodes()), len(caches), tc.nodes, tc.caches)
			}
			if got := topo.CoreSiblings(tc.siblingsOf); !got.Equals(cpus(t, tc.siblings)) {
				t.Errorf("CoreSiblings(%d) = %s, want %s", tc.siblingsOf, got, tc.siblings)
			}
			if got := topo.CPUsInNUMANodes(cpuallocator.NewNodeMask(1)); !got.Equals(cpus(t, tc.node1)) {
				t.Errorf("CPUsInNUMANodes(1) = %s, want %s", got, tc.node1)
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	const cpu = "devices/system/cpu"
	const node = "devices/system/node"
	tests := []struct {
		name string
		// change edits the tree of the KEP-5554 use-case machine.
		change func(*fakesysfs.MemFS)
		// file is the path the error must name; text is another part of
		// the message ("": the file is missing, fs.ErrNotExist).
		file, text string
	}{
		{"online missing", remove(cpu + "/online"), cpu + "/online", ""},
		{"online malformed", write(cpu+"/online", "0-x"), cpu + "/online", "malformed CPU list"},
		{"isolated malformed", write(cpu+"/isolated", "zz"), cpu + "/isolated", "malformed CPU list"},
		{"no online CPU", write(cpu+"/online", ""), cpu + "/online", "no online CPU"},
		{"package id missing", remove(cpu + "/cpu3/topology/physical_package_id"), cpu + "/cpu3/topology/physical_package_id", ""},
		{"package id negative", write(cpu+"/cpu3/topology/physical_package_id", "-1"), cpu + "/cpu3/topology/physical_package_id", "negative"},
		{"core id missing", remove(cpu + "/cpu4/topology/core_id"), cpu + "/cpu4/topology/core_id", ""},
		{"core id malformed", write(cpu+"/cpu4/topology/core_id", "four"), cpu + "/cpu4/topology/core_id", "malformed integer"},
		{"die id malformed", write(cpu+"/cpu4/topology/die_id", ""), cpu + "/cpu4/topology/die_id", "malformed integer"},
		{"no sibling list", func(fsys *fakesysfs.MemFS) {
			remove(cpu + "/cpu5/topology/core_cpus_list")(fsys)
			remove(cpu + "/cpu5/topology/thread_siblings_list")(fsys)
		}, cpu + "/cpu5/topology/thread_siblings_list", ""},
		{"sibling list disagrees with core ids", write(cpu+"/cpu0/topology/core_cpus_list", "0,2"), cpu + "/cpu0/topology/core_cpus_list", "same package, die and core_id"},
		{"cache level malformed", write(cpu+"/cpu2/cache/index3/level", "L3"), cpu + "/cpu2/cache/index3/level", "malformed integer"},
		{"cache type missing", remove(cpu + "/cpu2/cache/index1/type"), cpu + "/cpu2/cache/index1/type", ""},
		{"cache id malformed", write(cpu+"/cpu2/cache/index3/id", "x"), cpu + "/cpu2/cache/index3/id", "malformed integer"},
		{"node cpulist missing", remove(node + "/node1/cpulist"), node + "/node1/cpulist", ""},
		{"node cpulist malformed", write(node+"/node1/cpulist", "6-"), node + "/node1/cpulist", "malformed CPU list"},
		{"CPU in two nodes", write(node+"/node1/cpulist", "5-11"), node + "/node1/cpulist", "also in NUMA node 0"},
		{"CPU in no node", write(node+"/node1/cpulist", "6-10"), node + "/node*/cpulist", "cpu 11"},
		{"distance missing", remove(node + "/node0/distance"), node + "/node0/distance", ""},
		{"distance row too short", write(node+"/node0/distance", "10"), node + "/node0/distance", "1 distances for 2 NUMA nodes"},
		{"distance malformed", write(node+"/node0/distance", "10 x"), node + "/node0/distance", "malformed distance"},
		{"node id too large", write(node+"/node64/cpulist", ""), node + "/node64", "below 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, err := fakesysfs.GenerateFS(fakesysfs.KEP5554UseCases())
			if err != nil {
				t.Fatal(err)
			}
			tc.change(fsys)
			_, err = cpuallocator.DiscoverFS(fsys)
			if err == nil {
				t.Fatal("DiscoverFS succeeded")
			}
			if !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error %q does not name %s", err, tc.file)
			}
			if tc.text == "" && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %q is not fs.ErrNotExist", err)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not say %q", err, tc.text)
			}
		})
	}
}

func remove(rel string) func(*fakesysfs.MemFS) {
	return func(fsys *fakesysfs.MemFS) { fsys.Remove(rel) }
}

func write(rel, content string) func(*fakesysfs.MemFS) {
	return func(fsys *fakesysfs.MemFS) { fsys.WriteFile(rel, content+"\n") }
}

func TestDiscoverErrorNamesFileUnderRoot(t *testing.T) {
	root := t.TempDir()
	if err := fakesysfs.Generate(root, fakesysfs.KEP5554UseCases()); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "devices/system/cpu/cpu7/topology/core_id")
	if err := os.WriteFile(file, []byte("seven\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := cpuallocator.Discover(root)
	if want := file + `: malformed integer "seven"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error containing %q", err, want)
	}
}
