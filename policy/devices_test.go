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
			placed := d.After.CPUSet()
			want := tc.inWithin
			if want == 0 {
				want = placed.Size()
			}
			if got := placed.Intersection(tc.within).Size(); got != want || placed.IsEmpty() {
				t.Errorf("placed on %s: %d of them in %s, want %d", placed, got, tc.within, want)
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

// TestDeviceNodesAreRecorded: an exclusive container's assignment records
// the NUMA nodes of its devices (the checkpoint's deviceNodes) when it is
// created or adopted, keeps them through a growth, a shrink, a stop and a
// restart, and takes those a Synchronize looks up again, which win.
func TestDeviceNodesAreRecorded(t *testing.T) {
	pol := eightCoresWith(t, 2, policy.Options{TopologyPolicy: cpuallocator.TopologySingleNUMANode})
	app := func(id string, cpus int64, on string, devices cpuallocator.NodeMask) policy.Container {
		c := running(t, "a", "guaranteed", cpus*1000, on)
		c.ID, c.DeviceNodes = id, devices
		return c
	}
	m := policy.NewModel(pol.NewState())
	steps := []struct {
		name string
		do   func(m *policy.Model) (policy.Decision, error)
		want string // the recorded device nodes of pod a's app
	}{
		{"created with devices on node 1", func(m *policy.Model) (policy.Decision, error) {
			return pol.CreateContainer(m, app("a-1", 2, "", cpuallocator.NewNodeMask(1)))
		}, "1"},
		{"grown (the resize request names no devices)", func(m *policy.Model) (policy.Decision, error) {
			return pol.UpdateContainer(m, app("a-1", 2, "", 0), withCPUs(3))
		}, "1"},
		{"shrunk", func(m *policy.Model) (policy.Decision, error) {
			return pol.UpdateContainer(m, app("a-1", 3, "", 0), withCPUs(2))
		}, "1"},
		{"stopped", func(m *policy.Model) (policy.Decision, error) {
			return pol.StopContainer(m, app("a-1", 2, "", 0)), nil
		}, "1"},
		{"restarted with the same devices", func(m *policy.Model) (policy.Decision, error) {
			return pol.CreateContainer(m, app("a-2", 2, "", cpuallocator.NewNodeMask(1)))
		}, "1"},
		{"stopped again", func(m *policy.Model) (policy.Decision, error) {
			return pol.StopContainer(m, app("a-2", 2, "", 0)), nil
		}, "1"},
		{"restarted with 3 CPUs (a growth at its restart)", func(m *policy.Model) (policy.Decision, error) {
			return pol.CreateContainer(m, app("a-3", 3, "", cpuallocator.NewNodeMask(1)))
		}, "1"},
		{"a Synchronize's lookup wins", func(m *policy.Model) (policy.Decision, error) {
			a, _ := m.State.Assignment("a-uid", "app")
			return pol.Synchronize(m, nil, []policy.Container{app("a-3", 3, a.Assigned().String(), cpuallocator.NewNodeMask(0, 1))}), nil
		}, "0-1"},
		{"a Synchronize that finds none", func(m *policy.Model) (policy.Decision, error) {
			a, _ := m.State.Assignment("a-uid", "app")
			return pol.Synchronize(m, nil, []policy.Container{app("a-3", 3, a.Assigned().String(), 0)}), nil
		}, ""},
	}
	for _, step := range steps {
		d, err := step.do(m)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		m = d.Model
		if err := pol.CheckInvariants(m); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		a, ok := m.State.Assignment("a-uid", "app")
		if !ok || a.DeviceNodes.String() != step.want {
			t.Errorf("%s: assignment %+v (present %v) records device nodes %q, want %q", step.name, a, ok, a.DeviceNodes, step.want)
		}
	}

	// Adopted at a Synchronize (a lost checkpoint): its lookup is recorded.
	adopted := app("b-1", 2, "4-5", cpuallocator.NewNodeMask(1))
	adopted.Pod.UID = "b-uid"
	plain := app("c-1", 1, "1", 0) // pod a, without devices
	d := pol.Synchronize(policy.NewModel(pol.NewState()), nil, []policy.Container{adopted, plain})
	for pod, want := range map[string]string{"b-uid": "1", "a-uid": ""} {
		if a, ok := d.Model.State.Assignment(pod, "app"); !ok || a.DeviceNodes.String() != want {
			t.Errorf("adopted %s: %+v (present %v), want device nodes %q", pod, a, ok, want)
		}
	}
}
