package integration

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestObserveOnly: a plugin that only observes decides and records as
// usual (the checkpoint holds the exclusive CPUs it would give) and hands
// the runtime nothing: every container keeps the CPUs the runtime gave it,
// a resize it would refuse goes through, observe_only says so. Started
// again without it, the plugin pins the running containers as decided.
func TestObserveOnly(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rt.SetChecking(false) // observing: containers overlap, as without a plugin
	stateDir := t.TempDir()
	rp := startPluginWith(t, rt, n.pol, stateDir, func(o *plugin.Options) { o.ObserveOnly = true })
	app := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	wantCPUs(t, rt, app, "0-3")
	wantCPUs(t, rt, web, "0-3")
	a, ok := checkpointState(t, stateDir, n.topo.CPUs()).Assignment("gu-uid", "app")
	if !ok || a.Baseline.Size() != 2 || a.Baseline.Contains(0) {
		t.Fatalf("checkpoint assignment %+v (%v): want the 2 exclusive CPUs it would give", a, ok)
	}
	decided := a.Baseline.String()
	if err := rt.UpdateContainer(app, guaranteed(8)); err != nil {
		t.Errorf("a resize the plugin would refuse was refused while observing: %v", err)
	}
	wantCPUs(t, rt, app, "0-3")
	if v := metricValue(t, rp, "nri_cpumanager_observe_only", nil); v != 1 {
		t.Errorf("observe_only = %v, want 1", v)
	}
	if v := metricValue(t, rp, "nri_cpumanager_refusals_total", map[string]string{"reason": "resizeAllocateCPUsError", "verdict": "Infeasible"}); v != 1 {
		t.Errorf("refusals_total{resizeAllocateCPUsError} = %v, want the refusal it would have made counted", v)
	}
	rp.Stop()

	rp = startPluginWith(t, rt, n.pol, stateDir, nil)
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, app, decided)
	if v := metricValue(t, rp, "nri_cpumanager_observe_only", nil); v != 0 {
		t.Errorf("observe_only = %v after a start without it, want 0", v)
	}
	rt.SetChecking(true)
	noViolations(t, rt)
}
