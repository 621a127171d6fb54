package cpuallocator_test

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

func TestGrow(t *testing.T) {
	node := cpuallocator.NewNodeMask
	tests := []struct {
		name      string
		machine   fakesysfs.Spec
		opts      cpuallocator.StaticPolicyOptions
		available string
		current   string
		n         int
		affinity  cpuallocator.NodeMask
		want      string
		wantErr   error
	}{
		{name: "stays in its node", machine: kep12, available: "1,4-11", current: "2-3", n: 4, want: "2-5"},
		{name: "completes its own core first", machine: kep12, available: "3-11", current: "1-2", n: 3, want: "1-3"},
		{name: "fills its node, then the closest", machine: kep12, available: "1,4-11", current: "2-3", n: 6, want: "1-6"},
		{name: "packs inside its node", machine: kep12, available: "1-5,8-11", current: "6-7", n: 5, want: "6-10"},
		{name: "same size", machine: kep12, available: "1,4-11", current: "2-3", n: 2, want: "2-3"},
		{name: "from nothing is an allocation", machine: kep12, available: "1-11", current: "", n: 2, want: "2-3"},
		{name: "affinity holding the current node", machine: kep12, available: "1,4-11", current: "2-3", n: 4, affinity: node(0, 1), want: "2-5"},
		{name: "affinity without the current node", machine: kep12, available: "1,4-11", current: "2-3", n: 4, affinity: node(1), wantErr: cpuallocator.ErrInvalidRequest},
		{name: "available overlaps current", machine: kep12, available: "1-11", current: "2-3", n: 4, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "smaller than current", machine: kep12, available: "1,4-11", current: "2-3", n: 1, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "unknown current CPU", machine: kep12, available: "1,4-11", current: "2-3,12", n: 5, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "unknown available CPU", machine: kep12, available: "1,4-12", current: "2-3", n: 5, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "not enough", machine: kep12, available: "4-5", current: "2-3", n: 6, wantErr: cpuallocator.ErrNotEnoughCPUs},
		{name: "widens to the closest node", machine: farSocket, available: "4-15", current: "0-3", n: 6, want: "0-3,8-9"},
		{name: "widens to the fewest nodes", machine: twoSocketFourNodes, available: "4,8-11", current: "0-3", n: 7, want: "0-3,8-10"},

		// full-pcpus-only.
		{name: "full: odd size", machine: kep12, opts: fullPCPUs, available: "1,4-11", current: "2-3", n: 5, wantErr: cpuallocator.ErrSMTAlignment},
		{name: "full: whole cores, widening", machine: kep12, opts: fullPCPUs, available: "1,4-11", current: "2-3", n: 6, want: "2-7"},
		{name: "full: completes a partial current core", machine: kep12, opts: fullPCPUs, available: "1,3-11", current: "2", n: 4, want: "2-5"},
		{name: "full: no whole cores left", machine: kep12, opts: fullPCPUs, available: "1,5,7,9", current: "2-3", n: 4, wantErr: cpuallocator.ErrTopology},

		// distribute-cpus-across-numa keeps the per-node counts even.
		{name: "across NUMA: fits its node", machine: kep12, opts: acrossNUMA, available: "1,4-11", current: "2-3", n: 4, want: "2-5"},
		{name: "across NUMA: evens out a new node", machine: kep12, opts: acrossNUMA, available: "1,6-11", current: "2-5", n: 8, want: "2-9"},
		{name: "across NUMA: evens out its nodes", machine: kep12, opts: acrossNUMA, available: "9-11", current: "1-8", n: 10, want: "1-10"},
		{name: "packed for contrast", machine: kep12, available: "1,6-11", current: "2-5", n: 8, want: "1-8"},

		// align-by-socket prefers the current socket when widening.
		{name: "align-by-socket: widens within the socket", machine: farSocket, opts: bySocket, available: "4-15", current: "0-3", n: 6, want: "0-5"},
		{name: "align-by-socket: affinity widened to the socket", machine: twoSocketFourNodes, opts: bySocket, available: "5,8-9", current: "0-3", n: 6, affinity: node(0), want: "0-3,5,8"},
		{name: "no socket alignment: fewest extra nodes", machine: twoSocketFourNodes, available: "5,8-9", current: "0-3", n: 6, affinity: node(0), want: "0-3,8-9"},

		// prefer-align-cpus-by-uncorecache stays in the current cache.
		{name: "uncore: grows inside its cache group", machine: twoL3, opts: byUncore, available: "2-3,10-15", current: "8-9", n: 4, want: "8-11"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allocatorFor(t, topologyOf(t, tc.machine), tc.opts, cpuallocator.TopologyOptions{})
			got, err := a.Grow(cpus(t, tc.available), cpus(t, tc.current), tc.n, tc.affinity)
			checkResult(t, got, err, tc.want, tc.wantErr)
			available, _ := cpumask.Of(cpus(t, tc.available))
			got, err = a.GrowFrom(available, cpus(t, tc.current), tc.n, tc.affinity)
			checkResult(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestGrowErrorMessage(t *testing.T) {
	a := allocatorFor(t, topologyOf(t, kep12), none, cpuallocator.TopologyOptions{})
	_, err := a.Grow(cpus(t, "4-5"), cpus(t, "2-3"), 6, 0)
	want := "grow 2-3 to 6 CPUs: need 4 CPUs, 2 free (4-5): not enough free CPUs"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
