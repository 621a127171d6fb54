package placement

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// deviceReserved is the reserved CPU of both sides (reservedSystemCPUs,
// the plugin's reservedCPUs): it keeps the plugin's shared pool non-empty
// whatever the free CPUs are, and is never free.
var deviceReserved = cpuset.New(0)

// deviceCase is one admission both sides decide.
type deviceCase struct {
	policy  string
	free    cpuset.CPUSet
	n       int
	devices cpuallocator.NodeMask
}

func (c deviceCase) String() string {
	return fmt.Sprintf("%s, %d CPUs, devices on NUMA node(s) %s, free %s", c.policy, c.n, c.devices, c.free)
}

// deviceOutcome is how the two sides' admissions compare.
type deviceOutcome struct {
	kube, ours Admission
	// onD tell whether each side's CPUs are all on the devices' nodes.
	kubeOnD, oursOnD bool
	// nodes are the NUMA nodes of each side's CPUs.
	kubeNodes, oursNodes cpuallocator.NodeMask
	// problem is a disagreement the test fails on, expected one it
	// counts (the package comment lists them); at most one is set.
	problem, expected string
}

// The expected differences (the package comment says why).
const (
	expectedAffinity = "best-effort: the kubelet's merged affinity is not the devices' nodes"
	expectedNodes    = "best-effort: other NUMA nodes, no more of them"
)

// compareDevices has both sides admit c on machine m and compares them.
func compareDevices(m *Machine, kube *DeviceKubelet, ours *DevicePlugin, c deviceCase) (deviceOutcome, error) {
	var o deviceOutcome
	var err error
	if o.kube, err = kube.Admit(c.free, c.n, c.devices); err != nil {
		return o, fmt.Errorf("kubelet: %w", err)
	}
	if o.ours, err = ours.Admit(c.free, c.n, c.devices); err != nil {
		return o, fmt.Errorf("plugin: %w", err)
	}
	o.kubeNodes, o.oursNodes = m.NodesOf(o.kube.CPUs), m.NodesOf(o.ours.CPUs)
	o.kubeOnD = o.kube.Admitted && o.kubeNodes.IsSubsetOf(c.devices)
	o.oursOnD = o.ours.Admitted && o.oursNodes.IsSubsetOf(c.devices)
	bestEffort := c.policy == "best-effort"
	switch {
	case o.kube.Admitted != o.ours.Admitted:
		o.problem = "admission differs"
	case !o.kube.Admitted:
	case o.kubeOnD && !o.oursOnD:
		o.problem = "the kubelet's CPUs are on the devices' nodes, the plugin's not"
	case o.oursNodes.Count() > o.kubeNodes.Count():
		o.problem = "the plugin's CPUs span more NUMA nodes"
	case bestEffort && !sameNodes(o.kube.Affinity, c.devices):
		o.expected = expectedAffinity
	case bestEffort && o.kubeNodes != o.oursNodes:
		o.expected = expectedNodes
	case o.kubeNodes != o.oursNodes:
		o.problem = "the sides use other NUMA nodes"
	}
	return o, nil
}

// sameNodes tells whether a kubelet's NUMA affinity is nodes.
func sameNodes(affinity bitmask.BitMask, nodes cpuallocator.NodeMask) bool {
	return affinity != nil && cpuallocator.NewNodeMask(affinity.GetBits()...) == nodes
}

func describeDevices(m *Machine, c deviceCase, o deviceOutcome) string {
	return fmt.Sprintf("machine %s: %s: kubelet %s, plugin %s", m.Name, c, side(o.kube, o.kubeNodes), side(o.ours, o.oursNodes))
}

func side(a Admission, nodes cpuallocator.NodeMask) string {
	if !a.Admitted {
		return a.String()
	}
	return fmt.Sprintf("%s on NUMA nodes %s", a, nodes)
}

func mustParse(s string) cpuset.CPUSet {
	set, err := cpuset.Parse(s)
	if err != nil {
		panic(err)
	}
	return set
}

// twoNodes: CPUs 0-7 on node 0, 8-15 on node 1 (core k = {2k, 2k+1}).
var twoNodes = MachineSpec{Name: "16 1s×2n×4c×2t", Spec: fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 4, ThreadsPerCore: 2}}

// fourNodes: node k holds CPUs 8k to 8k+7; nodes 0-1 on socket 0, 2-3 on
// socket 1.
var fourNodes = MachineSpec{Name: "32 2s×2n×4c×2t", Spec: fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 4, ThreadsPerCore: 2}}

