package integration

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// TestIsolatedCPUsReload switches isolatedCPUs on a running plugin: like
// reserved CPUs, only while no container holds exclusive CPUs; then the
// shared containers leave the isolated CPUs and pinned ones get them. A
// switch that would leave no CPU for the shared pool is rejected.
func TestIsolatedCPUsReload(t *testing.T) {
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, Isolated: []int{4, 5, 6, 7}}
	n := newNode(t, spec, `reservedSystemCPUs: "0"`)
	rt := newFakeRuntime(t, n.topo.CPUs())
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

	r.Apply(next(exclusive))
	if got := r.Applied().IsolatedCPUs; got != config.IsolatedCPUsShared {
		t.Fatalf("isolatedCPUs %s applied while a container holds exclusive CPUs, want shared kept", got)
	}
	if err := rt.StopContainer(g); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveContainer(g); err != nil {
		t.Fatal(err)
	}
	r.Apply(next(exclusive))
	if got := r.Applied().IsolatedCPUs; got != config.IsolatedCPUsExclusive {
		t.Fatalf("isolatedCPUs %s after the last exclusive container left, want exclusive", got)
	}
	waitFor(t, "the shared container to leave the isolated CPUs", func() bool {
		cpus, _ := rt.CPUs(web.Id)
		return cpus.String() == "0-3"
	})
	h := mustCreate(t, rt, pod(t, rt, "next", "guaranteed"), "app", guaranteed(2))
	wantCPUs(t, rt, h, "4-5")
	wantCPUs(t, rt, web, "0-3")

	// Back to shared is refused while h holds CPUs.
	r.Apply(next(func(c *config.Config) { c.IsolatedCPUs = config.IsolatedCPUsShared }))
	if got := r.Applied().IsolatedCPUs; got != config.IsolatedCPUsExclusive {
		t.Errorf("isolatedCPUs %s applied while a container holds exclusive CPUs, want exclusive kept", got)
	}
	noViolations(t, rt)
}

// TestIsolatedCPUsEmptyPoolRejected: a configuration whose shared pool
// would be empty (every CPU but the reserved ones isolated, and those kept
// out by strict-cpu-reservation) is rejected on reload and the running one
// kept.
func TestIsolatedCPUsEmptyPoolRejected(t *testing.T) {
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, Isolated: []int{2, 3, 4, 5, 6, 7}}
	n := newNode(t, spec, "reservedSystemCPUs: \"0-1\"\nisolatedCPUs: exclusive")
	rt := newFakeRuntime(t, n.topo.CPUs())
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
