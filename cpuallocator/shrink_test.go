package cpuallocator_test

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

func TestShrink(t *testing.T) {
	tests := []struct {
		name     string
		machine  fakesysfs.Spec
		opts     cpuallocator.StaticPolicyOptions
		current  string
		baseline string
		n        int
		want     string
		wantErr  error
	}{
		{name: "releases the other node first", machine: kep12, current: "1-7", baseline: "2-3", n: 5, want: "1-5"},
		{name: "keeps the baseline's sibling", machine: kep12, current: "2-7", baseline: "6", n: 2, want: "6-7"},
		{name: "back to the baseline", machine: kep12, current: "1-7", baseline: "2-3", n: 2, want: "2-3"},
		{name: "keeps everything", machine: kep12, current: "1-7", baseline: "2-3", n: 7, want: "1-7"},
		{name: "keeps the baseline's cache group", machine: twoL3, current: "0-1,8-9,14-15", baseline: "8-9", n: 4, want: "8-9,14-15"},
		{name: "baseline not held", machine: kep12, current: "1-7", baseline: "2-3,9", n: 4, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "below the baseline", machine: kep12, current: "1-7", baseline: "2-3", n: 1, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "above current", machine: kep12, current: "1-7", baseline: "2-3", n: 8, wantErr: cpuallocator.ErrInvalidRequest},
		{name: "unknown CPU", machine: kep12, current: "1-7,12", baseline: "2-3", n: 4, wantErr: cpuallocator.ErrInvalidRequest},

		{name: "full: whole cores", machine: kep12, opts: fullPCPUs, current: "2-7", baseline: "2-3", n: 4, want: "2-5"},
		{name: "full: odd size", machine: kep12, opts: fullPCPUs, current: "2-7", baseline: "2-3", n: 3, wantErr: cpuallocator.ErrSMTAlignment},
		{name: "full: skips partial cores", machine: kep12, opts: fullPCPUs, current: "2-4,6-7", baseline: "2-3", n: 4, want: "2-3,6-7"},
		{name: "full: only partial cores", machine: kep12, opts: fullPCPUs, current: "2-4,7-8", baseline: "2-3", n: 4, wantErr: cpuallocator.ErrTopology},

		{name: "across cores: keeps one thread per core", machine: kep12, opts: acrossCore, current: "2-5", baseline: "2", n: 2, want: "2,4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allocatorFor(t, topologyOf(t, tc.machine), tc.opts, cpuallocator.TopologyOptions{})
			got, err := a.Shrink(cpus(t, tc.current), cpus(t, tc.baseline), tc.n)
			checkResult(t, got, err, tc.want, tc.wantErr)
		})
	}
}