// TestAdmissionWithDevicesTable: hand-picked admissions of a container
// with devices, what each side does with it.
func TestAdmissionWithDevicesTable(t *testing.T) {
	klog.SetLogger(logr.Discard())
	nodes := cpuallocator.NewNodeMask
	none := cpuallocator.NodeMask(0)
	for _, tc := range []struct {
		name    string
		machine MachineSpec
		deviceCase
		// the NUMA nodes of each side's CPUs; 0: refused.
		kubelet, plugin cpuallocator.NodeMask
		expected        string
	}{
		{name: "single-numa-node: the devices' node", machine: twoNodes,
			deviceCase: deviceCase{"single-numa-node", mustParse("1-15"), 4, nodes(1)}, kubelet: nodes(1), plugin: nodes(1)},
		{name: "single-numa-node: the devices' node is full", machine: twoNodes,
			deviceCase: deviceCase{"single-numa-node", mustParse("1-10"), 4, nodes(1)}, kubelet: none, plugin: none},
		{name: "single-numa-node: more CPUs than a node, devices on both", machine: twoNodes,
			deviceCase: deviceCase{"single-numa-node", mustParse("1-15"), 10, nodes(0, 1)}, kubelet: none, plugin: none},
		{name: "restricted: devices on two nodes for CPUs that fit one", machine: twoNodes,
			deviceCase: deviceCase{"restricted", mustParse("1-15"), 4, nodes(0, 1)}, kubelet: none, plugin: none},
		{name: "restricted: more CPUs than a node, devices on both", machine: twoNodes,
			deviceCase: deviceCase{"restricted", mustParse("1-15"), 10, nodes(0, 1)}, kubelet: nodes(0, 1), plugin: nodes(0, 1)},
		{name: "restricted: the devices' node is full", machine: twoNodes,
			deviceCase: deviceCase{"restricted", mustParse("1-10"), 4, nodes(1)}, kubelet: none, plugin: none},
		{name: "best-effort: the devices' node first, the rest elsewhere", machine: twoNodes,
			deviceCase: deviceCase{"best-effort", mustParse("1-10"), 4, nodes(1)}, kubelet: nodes(0, 1), plugin: nodes(0, 1)},
		{name: "best-effort: devices on two nodes, CPUs on one of them", machine: twoNodes,
			deviceCase: deviceCase{"best-effort", mustParse("1-15"), 4, nodes(0, 1)}, kubelet: nodes(0), plugin: nodes(0)},
		{name: "best-effort: more CPUs than are free", machine: twoNodes,
			deviceCase: deviceCase{"best-effort", mustParse("1-15"), 16, nodes(1)}, kubelet: none, plugin: none},
		{name: "restricted: devices on two nodes of different sockets", machine: fourNodes,
			deviceCase: deviceCase{"restricted", mustParse("1-31"), 12, nodes(0, 3)}, kubelet: nodes(0, 3), plugin: nodes(0, 3)},
		{name: "single-numa-node: devices on two nodes of different sockets", machine: fourNodes,
			deviceCase: deviceCase{"single-numa-node", mustParse("1-31"), 12, nodes(0, 3)}, kubelet: none, plugin: none},
		{name: "best-effort: more CPUs than the devices' node", machine: fourNodes,
			deviceCase: deviceCase{"best-effort", mustParse("1-31"), 12, nodes(2)}, kubelet: nodes(2, 3), plugin: nodes(2, 3)},
		{name: "best-effort: the devices' node full, each side packs its own way", machine: fourNodes,
			deviceCase: deviceCase{"best-effort", mustParse("1-15,24-31"), 4, nodes(2)}, kubelet: nodes(3), plugin: nodes(0), expected: expectedNodes},
		{name: "best-effort: devices on two nodes, the kubelet packs into both", machine: fourNodes,
			deviceCase: deviceCase{"best-effort", mustParse("1-17,24-31"), 4, nodes(2, 3)}, kubelet: nodes(2, 3), plugin: nodes(3), expected: expectedNodes},
		{name: "best-effort: the devices' node full, the rest elsewhere", machine: fourNodes,
			deviceCase: deviceCase{"best-effort", mustParse("1-19,21-22,24-26,28,30"), 6, nodes(3)}, kubelet: nodes(2, 3), plugin: nodes(2, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMachine(tc.machine)
			if err != nil {
				t.Fatal(err)
			}
			kube, err := NewDeviceKubelet(m, tc.policy, deviceReserved)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := NewDevicePlugin(m, tc.policy, deviceReserved)
			if err != nil {
				t.Fatal(err)
			}
			o, err := compareDevices(m, kube, ours, tc.deviceCase)
			if err != nil {
				t.Fatal(err)
			}
			if o.kubeNodes != tc.kubelet || o.oursNodes != tc.plugin {
				t.Errorf("%s; want the kubelet on NUMA nodes %q, the plugin on %q (\"\": refused)", describeDevices(m, tc.deviceCase, o), tc.kubelet, tc.plugin)
			}
			if o.problem != "" {
				t.Errorf("%s: %s", o.problem, describeDevices(m, tc.deviceCase, o))
			}
			if o.expected != tc.expected {
				t.Errorf("expected difference %q, want %q", o.expected, tc.expected)
			}
		})
	}
}

