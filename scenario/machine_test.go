package scenario

import (
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// discover reads a fakesysfs machine as the plugin would.
func discover(t *testing.T, m fakesysfs.Machine) *cpuallocator.Topology {
	t.Helper()
	fsys, err := fakesysfs.FS(m)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := cpuallocator.DiscoverFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func machine(t *testing.T, s fakesysfs.Spec) fakesysfs.Machine {
	t.Helper()
	m, err := s.Machine()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The VM suite's guest as QEMU gives it: 2 sockets of 4 cores with SMT 2,
// a NUMA node each at distance 20, and sysfs core ids that restart in
// each socket.
var guest = fakesysfs.Spec{Sockets: 2, CoresPerNUMA: 4, ThreadsPerCore: 2, Distances: [][]int{{10, 20}, {20, 10}}}

func TestMatchFindsTheMachineOfTheSameShape(t *testing.T) {
	f, err := Parse([]byte(`
name: m
topology: {sockets: 1, numaPerSocket: 2, coresPerNUMA: 4, threadsPerCore: 2}
machines:
- {sockets: 2, coresPerNUMA: 4, threadsPerCore: 2, distances: [[10, 20], [20, 10]]}
steps:
- create: {pod: p, container: c, cpu: "1"}
`))
	if err != nil {
		t.Fatal(err)
	}
	got, ok, why, err := f.Match(discover(t, machine(t, guest)))
	if err != nil || !ok {
		t.Fatalf("Match of the guest: %v %q %v, want its machine", ok, why, err)
	}
	if got.Sockets != 2 {
		t.Errorf("matched %s, want the 2-socket machine", got)
	}

	// The same machine with the default distances (21 between sockets)
	// is another shape: distances decide where a growth goes.
	other := guest
	other.Distances = nil
	_, ok, why, err = f.Match(discover(t, machine(t, other)))
	if err != nil || ok {
		t.Fatalf("Match of the guest with other distances: %v %v, want no match", ok, err)
	}
	for _, want := range []string{"16 CPUs, 2 sockets, 2 NUMA nodes, 8 cores of 2 threads", "sockets: 0-15; this machine's 0-7 8-15", "NUMA distances: 10 20 / 20 10; this machine's 10 21 / 21 10"} {
		if !strings.Contains(why, want) {
			t.Errorf("why %q does not say %q", why, want)
		}
	}
}

// TestShapeIgnoresIDs: the kernel's ids of cores, dies and caches do not
// make another shape, the grouping of CPUs does.
func TestShapeIgnoresIDs(t *testing.T) {
	m := machine(t, guest)
	renumbered := machine(t, guest)
	for i := range renumbered.CPUs {
		renumbered.CPUs[i].Core += 10
		renumbered.CPUs[i].L3 += 5
	}
	a, b := Shape(discover(t, m)), Shape(discover(t, renumbered))
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("renumbered ids change the shape:\n%s\nvs\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	isolated := machine(t, guest)
	isolated.Isolated = []int{12, 13, 14, 15}
	if c := Shape(discover(t, isolated)); strings.Join(a, "\n") == strings.Join(c, "\n") {
		t.Error("isolated CPUs do not change the shape")
	}
}

func TestTopologyString(t *testing.T) {
	topo := Topology{Sockets: 2, CoresPerNUMA: 4, ThreadsPerCore: 2, Isolated: "12-15", Distances: [][]int{{10, 20}, {20, 10}}}
	want := `{sockets: 2, coresPerNUMA: 4, threadsPerCore: 2, isolated: "12-15", distances: [[10, 20], [20, 10]]}`
	if got := topo.String(); got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
}
