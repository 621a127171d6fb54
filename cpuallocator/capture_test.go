package cpuallocator_test

import (
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

func TestCaptureRoundTrip(t *testing.T) {
	m, err := fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2, L3PerNUMA: 2, Isolated: []int{3, 11},
		Distances: [][]int{{10, 11, 21, 21}, {11, 10, 21, 21}, {21, 21, 10, 12}, {21, 21, 12, 10}}}.Machine()
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fakesysfs.FS(m)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := cpuallocator.DiscoverFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	data, err := topo.MarshalCapture()
	if err != nil {
		t.Fatal(err)
	}
	back, err := cpuallocator.ParseCapture(data)
	if err != nil {
		t.Fatalf("ParseCapture: %v\n%s", err, data)
	}
	if got, want := back.String(), topo.String(); got != want {
		t.Errorf("the capture does not rebuild the topology:\ngot\n%s\nwant\n%s", got, want)
	}
	for a := range topo.NUMANodes() {
		for b := range topo.NUMANodes() {
			if back.Distance(a, b) != topo.Distance(a, b) {
				t.Errorf("distance %d→%d: got %d, want %d", a, b, back.Distance(a, b), topo.Distance(a, b))
			}
		}
	}
}

func TestParseCaptureRejects(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"not JSON", "cpus: [", "reading the topology capture"},
		{"no type", `{"cpus":[{"id":0}]}`, "not a topology capture"},
		{"another kind", `{"apiVersion":"` + cpuallocator.CaptureAPIVersion + `","kind":"PluginConfiguration"}`, "not a topology capture"},
		{"no CPUs", `{"apiVersion":"` + cpuallocator.CaptureAPIVersion + `","kind":"` + cpuallocator.CaptureKind + `"}`, "topology has no CPUs"},
		{"bad node", `{"apiVersion":"` + cpuallocator.CaptureAPIVersion + `","kind":"` + cpuallocator.CaptureKind + `","cpus":[{"id":0}],"distances":{"x":{"0":10}}}`, `NUMA node "x" is not a number`},
		{"duplicate CPU", `{"apiVersion":"` + cpuallocator.CaptureAPIVersion + `","kind":"` + cpuallocator.CaptureKind + `","cpus":[{"id":0},{"id":0}]}`, "described twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cpuallocator.ParseCapture([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