// The random comparison's size: machines per run, states per machine,
// each state decided under every topology manager policy.
const (
	deviceMachines = 60
	deviceStates   = 40
)

// deviceSeed is the seed of the random comparison: PLACEMENT_SEED, or 1.
func deviceSeed(t *testing.T) uint64 {
	s := os.Getenv("PLACEMENT_SEED")
	if s == "" {
		return 1
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("PLACEMENT_SEED=%q: %v", s, err)
	}
	return n
}

// deviceTally counts the outcomes under one topology manager policy.
type deviceTally struct {
	cases, bothRefused, bothAdmitted int
	disagree                         int
	// on the devices' nodes: both sides, the kubelet only, the plugin
	// only, neither (of the cases both admit).
	onBoth, onKubelet, onPlugin, onNeither int
	// the NUMA nodes used: the same ones, as many others, fewer, more.
	sameNodes, otherNodes, fewerNodes, moreNodes int
	// expected counts the expected differences by kind.
	expected map[string]int
}

func (tl *deviceTally) add(o deviceOutcome) {
	tl.cases++
	switch {
	case o.kube.Admitted != o.ours.Admitted:
		tl.disagree++
		return
	case !o.kube.Admitted:
		tl.bothRefused++
		return
	}
	tl.bothAdmitted++
	switch {
	case o.kubeOnD && o.oursOnD:
		tl.onBoth++
	case o.kubeOnD:
		tl.onKubelet++
	case o.oursOnD:
		tl.onPlugin++
	default:
		tl.onNeither++
	}
	switch kc, oc := o.kubeNodes.Count(), o.oursNodes.Count(); {
	case o.kubeNodes == o.oursNodes:
		tl.sameNodes++
	case oc == kc:
		tl.otherNodes++
	case oc < kc:
		tl.fewerNodes++
	default:
		tl.moreNodes++
	}
	if o.expected != "" {
		tl.expected[o.expected]++
	}
}

// TestAdmissionWithDevicesMatchesKubelet has the kubelet (topology manager
// with the static CPU manager policy and a device provider) and the
// plugin's policy admit a container with devices on random machines and
// free CPUs under each topology manager policy, and compares them (the
// package comment says what). PLACEMENT_SEED=n chooses the seed.
func TestAdmissionWithDevicesMatchesKubelet(t *testing.T) {
	klog.SetLogger(logr.Discard())
	seed := deviceSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x64657669636573))
	start := time.Now()
	tallies := map[string]*deviceTally{}
	for _, p := range TopologyPolicies {
		tallies[p] = &deviceTally{expected: map[string]int{}}
	}
	for range deviceMachines {
		ms := randomDeviceMachine(rng)
		m, err := NewMachine(ms)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		kubes, ours := map[string]*DeviceKubelet{}, map[string]*DevicePlugin{}
		for _, p := range TopologyPolicies {
			if kubes[p], err = NewDeviceKubelet(m, p, deviceReserved); err != nil {
				t.Fatal(err)
			}
			if ours[p], err = NewDevicePlugin(m, p, deviceReserved); err != nil {
				t.Fatal(err)
			}
		}
		for range deviceStates {
			free, n, devices := randomDeviceState(rng, m)
			if n == 0 {
				continue
			}
			for _, p := range TopologyPolicies {
				c := deviceCase{policy: p, free: free, n: n, devices: devices}
				o, err := compareDevices(m, kubes[p], ours[p], c)
				if err != nil {
					t.Fatalf("seed %d: machine %s: %s: %v", seed, m.Name, c, err)
				}
				tallies[p].add(o)
				if o.problem != "" {
					t.Errorf("seed %d: %s: %s", seed, o.problem, describeDevices(m, c, o))
				}
			}
		}
	}
	elapsed := time.Since(start)
	var report strings.Builder
	fmt.Fprintf(&report, "\nseed %d (PLACEMENT_SEED=n for another), %d machines × %d states × %d policies in %s\n",
		seed, deviceMachines, deviceStates, len(TopologyPolicies), elapsed.Round(time.Millisecond))
	report.WriteString("\n| policy | cases | both refused | both admitted | admission differs | on devices' nodes: both / kubelet only / plugin only / neither | NUMA nodes: same / others, as many / plugin fewer / plugin more | expected differences: affinity / NUMA nodes |\n|---|---|---|---|---|---|---|---|\n")
	for _, p := range TopologyPolicies {
		tl := tallies[p]
		fmt.Fprintf(&report, "| %s | %d | %d | %d | %d | %d / %d / %d / %d | %d / %d / %d / %d | %d / %d |\n",
			p, tl.cases, tl.bothRefused, tl.bothAdmitted, tl.disagree,
			tl.onBoth, tl.onKubelet, tl.onPlugin, tl.onNeither,
			tl.sameNodes, tl.otherNodes, tl.fewerNodes, tl.moreNodes,
			tl.expected[expectedAffinity], tl.expected[expectedNodes])
	}
	t.Log(report.String())
}

