package integration

import (
	"sync"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestScaleDownDelayOverNRI: with scaleDownDelay a decrease is accepted
// and recorded at once, but the container keeps the CPUs it gives up —
// its cgroup and its checkpoint entry say so — until the delay is over;
// the plugin then shrinks it with an update of its own and, only once
// the runtime applied that, gives the CPUs to the shared containers.
func TestScaleDownDelayOverNRI(t *testing.T) {
	fsys, err := fakesysfs.GenerateFS(fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := cpuallocator.DiscoverFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := cpuallocator.NewAllocator(topo, cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	pol, err := policy.New(alloc, policy.Options{Reserved: cpuset.New(0), InPlaceResize: true, ScaleDownDelay: 30 * time.Second, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	rt := fakeruntime.New(t, topo.CPUs())
	stateDir := t.TempDir()
	rp := startPluginWith(t, rt, pol, stateDir, func(o *plugin.Options) { o.MaintainInterval = 5 * time.Millisecond })
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	gu := pod(t, rt, "gu", "guaranteed")
	app := mustCreate(t, rt, gu, "app", guaranteed(2))
	if err := rt.UpdateContainer(app, guaranteed(4)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, app, "1-4")

	mark := len(rt.Log())
	if err := rt.UpdateContainer(app, guaranteed(2)); err != nil {
		t.Fatalf("decrease: %v", err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, app, "1-4")
	wantCPUs(t, rt, web, "0,5-7")
	a, _ := checkpointState(t, stateDir, topo.CPUs()).Assignment("gu-uid", "app")
	if a.Assigned().String() != "1-2" || a.Delayed.String() != "3-4" || !a.ReleaseAt.Equal(now.Add(30*time.Second)) {
		t.Errorf("checkpoint entry %+v, want assigned 1-2 keeping 3-4 until %s", a, now.Add(30*time.Second))
	}
	if v := metricValue(t, rp, "nri_cpumanager_delayed_cpus", nil); v != 2 {
		t.Errorf("delayed_cpus = %v, want 2", v)
	}

	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	waitFor(t, "the delayed CPUs released", func() bool {
		got, _ := rt.CPUs(web.Id)
		return got.String() == "0,3-7" && settled(rp, rt)
	})
	wantCPUs(t, rt, app, "1-2")
	var shrunk, grown int = -1, -1
	for i, u := range rt.Log()[mark:] {
		switch {
		case u.Container == "app" && u.CPUs == "1-2" && u.Origin == "unsolicited":
			shrunk = i
		case u.Container == "nginx" && u.CPUs == "0,3-7":
			grown = i
		}
	}
	if shrunk < 0 || grown < shrunk {
		t.Errorf("updates after the delay %v: want app's shrink (unsolicited) before nginx's growth", rt.Log()[mark:])
	}
	if a, _ := checkpointState(t, stateDir, topo.CPUs()).Assignment("gu-uid", "app"); !a.Delayed.IsEmpty() || !a.ReleaseAt.IsZero() {
		t.Errorf("checkpoint entry %+v after the delay, want nothing delayed", a)
	}
	noViolations(t, rt)
}
