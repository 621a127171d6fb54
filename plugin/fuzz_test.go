package plugin

import (
	"math"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// FuzzPayload feeds NRI payloads with arbitrary values to the conversion
// and to the decisions they lead to: a container's creation, its resize,
// and a Synchronize that reports it beside a pinned container (pod "p",
// container "app", id "a"), which the fuzzer can collide with. Nothing may
// panic; every converted value must be within its bounds (so no input
// costs more than reading it: a cpuset is never expanded past the online
// CPUs); every decision must leave a model whose invariants hold and whose
// state passes the checkpoint's validation, so that no payload can make
// later commits fail (a poison pill).
func FuzzPayload(f *testing.F) {
	seeds := []struct {
		uid, name, id, parent, cpus string
		shares                      uint64
		quota                       int64
		period                      uint64
		memory                      int64
	}{
		{"u1", "app", "c1", "/kubepods/podu1", "", 2048, 200000, 100000, 1 << 30},
		{"u1", "app", "c1", "/kubepods/podu1", "0-9999999", 2048, 200000, 100000, 1 << 30},
		{"u1", "app", "c1", "/kubepods/podu1", "0-99999999", 2048, 200000, 100000, 1 << 30},
		{"", "app", "c1", "/kubepods/pod", "1-2", 2048, 200000, 100000, 1 << 30},
		{"u1", "", "c1", "/kubepods/podu1", "1", 1024, 100000, 100000, 1 << 30},
		{"u1", "app", "", "/kubepods/podu1", "1", 1024, 100000, 100000, 1 << 30},
		{"p", "app", "a2", "/kubepods/podp", "1", 1024, 100000, 100000, 1 << 30},
		{"q", "app", "a", "/kubepods/podq", "1", 1024, 100000, 100000, 1 << 30},
		{"u1", "app", "c1", "/kubepods/podu1", "1", math.MaxUint64, math.MaxInt64, 1, math.MinInt64},
		{"u1", "app", "c1", "/kubepods/podu1", "1", 2048, math.MaxInt64 / 1000, 1000, 1},
		{"u1", "app", "c1", "/kubepods/podu1", "3,1,2-2", 3072, -5, 100000, 1},
		{strings.Repeat("u", 4000), "app", "c1", "/kubepods/pod", "1", 1024, 100000, 100000, 1 << 30},
	}
	for _, s := range seeds {
		f.Add(s.uid, s.name, s.id, s.parent, s.cpus, s.shares, s.quota, s.period, s.memory, uint64(0), int64(0))
		f.Add(s.uid, s.name, s.id, s.parent, s.cpus, s.shares, s.quota, s.period, s.memory, s.shares*2, s.quota*2)
	}
	pol := testPolicy(f)
	online := pol.Allocator().Topology().CPUs()
	limits := limitsFor(online)
	log := quietLog()

	// The node already runs a pinned container the fuzzer can collide with.
	pinnedPod := policy.Pod{UID: "p", Namespace: "ns", Name: "p", CgroupParent: "/kubepods/podp"}
	pinned := policy.Container{ID: "a", Name: "app", Pod: pinnedPod,
		Resources: policy.Resources{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 1 << 30}}
	d, err := pol.CreateContainer(policy.NewModel(pol.NewState()), pinned)
	if err != nil {
		f.Fatal(err)
	}
	base := d.Model
	pinned.CPUs = d.Target.CPUSet()

	check := func(t *testing.T, what string, m *policy.Model) {
		t.Helper()
		if err := pol.CheckInvariants(m); err != nil {
			t.Fatalf("%s: invariants: %v", what, err)
		}
		if err := m.State.Validate(online); err != nil {
			t.Fatalf("%s: the state would not save: %v", what, err)
		}
	}

	f.Fuzz(func(t *testing.T, uid, name, id, parent, cpus string, shares uint64, quota int64, period uint64, memory int64, newShares uint64, newQuota int64) {
		sandbox := &api.PodSandbox{Id: "sb-" + uid, Uid: uid, Name: "pod", Namespace: "ns", Linux: &api.LinuxPodSandbox{CgroupParent: parent}}
		ctr := &api.Container{Id: id, PodSandboxId: sandbox.Id, Name: name, Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu:    &api.LinuxCPU{Shares: api.UInt64(shares), Quota: api.Int64(quota), Period: api.UInt64(period), Cpus: cpus},
			Memory: &api.LinuxMemory{Limit: api.Int64(memory)},
		}}}
		c := limits.container(podFromNRI(sandbox), ctr, log)
		switch {
		case !c.CPUs.IsSubsetOf(cpuset.New(0, 1, 2, 3)):
			t.Fatalf("cpuset %q read as %s, beyond the online CPUs", cpus, c.CPUs)
		case len(c.ID) > maxIDLen || len(c.Name) > maxNameLen || len(c.Pod.UID) > maxUIDLen || len(c.Pod.CgroupParent) > maxPathLen:
			t.Fatalf("unbounded strings: %d, %d, %d, %d bytes", len(c.ID), len(c.Name), len(c.Pod.UID), len(c.Pod.CgroupParent))
		case c.Resources.CPUShares > policy.MaxShares || c.Resources.CPUQuota > maxQuota || c.Resources.CPUQuota < -1 ||
			(c.Resources.CPUPeriod != 0 && (c.Resources.CPUPeriod < minPeriod || c.Resources.CPUPeriod > maxPeriod)) || c.Resources.MemoryLimit < -1:
			t.Fatalf("resources out of range: %+v", c.Resources)
		}
		if class := policy.Classify(c.Pod.QoS(), c.Resources); class.CPUs < 0 || class.RequestMilli < 0 || class.LimitMilli < 0 {
			t.Fatalf("classified %+v as %+v", c.Resources, class)
		}

		m := base
		if d, err := pol.CreateContainer(base, c); err == nil {
			check(t, "CreateContainer", d.Model)
			m = d.Model
		}
		req := boundedResources(&api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(newShares), Quota: api.Int64(newQuota)}}, nil)
		if d, err := pol.UpdateContainer(m, c, req); err == nil {
			check(t, "UpdateContainer", d.Model)
		}
		d := pol.Synchronize(base, []policy.Pod{pinnedPod, c.Pod}, []policy.Container{pinned, c})
		check(t, "Synchronize", d.Model)
		if a, ok := d.Model.State.Assignment(pinnedPod.UID, pinned.Name); (c.ID != pinned.ID) && (!ok || !a.Baseline.Equals(pinned.CPUs)) {
			t.Fatalf("Synchronize with %+v lost the pinned container's CPUs %s: %+v", c, pinned.CPUs, a)
		}
	})
}