// randomDeviceMachine returns a random fixture machine of two or four
// NUMA nodes: a regular one or one of the real layouts. None has CPUs
// offline: the kubelet's static policy counts the threads per core as
// online CPUs ÷ cores, 1 when some siblings are offline, and then takes
// a core with one free thread whole (takeFullCores), handing out CPUs
// that are not free.
func randomDeviceMachine(rng *rand.Rand) MachineSpec {
	switch rng.IntN(10) {
	case 0:
		return MachineSpec{Name: "64 EPYC-7313 NPS2", Layout: "amd-epyc-7313-2s-nps2"}
	case 1:
		return MachineSpec{Name: "128 Xeon-6338 SNC2", Layout: "intel-xeon-gold-6338-snc2"}
	}
	nodes := []int{2, 4}[rng.IntN(2)]
	sockets := []int{1, 2}[rng.IntN(2)]
	if nodes == 4 {
		sockets = []int{1, 2, 4}[rng.IntN(3)]
	}
	s := fakesysfs.Spec{
		Sockets:        sockets,
		NUMAPerSocket:  nodes / sockets,
		CoresPerNUMA:   2 + rng.IntN(7),
		ThreadsPerCore: 1 + rng.IntN(2),
		Numbering:      fakesysfs.Numbering(rng.IntN(2)),
	}
	if s.CoresPerNUMA%2 == 0 && rng.IntN(2) == 0 {
		s.L3PerNUMA = 2
	}
	name := fmt.Sprintf("%d %ds×%dn×%dc×%dt", s.NumCPUs(), s.Sockets, s.NUMAPerSocket, s.CoresPerNUMA, s.ThreadsPerCore)
	if s.L3PerNUMA > 1 {
		name += fmt.Sprintf(" %dL3/n", s.L3PerNUMA)
	}
	if s.Numbering == fakesysfs.SiblingsOffset {
		name += " offset"
	}
	return MachineSpec{Name: name, Spec: s}
}

// randomDeviceState returns random free CPUs (each node filled to a
// random level: full, empty or between), a request of n CPUs — mostly
// within a node, often up to two nodes, sometimes any number that is free
// (0 when none is), now and then more than are free — and the NUMA nodes
// of the devices: one node, sometimes two.
func randomDeviceState(rng *rand.Rand, m *Machine) (cpuset.CPUSet, int, cpuallocator.NodeMask) {
	nodes := m.Ours.NUMANodes()
	var free []int
	nodeSize := 0
	for _, node := range nodes {
		cpus := m.Ours.CPUsInNUMANodes(cpuallocator.NewNodeMask(node))
		nodeSize = max(nodeSize, cpus.Size())
		level := []float64{0, 0.3, 0.6, 0.9, 1}[rng.IntN(5)]
		for _, id := range cpus.Difference(deviceReserved).List() {
			if rng.Float64() < level {
				free = append(free, id)
			}
		}
	}
	var n int
	switch r := rng.IntN(20); {
	case r < 12:
		n = min(1+rng.IntN(nodeSize), len(free))
	case r < 18:
		n = min(nodeSize+1+rng.IntN(nodeSize), len(free))
	case r < 19:
		n = min(1+rng.IntN(max(len(free), 1)), len(free))
	default:
		n = len(free) + 1 + rng.IntN(4) // more than are free
	}
	devices := cpuallocator.NewNodeMask(nodes[rng.IntN(len(nodes))])
	if rng.IntN(4) == 0 {
		devices = devices.Union(cpuallocator.NewNodeMask(nodes[rng.IntN(len(nodes))]))
	}
	return cpuset.New(free...), n, devices
}
