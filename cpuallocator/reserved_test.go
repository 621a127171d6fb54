package cpuallocator_test

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

func TestReservedCPUs(t *testing.T) {
	offset := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, ThreadsPerCore: 2, Numbering: fakesysfs.SiblingsOffset}
	tests := []struct {
		name    string
		machine fakesysfs.Spec
		opts    cpuallocator.StaticPolicyOptions
		n       int
		want    string
		wantErr error
	}{
		{name: "one", machine: kep12, n: 1, want: "0"},
		{name: "a whole core", machine: kep12, n: 2, want: "0-1"},
		{name: "a core and a thread", machine: kep12, n: 3, want: "0-2"},
		{name: "options do not apply", machine: kep12, opts: fullPCPUs, n: 3, want: "0-2"},
		{name: "spread does not apply", machine: kep12, opts: acrossCore, n: 2, want: "0-1"},
		{name: "none", machine: kep12, n: 0, want: ""},
		{name: "offset siblings: a whole core", machine: offset, n: 2, want: "0,8"},
		{name: "offset siblings: lowest cores", machine: offset, n: 4, want: "0-1,8-9"},
		{name: "whole node first", machine: twoSocketFourNodes, n: 5, want: "0-4"},
		{name: "whole socket first", machine: twoSocketFourNodes, n: 12, want: "0-11"},
		{name: "too many", machine: twoSocketFourNodes, n: 17, wantErr: cpuallocator.ErrNotEnoughCPUs},
		{name: "negative", machine: twoSocketFourNodes, n: -1, wantErr: cpuallocator.ErrInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allocatorFor(t, topologyOf(t, tc.machine), tc.opts, cpuallocator.TopologyOptions{})
			got, err := a.ReservedCPUs(tc.n)
			checkResult(t, got, err, tc.want, tc.wantErr)
		})
	}
}
