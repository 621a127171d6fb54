package cpuallocator_test

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

func TestAllocate(t *testing.T) {
	node := cpuallocator.NewNodeMask
	tests := []struct {
		name      string
		machine   fakesysfs.Spec
		opts      cpuallocator.StaticPolicyOptions
		available string
		n         int
		affinity  cpuallocator.NodeMask
		want      string
		wantErr   error
	}{
		// Packed order on the KEP-5554 machine, CPU 0 reserved.
		{name: "one CPU completes the partly used core", machine: kep12, available: "1-11", n: 1, want: "1"},
		{name: "two CPUs take a whole core", machine: kep12, available: "1-11", n: 2, want: "2-3"},
		{name: "three: a whole core and the partly used one", machine: kep12, available: "1-11", n: 3, want: "1-3"},
		{name: "four: whole cores of the fuller node", machine: kep12, available: "1-11", n: 4, want: "2-5"},
		{name: "five fill node 0", machine: kep12, available: "1-11", n: 5, want: "1-5"},
		{name: "six take the whole free node", machine: kep12, available: "1-11", n: 6, want: "6-11"},
		{name: "seven: whole node, then the best fit", machine: kep12, available: "1-11", n: 7, want: "1,6-11"},
		{name: "everything", machine: kep12, available: "1-11", n: 11, want: "1-11"},
		{name: "zero", machine: kep12, available: "1-11", n: 0, want: ""},
		{name: "too many", machine: kep12, available: "1-11", n: 12, wantErr: cpuallocator.ErrNotEnoughCPUs},
		{name: "negative", machine: kep12, available: "1-11", n: -1, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "unknown available CPU", machine: kep12, available: "1-12", n: 1, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "unknown affinity node", machine: kep12, available: "1-11", n: 1, affinity: node(2), wantErr: cpuallocator.ErrInvalidRequest},
		{name: "affinity first", machine: kep12, available: "1-11", n: 2, affinity: node(1), want: "6-7"},
		{name: "affinity too small spills over", machine: kep12, available: "1-11", n: 6, affinity: node(0), want: "1-6"},
		{name: "a NUMA node that fits beats a tighter socket", machine: twoSocketFourNodes, available: "1-3,5-7,8-15", n: 4, want: "8-11"},

		// full-pcpus-only.
		{name: "full: a whole core", machine: kep12, opts: fullPCPUs, available: "1-11", n: 2, want: "2-3"},
		{name: "full: odd size", machine: kep12, opts: fullPCPUs, available: "1-11", n: 3, wantErr: cpuallocator.ErrSMTAlignment},
		{name: "full: the partly used core is skipped", machine: kep12, opts: fullPCPUs, available: "1-11", n: 4, want: "2-5"},
		{name: "full: whole node then whole cores", machine: kep12, opts: fullPCPUs, available: "1-11", n: 8, want: "2-3,6-11"},
		{name: "full: all whole cores", machine: kep12, opts: fullPCPUs, available: "1-11", n: 10, want: "2-11"},
		{name: "full: enough CPUs but not whole cores", machine: kep12, opts: fullPCPUs, available: "1,3,5-11", n: 8, wantErr: cpuallocator.ErrTopology},
		{name: "full: too many", machine: kep12, opts: fullPCPUs, available: "1-11", n: 12, wantErr: cpuallocator.ErrNotEnoughCPUs},

		// distribute-cpus-across-cores.
		{name: "across cores: one thread per core", machine: kep12, opts: acrossCore, available: "1-11", n: 3, want: "1-2,4"},
		{name: "across cores: then second threads", machine: kep12, opts: acrossCore, available: "1-11", n: 4, want: "1-4"},
		{name: "across cores: a whole node", machine: kep12, opts: acrossCore, available: "1-11", n: 6, want: "6-11"},
		{name: "across cores: in the affinity", machine: kep12, opts: acrossCore, available: "0-11", n: 2, affinity: node(1), want: "6,8"},

		// distribute-cpus-across-numa.
		{name: "across NUMA: fits one node, packed", machine: kep12, opts: acrossNUMA, available: "1-11", n: 4, want: "2-5"},
		{name: "across NUMA: 8 split 4+4", machine: kep12, opts: acrossNUMA, available: "1-11", n: 8, want: "2-9"},
		{name: "across NUMA: 10 split 5+5", machine: kep12, opts: acrossNUMA, available: "1-11", n: 10, want: "1-10"},
		{name: "across NUMA: 11 split 5+6", machine: kep12, opts: acrossNUMA, available: "1-11", n: 11, want: "1-11"},
		{name: "across NUMA: fewest nodes", machine: twoSocketFourNodes, opts: acrossNUMA, available: "0-15", n: 6, want: "0-2,4-6"},
		{name: "across NUMA: closest nodes", machine: farSocket, opts: acrossNUMA, available: "0-15", n: 6, want: "0-2,8-10"},
		{name: "across NUMA with full cores: 4+4", machine: kep12, opts: fullNUMA, available: "0-11", n: 8, want: "0-3,6-9"},
		{name: "across NUMA with full cores: whole free cores only", machine: kep12, opts: fullNUMA, available: "1-11", n: 8, want: "2-9"},

		// align-by-socket: the affinity is widened to its sockets.
		{name: "no socket alignment: best fit elsewhere", machine: twoSocketFourNodes, available: "4-9", n: 2, affinity: node(0), want: "8-9"},
		{name: "socket alignment: the affinity's socket", machine: twoSocketFourNodes, opts: bySocket, available: "4-9", n: 2, affinity: node(0), want: "4-5"},

		// prefer-align-cpus-by-uncorecache.
		{name: "no uncore alignment: lowest whole cores", machine: twoL3, available: "0-1,6,8-15", n: 4, want: "0-1,8-9"},
		{name: "uncore: one cache group that fits", machine: twoL3, opts: byUncore, available: "0-1,6,8-15", n: 4, want: "8-11"},
		{name: "uncore: the tightest group", machine: twoL3, opts: byUncore, available: "0-1,6,8-15", n: 2, want: "0-1"},
		{name: "uncore: whole group, then the rest from one group", machine: twoL3, opts: byUncore, available: "0-1,6,8-15", n: 10, want: "0-1,8-15"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allocatorFor(t, topologyOf(t, tc.machine), tc.opts, cpuallocator.TopologyOptions{})
			got, err := a.Allocate(cpus(t, tc.available), tc.n, tc.affinity)
			checkResult(t, got, err, tc.want, tc.wantErr)
			available, _ := cpumask.Of(cpus(t, tc.available))
			got, err = a.AllocateFrom(available, tc.n, tc.affinity)
			checkResult(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestAllocateErrorMessages(t *testing.T) {
	tests := []struct {
		opts      cpuallocator.StaticPolicyOptions
		available string
		n         int
		want      string
	}{
		{none, "1-2", 4, "allocate 4 CPUs: need 4 CPUs, 2 free (1-2): not enough free CPUs"},
		{fullPCPUs, "1-3", 3, "allocate 3 CPUs: full-pcpus-only: 3 CPUs is not a multiple of 2 threads per core: request is not a multiple of the SMT level"},
		{fullPCPUs, "1,3,5-11", 8, "allocate 8 CPUs: need 8 CPUs as whole cores of 2 threads (full-pcpus-only), only 6 free CPUs form whole free cores (6-11): topology constraint cannot be met"},
	}
	for _, tc := range tests {
		a := allocatorFor(t, topologyOf(t, kep12), tc.opts, cpuallocator.TopologyOptions{})
		_, err := a.Allocate(cpus(t, tc.available), tc.n, 0)
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
}

func TestAllocateOnRealLayouts(t *testing.T) {
	tests := []struct {
		name      string
		layout    string
		opts      cpuallocator.StaticPolicyOptions
		available string
		n         int
		want      string
	}{
		{name: "EPYC: one CCD's L3 under uncore alignment", layout: "amd-epyc-7313-2s-nps2", opts: byUncore, available: "0-63", n: 8, want: "0-3,32-35"},
		{name: "EPYC: best-fit CCD", layout: "amd-epyc-7313-2s-nps2", opts: byUncore, available: "1-63", n: 6, want: "1-3,33-35"},
		{name: "EPYC: the CCD that fits", layout: "amd-epyc-7313-2s-nps2", opts: byUncore, available: "1-63", n: 8, want: "4-7,36-39"},
		{name: "EPYC: across CCDs without uncore alignment", layout: "amd-epyc-7313-2s-nps2", available: "1-63", n: 8, want: "1-4,33-36"},
		{name: "Xeon SNC: a whole SNC node", layout: "intel-xeon-gold-6338-snc2", available: "0-127", n: 32, want: "0-15,64-79"},
		{name: "Xeon SNC: then the same socket's other node", layout: "intel-xeon-gold-6338-snc2", available: "0-127", n: 34, want: "0-16,64-80"},
		{name: "Xeon SNC: the tightest node", layout: "intel-xeon-gold-6338-snc2", available: "1-31,64-95", n: 31, want: "1-15,64-79"},
		{name: "Xeon SNC: the node that fits", layout: "intel-xeon-gold-6338-snc2", available: "1-31,64-95", n: 32, want: "16-31,80-95"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := fakesysfs.Layout(tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			a := allocatorFor(t, topologyOfMachine(t, m), tc.opts, cpuallocator.TopologyOptions{})
			got, err := a.Allocate(cpus(t, tc.available), tc.n, 0)
			checkResult(t, got, err, tc.want, nil)
		})
	}
}
