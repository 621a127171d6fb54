package policy_test

import (
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// TestTopologyView: per NUMA node, the online CPUs, those that may be
// exclusive (not reserved) and those free now; the topology manager's
// policy and scope in the kubelet's words, its defaults named.
func TestTopologyView(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		opts                  policy.Options
		wantPolicy, wantScope string
	}{
		{"defaults", policy.Options{}, "none", "container"},
		{"single-numa-node, pod scope", policy.Options{TopologyPolicy: cpuallocator.TopologySingleNUMANode, TopologyScope: cpuallocator.ScopePod}, "single-numa-node", "pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := eightCoresWith(t, 2, tc.opts) // nodes 0-3 and 4-7, CPU 0 reserved
			v := pol.TopologyView(cpuset.New(2, 3, 5))
			if v.Policy != tc.wantPolicy || v.Scope != tc.wantScope {
				t.Errorf("policy %q scope %q, want %q %q", v.Policy, v.Scope, tc.wantPolicy, tc.wantScope)
			}
			want := []struct{ node, capacity, allocatable, available int }{{0, 4, 3, 2}, {1, 4, 4, 1}}
			if len(v.Zones) != len(want) {
				t.Fatalf("zones %+v, want %d", v.Zones, len(want))
			}
			for i, w := range want {
				z := v.Zones[i]
				if z.Node != w.node || z.Capacity != w.capacity || z.Allocatable != w.allocatable || z.Available != w.available {
					t.Errorf("zone %d = %+v, want node %d capacity %d allocatable %d available %d", i, z, w.node, w.capacity, w.allocatable, w.available)
				}
				if len(z.Distances) != 2 || z.Distances[w.node] >= z.Distances[1-w.node] {
					t.Errorf("zone %d distances %v: want both nodes, its own the nearest", i, z.Distances)
				}
			}
		})
	}
}
