package integration

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestIsolatedCPUsReload switches isolatedCPUs on a running plugin: the
// shared containers leave the isolated CPUs and pinned ones get them; a
// pinned container on other CPUs keeps them (no pinned CPU is reserved
// by the switch, so it applies at once).
func TestIsolatedCPUsReload(t *testing.T) {
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, Isolated: []int{4, 5, 6, 7}}
	n := newNode(t, spec, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPlugin(t, rt, n.pol, t.TempDir())
	r := assemble.NewReloader(testLogger(t), rp.Plugin, n.topo, n.cfg)
	next := func(change func(*config.Config)) *config.Config {
		c := *r.Applied()
		change(&c)
		return &c
	}
	exclusive := func(c *config.Config) { c.IsolatedCPUs = config.IsolatedCPUsExclusive }

	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	wantCPUs(t, rt, web, "0-7")
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	wantCPUs(t, rt, g, "1-2")
	wantCPUs(t, rt, web, "0,3-7")

	if err := r.Apply(next(exclusive)); err != nil || rp.ConfigPending() {
		t.Fatalf("isolatedCPUs: exclusive with g on non-isolated CPUs: %v, pending %v; want it applied", err, rp.ConfigPending())
	}
	waitFor(t, "the shared container to leave the isolated CPUs", func() bool {
		cpus, _ := rt.CPUs(web.Id)
		return cpus.String() == "0,3"
	})
	wantCPUs(t, rt, g, "1-2")
	h := mustCreate(t, rt, pod(t, rt, "next", "guaranteed"), "app", guaranteed(2))
	wantCPUs(t, rt, h, "4-5")
	wantCPUs(t, rt, web, "0,3")

	// Back to shared: the isolated CPUs not pinned join the shared pool.
	if err := r.Apply(next(func(c *config.Config) { c.IsolatedCPUs = config.IsolatedCPUsShared })); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the shared container to get the isolated CPUs back", func() bool {
		cpus, _ := rt.CPUs(web.Id)
		return cpus.String() == "0,3,6-7"
	})
	noViolations(t, rt)
}

// TestIsolatedCPUsEmptyPoolRejected: a configuration whose shared pool
// would be empty (every CPU but the reserved ones isolated, and those kept
// out by strict-cpu-reservation) is rejected on reload and the running one
// kept.
func TestIsolatedCPUsEmptyPoolRejected(t *testing.T) {
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, Isolated: []int{2, 3, 4, 5, 6, 7}}
	n := newNode(t, spec, "reservedSystemCPUs: \"0-1\"\nisolatedCPUs: exclusive")
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPlugin(t, rt, n.pol, t.TempDir())
	r := assemble.NewReloader(testLogger(t), rp.Plugin, n.topo, n.cfg)
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	wantCPUs(t, rt, web, "0-1")
	strict := *r.Applied()
	strict.CPUManagerPolicyOptions.StrictCPUReservation = true
	r.Apply(&strict)
	if r.Applied().CPUManagerPolicyOptions.StrictCPUReservation {
		t.Fatal("strict-cpu-reservation applied although it leaves the shared pool empty")
	}
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	wantCPUs(t, rt, g, "2-3")
	wantCPUs(t, rt, web, "0-1")
	noViolations(t, rt)
}
