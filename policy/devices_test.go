package policy_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// TestPlacementWithDevices: on two NUMA nodes (CPUs 0-3 and 4-7, CPU 0
// reserved), a container's devices are a NUMA hint merged with the CPUs'
// as the kubelet's topology manager merges a device plugin's:
// single-numa-node and restricted put its CPUs on the devices' nodes or
// refuse with the topology reason, best-effort takes the devices' nodes
// first, none ignores them; under the pod scope a container without
// devices follows its pod's; a growth stays on them.
func TestPlacementWithDevices(t *testing.T) {
	node0, node1 := cpuset.New(1, 2, 3), cpuset.New(4, 5, 6, 7)
	type container struct {
		pod, name string
		cpus      int64
		devices   cpuallocator.NodeMask
	}
	for _, tc := range []struct {
		name   string
		policy cpuallocator.TopologyPolicy
		scope  cpuallocator.TopologyScope
		before []container // created first
		test   container
		grow   int64 // then resized to this many CPUs (0: not)
		within cpuset.CPUSet
		// inWithin is how many of its CPUs must be within (all when 0).
		inWithin int
		// off is how many pinned containers end up off their devices'
		// nodes (OffDeviceNodes).
		off     int
		refused string
	}{
		{name: "single-numa-node, no devices: the ordinary placement", policy: cpuallocator.TopologySingleNUMANode,
			test: container{"a", "app", 2, 0}, within: node0},
		{name: "single-numa-node: the devices' node", policy: cpuallocator.TopologySingleNUMANode,
			test: container{"a", "app", 2, cpuallocator.NewNodeMask(1)}, within: node1},
		{name: "restricted: the devices' node", policy: cpuallocator.TopologyRestricted,
			test: container{"a", "app", 2, cpuallocator.NewNodeMask(1)}, within: node1},
		{name: "single-numa-node: the devices' node is full", policy: cpuallocator.TopologySingleNUMANode,
			before: []container{{"b", "app", 3, cpuallocator.NewNodeMask(1)}},
			test:   container{"a", "app", 2, cpuallocator.NewNodeMask(1)}, refused: "TopologyAffinityError"},
		{name: "single-numa-node: devices on two nodes", policy: cpuallocator.TopologySingleNUMANode,
			test: container{"a", "app", 2, cpuallocator.NewNodeMask(0, 1)}, refused: "not one"},
		{name: "restricted: devices on two nodes for CPUs that fit one", policy: cpuallocator.TopologyRestricted,
			test: container{"a", "app", 2, cpuallocator.NewNodeMask(0, 1)}, refused: "TopologyAffinityError"},
		{name: "best-effort: the devices' node", policy: cpuallocator.TopologyBestEffort,
			test: container{"a", "app", 2, cpuallocator.NewNodeMask(1)}, within: node1},
		{name: "best-effort: the devices' node first, the rest elsewhere", policy: cpuallocator.TopologyBestEffort,
			before: []container{{"b", "app", 3, cpuallocator.NewNodeMask(1)}},
			test:   container{"a", "app", 2, cpuallocator.NewNodeMask(1)}, within: node1, inWithin: 1, off: 1},
		{name: "none: devices ignored", policy: cpuallocator.TopologyNone,
			test: container{"a", "app", 2, cpuallocator.NewNodeMask(1)}, within: node0},
		{name: "pod scope: a container without devices follows its pod's", policy: cpuallocator.TopologySingleNUMANode, scope: cpuallocator.ScopePod,
			before: []container{{"a", "nic", 1, cpuallocator.NewNodeMask(1)}},
			test:   container{"a", "app", 2, 0}, within: node1},
		{name: "container scope: another container's devices are not its", policy: cpuallocator.TopologySingleNUMANode,
			before: []container{{"a", "nic", 1, cpuallocator.NewNodeMask(1)}},
			test:   container{"a", "app", 2, 0}, within: node0},
		{name: "a growth stays on the devices' node", policy: cpuallocator.TopologySingleNUMANode,
			test: container{"a", "app", 2, cpuallocator.NewNodeMask(1)}, grow: 4, within: node1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := eightCoresWith(t, 2, policy.Options{TopologyPolicy: tc.policy, TopologyScope: tc.scope})
			m := policy.NewModel(pol.NewState())
			create := func(c container) (policy.Decision, error) {
				ctr := running(t, c.pod, "guaranteed", c.cpus*1000, "")
				ctr.ID, ctr.Name, ctr.DeviceNodes = c.pod+"-"+c.name, c.name, c.devices
				return pol.CreateContainer(m, ctr)
			}
			for _, c := range tc.before {
				d, err := create(c)
				if err != nil {
					t.Fatalf("creating %s/%s: %v", c.pod, c.name, err)
				}
				m = d.Model
			}
			d, err := create(tc.test)
			if err == nil && tc.grow > 0 {
				m = d.Model
				ctr := running(t, tc.test.pod, "guaranteed", tc.test.cpus*1000, "")
				ctr.ID, ctr.Name = tc.test.pod+"-"+tc.test.name, tc.test.name
				d, err = pol.UpdateContainer(m, ctr, withCPUs(tc.grow))
			}
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("placed on %s (%v), want refused with %s", d.After, err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.inWithin
			if want == 0 {
				want = d.After.Size()
			}
			if got := d.After.Intersection(tc.within).Size(); got != want || d.After.IsEmpty() {
				t.Errorf("placed on %s: %d of them in %s, want %d", d.After, got, tc.within, want)
			}
			if off := pol.OffDeviceNodes(d.Model); off != tc.off {
				t.Errorf("%d containers off their devices' nodes, want %d", off, tc.off)
			}
			if err := pol.CheckInvariants(d.Model); err != nil {
				t.Error(err)
			}
		})
	}
}
