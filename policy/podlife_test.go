package policy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// life plays a pod's life through the policy, the way the runtime reports
// a kubelet's actions, and checks after every step that the model keeps
// its invariants and its state would save.
type life struct {
	t    *testing.T
	pol  *policy.Policy
	m    *policy.Model
	next int
	// running maps container id → the container as created.
	running map[string]policy.Container
	// warnings are the warnings of the last decision.
	warnings []string
	// given is a copy of m's state as the last step left it: a decision
	// never changes the model it is given.
	given *state.State
}

func newLife(t *testing.T, pol *policy.Policy) *life {
	return &life{t: t, pol: pol, m: policy.NewModel(pol.NewState()), running: map[string]policy.Container{}}
}

// pod returns a Guaranteed pod whose total (the kubelet's, with the
// sandbox) is totalMilli, with roles when given ("name=role" pairs).
func (l *life) pod(name string, totalMilli int64, roles ...string) policy.Pod {
	l.t.Helper()
	pod, err := scenario.KubeletPod(name, "guaranteed")
	if err != nil {
		l.t.Fatal(err)
	}
	pod.Resources = scenario.KubeletResources("guaranteed", totalMilli, totalMilli, 1<<30)
	for _, r := range roles {
		name, role, _ := strings.Cut(r, "=")
		parsed, err := scenario.ParseRole(role)
		if err != nil {
			l.t.Fatal(err)
		}
		if pod.Roles == nil {
			pod.Roles = map[string]policy.Role{}
		}
		pod.Roles[name] = parsed
	}
	return pod
}

func (l *life) step(what string, d policy.Decision) {
	l.t.Helper()
	saves(l.t, l.pol, what, d.Model)
	if l.given != nil && !l.m.State.Equal(l.given) {
		l.t.Fatalf("%s (or a decision before it) changed the state of the model it was given", what)
	}
	l.m, l.warnings = d.Model, d.Warnings
	l.given = l.m.State.Clone()
}

// sandbox runs a new sandbox of pod and returns the pod as its events
// name it.
func (l *life) sandbox(pod policy.Pod) policy.Pod {
	l.t.Helper()
	l.next++
	pod.SandboxID = fmt.Sprintf("sandbox-%d", l.next)
	l.step("run "+pod.SandboxID, l.pol.RunPodSandbox(l.m, pod))
	return pod
}

// create creates container name with milli CPUs and returns its id.
func (l *life) create(pod policy.Pod, name string, milli int64) string {
	l.t.Helper()
	id, err := l.tryCreate(pod, name, milli)
	if err != nil {
		l.t.Fatalf("create %s/%s: %v", pod.Name, name, err)
	}
	return id
}

func (l *life) tryCreate(pod policy.Pod, name string, milli int64) (string, error) {
	l.t.Helper()
	l.next++
	c := policy.Container{ID: fmt.Sprintf("%s-%s-%d", pod.Name, name, l.next), Name: name, Pod: pod,
		Resources: scenario.KubeletResources("guaranteed", milli, milli, 1<<30)}
	d, err := l.pol.CreateContainer(l.m, c)
	if err != nil {
		return "", err
	}
	l.step("create "+c.ID, d)
	l.running[c.ID] = c
	return c.ID, nil
}

// exit ends container id's process with code.
func (l *life) exit(id string, code int32) {
	l.t.Helper()
	c := l.running[id]
	c.Exited, c.Completed = true, code == 0
	l.step("exit "+id, l.pol.StopContainer(l.m, c))
}

// remove is the garbage collection of container id.
func (l *life) remove(id string) {
	l.t.Helper()
	l.step("remove "+id, l.pol.RemoveContainer(l.m, l.running[id]))
}

func (l *life) removeSandbox(pod policy.Pod) {
	l.t.Helper()
	l.step("remove "+pod.SandboxID, l.pol.RemovePodSandbox(l.m, pod))
}

func (l *life) resize(id string, milli int64) error {
	l.t.Helper()
	c := l.running[id]
	d, err := l.pol.UpdateContainer(l.m, c, scenario.KubeletResources("guaranteed", milli, milli, 1<<30))
	if err != nil {
		return err
	}
	l.step("resize "+id, d)
	c.Resources = scenario.KubeletResources("guaranteed", milli, milli, 1<<30)
	l.running[id] = c
	l.step("confirm "+id, l.pol.Confirm(l.m, id))
	return nil
}

// podUpdate is UpdatePodSandboxResources with the pod's new total.
func (l *life) podUpdate(pod policy.Pod, milli int64) {
	l.t.Helper()
	d, err := l.pol.UpdatePodSandbox(l.m, pod, policy.PodResources{Resources: scenario.KubeletResources("guaranteed", milli, milli, 2<<30)})
	if err != nil {
		l.t.Fatalf("pod update to %dm: %v", milli, err)
	}
	l.step("pod update", d)
}

func (l *life) cpus(id string) cpuset.CPUSet { return l.m.CPUsOf(id) }

func (l *life) pool() string { return l.m.SharedPool().String() }

// want fails unless container id runs on cpus and the shared pool is pool.
func (l *life) want(what, id, cpus, pool string) {
	l.t.Helper()
	if got := l.cpus(id).String(); got != cpus {
		l.t.Errorf("%s: %s runs on %q, want %q", what, id, got, cpus)
	}
	if got := l.pool(); got != pool {
		l.t.Errorf("%s: shared pool %q, want %q", what, got, pool)
	}
}

// TestInitContainerCPUsGoToTheAppContainer: the kubelet runs a pod's init
// container, then its app container, and passes the pod's total
// max(init, app) with the sandbox. The app container reuses the init
// container's CPUs (it is pinned, not put on the shared pool for going
// over the pod's total), the pod holds max(init, app) CPUs for its whole
// life, and the app container's restart keeps its CPUs — with the pod's
// spec known (roles) and without it (a completed container is taken for
// an init container).
func TestInitContainerCPUsGoToTheAppContainer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		init, app  int64
		roles      []string
		appCPUs    string
		podCPUs    string // the pool without them: 0 is reserved, 1-7 allocatable
		appRestart string
	}{
		{"1+1, spec known", 1000, 1000, []string{"init=init", "app=app"}, "1", "0,2-7", "1"},
		{"1+1, spec unknown", 1000, 1000, nil, "1", "0,2-7", "1"},
		{"2 then 1", 2000, 1000, nil, "1", "0,3-7", "1"},
		{"1 then 3", 1000, 3000, []string{"init=init"}, "1-3", "0,4-7", "1-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLife(t, eightCPUs(t))
			pod := l.sandbox(l.pod("gu", max(tc.init, tc.app), tc.roles...))
			init := l.create(pod, "init", tc.init)
			l.exit(init, 0)
			app := l.create(pod, "app", tc.app)
			l.want("app created", app, tc.appCPUs, tc.podCPUs)
			l.exit(app, 137)
			again := l.create(pod, "app", tc.app)
			l.want("app restarted", again, tc.appRestart, tc.podCPUs)
			l.remove(app)
			l.want("dead app removed", again, tc.appRestart, tc.podCPUs)
		})
	}
}

// TestSandboxRecreationKeepsThePodsCPUs: the pause container dies (or the
// node reboots); the kubelet stops the pod's containers, purges its init
// containers, runs a new sandbox, runs the init container again, then the
// app container, and garbage-collects the old sandbox later. Every
// container gets its CPUs back (the init container its own, not the
// app's), and the old sandbox's removal frees nothing: the next pod
// cannot get the pod's CPUs. The pod's CPUs go back with its last
// sandbox.
func TestSandboxRecreationKeepsThePodsCPUs(t *testing.T) {
	for _, roles := range [][]string{nil, {"init=init", "app=app"}} {
		t.Run(fmt.Sprintf("roles %v", roles), func(t *testing.T) {
			l := newLife(t, eightCPUs(t))
			gu := l.pod("gu", 3000, roles...)
			old := l.sandbox(gu)
			init := l.create(old, "init", 2000)
			l.exit(init, 0)
			app := l.create(old, "app", 3000)
			l.want("started", app, "1-3", "0,4-7")
			if err := l.resize(app, 4000); err != nil {
				t.Fatal(err)
			}
			l.want("grown", app, "1-4", "0,5-7")

			l.exit(app, 137)
			l.remove(init) // purgeInitContainers, before the new sandbox
			now := l.sandbox(gu)
			init2 := l.create(now, "init", 2000)
			l.want("init container again", init2, "1-2", "0,5-7")
			l.exit(init2, 0)
			app2 := l.create(now, "app", 4000)
			l.want("app container again", app2, "1-4", "0,5-7")
			l.remove(app)
			l.removeSandbox(old)
			l.want("old sandbox removed", app2, "1-4", "0,5-7")
			other := l.sandbox(l.pod("other", 4000))
			if _, err := l.tryCreate(other, "app", 4000); err == nil {
				t.Errorf("another pod got 4 CPUs while gu holds 4 of the 7 allocatable: two owners")
			}
			a, _ := l.m.State.Assignment(gu.UID, "app")
			if a.Baseline.String() != "1-3" {
				t.Errorf("baseline %s after the re-creation, want 1-3 (kept)", a.Baseline)
			}
			l.exit(app2, 137)
			l.remove(init2)
			l.remove(app2)
			l.want("containers removed, sandbox left", app2, "", "0,5-7")
			l.removeSandbox(now)
			if got := l.pool(); got != "0-7" {
				t.Errorf("shared pool %s once the pod's last sandbox is gone, want 0-7", got)
			}
		})
	}
}

// TestGarbageCollectionOrderNeverMatters: the kubelet removes a crashed
// container before or after it re-creates it; either way the re-created
// container gets the same CPUs and a refused shrink below its baseline
// stays refused.
func TestGarbageCollectionOrderNeverMatters(t *testing.T) {
	for _, removeFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("remove the dead container first: %v", removeFirst), func(t *testing.T) {
			l := newLife(t, eightCPUs(t))
			pod := l.sandbox(l.pod("gu", 2000))
			app := l.create(pod, "app", 2000)
			if err := l.resize(app, 4000); err != nil {
				t.Fatal(err)
			}
			l.exit(app, 1)
			if removeFirst {
				l.remove(app)
			}
			again := l.create(pod, "app", 4000)
			if !removeFirst {
				l.remove(app)
			}
			l.want("re-created", again, "1-4", "0,5-7")
			if err := l.resize(again, 1000); err == nil || !strings.Contains(err.Error(), "prohibitedCPUAllocationError") {
				t.Errorf("shrink below the baseline after the re-creation: %v, want prohibitedCPUAllocationError", err)
			}
		})
	}
}

// TestSidecarKeepsItsCPUs: the kubelet lets a pod's app container reuse
// an ordinary init container's CPUs, never a sidecar's. A sidecar that
// crashes while the app container is created keeps its CPUs when the
// pod's spec says it is a sidecar, and when it crashed (exit code not 0);
// one that exited with 0 without the spec is taken for an init container,
// and its restart moves to other CPUs with a warning, never onto the app
// container's.
func TestSidecarKeepsItsCPUs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		total     int64
		roles     []string
		code      int32
		appCPUs   string
		pool      string
		sidecar   string
		warnMoved bool
	}{
		{"spec known", 2000, []string{"side=sidecar", "app=app"}, 0, "2", "0,3-7", "1", false},
		{"crashed, spec unknown", 2000, nil, 1, "2", "0,3-7", "1", false},
		{"exited 0, spec unknown", 2000, nil, 0, "1", "0,2-7", "2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLife(t, eightCPUs(t))
			pod := l.sandbox(l.pod("gu", tc.total, tc.roles...))
			side := l.create(pod, "side", 1000)
			l.exit(side, tc.code)
			app := l.create(pod, "app", 1000)
			l.want("app created", app, tc.appCPUs, tc.pool)
			side2 := l.create(pod, "side", 1000)
			if got := l.cpus(side2).String(); got != tc.sidecar {
				t.Errorf("sidecar restarts on %s, want %s", got, tc.sidecar)
			}
			if moved := len(l.warnings) > 0; moved != tc.warnMoved {
				t.Errorf("warnings %q, want a warning of a move: %v", l.warnings, tc.warnMoved)
			}
		})
	}
}

// TestCompletedPodGivesItsCPUsBack: the kubelet gives back the CPUs of a
// pod that turned terminal (a completed Job) although its sandbox and dead
// containers stay; a pod reported ended while a container still runs (a
// forced deletion) gives them back when it stops.
func TestCompletedPodGivesItsCPUsBack(t *testing.T) {
	l := newLife(t, eightCPUs(t))
	job := l.sandbox(l.pod("job", 2000))
	worker := l.create(job, "worker", 2000)
	l.exit(worker, 0)
	l.step("ended", l.pol.EndPod(l.m, job.UID))
	if got := l.pool(); got != "0-7" {
		t.Errorf("shared pool %s after the Job completed, want 0-7", got)
	}
	l.remove(worker)
	l.removeSandbox(job)

	forced := l.sandbox(l.pod("forced", 2000))
	c := l.create(forced, "app", 2000)
	l.step("deleted while running", l.pol.EndPod(l.m, forced.UID))
	l.want("still running", c, "1-2", "0,3-7")
	l.exit(c, 137)
	if got := l.pool(); got != "0-7" {
		t.Errorf("shared pool %s once the last container of the ended pod stopped, want 0-7", got)
	}
}

// TestHoldSettlesWithAStoppedSibling: a pod's resize that completes while
// one of its containers is stopped (crashing) returns the CPUs held for
// it: the stopped container still counts in the pod's total.
func TestHoldSettlesWithAStoppedSibling(t *testing.T) {
	l := newLife(t, eightCPUs(t))
	pod := l.sandbox(l.pod("gu", 4000))
	big := l.create(pod, "big", 2000)
	small := l.create(pod, "small", 2000)
	l.podUpdate(pod, 6000)
	if err := l.resize(big, 4000); err != nil {
		t.Fatal(err)
	}
	l.exit(small, 1)
	if err := l.resize(big, 2000); err != nil {
		t.Fatal(err)
	}
	if _, held := l.m.State.Hold(pod.UID); !held {
		t.Fatalf("the decrease's CPUs are not held while the pod's resize is in flight")
	}
	l.podUpdate(pod, 4000)
	if h, held := l.m.State.Hold(pod.UID); held {
		t.Errorf("CPUs %s still held once the pod's total is its containers'", h.CPUs)
	}
}

// TestPodScopeCountsTheKubeletsNeed: under topologyManagerScope: pod the
// topology manager admits the pod's exclusive CPUs; a fractional
// container's limit is in the pod's total but not in what the kubelet
// pins. With the pod's spec, the need is the kubelet's; without it, the
// pod's total in whole CPUs.
func TestPodScopeCountsTheKubeletsNeed(t *testing.T) {
	pol := eightCoresWith(t, 2, policy.Options{TopologyPolicy: cpuallocator.TopologySingleNUMANode, TopologyScope: cpuallocator.ScopePod})
	for _, tc := range []struct {
		name       string
		guaranteed int
		refused    bool
	}{
		{"spec known: 3 whole CPUs", 3, false},
		{"spec unknown: 4500m counts as 4", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLife(t, pol)
			l.create(l.sandbox(l.pod("other", 3000)), "app", 3000)  // fills NUMA node 0: 1-3
			l.create(l.sandbox(l.pod("other2", 1000)), "app", 1000) // leaves 3 CPUs of node 1
			pod := l.pod("mixed", 4500)
			pod.GuaranteedCPUs = tc.guaranteed
			pod = l.sandbox(pod)
			_, err := l.tryCreate(pod, "app", 3000)
			if refused := err != nil; refused != tc.refused {
				t.Errorf("refused %v (%v), want %v", refused, err, tc.refused)
			}
		})
	}
}

// TestResizeWithAnUnchangedTotalIsDecidedWhole: a resize that moves CPUs
// from one container of a pod to another changes no pod total, so the
// kubelet sends no UpdatePodSandbox: the decrease comes first, alone.
// With the pod's spec the whole resize is decided at the decrease, and a
// sibling's growth that cannot be placed refuses it (nothing applied);
// without the spec only the growth is refused, and the decrease stays.
func TestResizeWithAnUnchangedTotalIsDecidedWhole(t *testing.T) {
	pol := eightCoresWith(t, 2, policy.Options{TopologyPolicy: cpuallocator.TopologySingleNUMANode})
	for _, withSpec := range []bool{true, false} {
		t.Run(fmt.Sprintf("spec known: %v", withSpec), func(t *testing.T) {
			l := newLife(t, pol)
			pod := l.sandbox(l.pod("gu", 4000))
			c1 := l.create(pod, "c1", 2000)
			c2 := l.create(pod, "c2", 2000)
			l.podUpdate(pod, 5000)
			if err := l.resize(c1, 3000); err != nil {
				t.Fatal(err)
			}
			l.create(l.sandbox(l.pod("other", 2000)), "app", 2000)
			l.want("before", c1, "1-3", "0")
			if got := l.cpus(c2).String(); got != "4-5" {
				t.Fatalf("c2 on %s, want 4-5", got)
			}
			// The spec: c1 to 2 CPUs, c2 to 3; the pod's total stays 5.
			c := l.running[c1]
			asked := scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)
			var spec policy.PodSpec
			if withSpec {
				spec = policy.PodSpec{"c1": asked, "c2": scenario.KubeletResources("guaranteed", 3000, 3000, 1<<30)}
			}
			d, err := pol.UpdateContainerWithSpec(l.m, c, asked, spec)
			if withSpec {
				if err == nil || !strings.Contains(err.Error(), "TopologyAffinity") && !strings.Contains(err.Error(), "resizeAllocateCPUsError") || !strings.Contains(err.Error(), "container c2") {
					t.Fatalf("the decrease of a resize whose growth cannot be placed: %v, want c2's refusal", err)
				}
				l.want("refused as a whole", c1, "1-3", "0")
				return
			}
			if err != nil {
				t.Fatalf("without the spec the decrease is the container level's: %v", err)
			}
			l.step("decrease", d)
			if err := l.resize(c2, 3000); err == nil {
				t.Errorf("c2's growth onto another NUMA node was placed under single-numa-node")
			}
		})
	}
}

// TestScaleDownDelay: with scaleDownDelay the CPUs a decrease releases
// stay with the container until the delay is over, so its application
// can move its threads off them: its cpuset does not change at the
// decrease, a growth takes them back first, and once the delay is over
// the container shrinks (an unsolicited update) and, once that is
// applied, the shared pool gets them. A restart ends the delay at once.
func TestScaleDownDelay(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pol := eightCoresWith(t, 1, policy.Options{ScaleDownDelay: 10 * time.Second, Now: func() time.Time { return now }})
	l := newLife(t, pol)
	pod := l.sandbox(l.pod("gu", 2000))
	app := l.create(pod, "app", 2000)
	if err := l.resize(app, 5000); err != nil {
		t.Fatal(err)
	}
	l.want("grown", app, "1-5", "0,6-7")
	if err := l.resize(app, 3000); err != nil {
		t.Fatal(err)
	}
	l.want("shrunk, delayed", app, "1-5", "0,6-7")
	a, _ := l.m.State.Assignment(pod.UID, "app")
	if a.Assigned().String() != "1-3" || a.Delayed.String() != "4-5" || !a.ReleaseAt.Equal(now.Add(10*time.Second)) {
		t.Errorf("assignment %+v, want assigned 1-3 keeping 4-5 until %s", a, now.Add(10*time.Second))
	}
	if err := l.resize(app, 4000); err != nil {
		t.Fatal(err)
	}
	l.want("grown back into its delayed CPUs", app, "1-5", "0,6-7")
	if a, _ := l.m.State.Assignment(pod.UID, "app"); a.Assigned().Size() != 4 || a.Delayed.Size() != 1 {
		t.Errorf("assignment %+v, want 4 assigned and 1 delayed", a)
	}
	if err := l.resize(app, 3000); err != nil {
		t.Fatal(err)
	}
	if d := pol.ReleaseDelayed(l.m); d.Model != l.m {
		t.Errorf("released before the delay is over: %v", d.Notes)
	}
	now = now.Add(10 * time.Second)
	d := pol.ReleaseDelayed(l.m)
	if len(d.Updates()) != 1 || d.Updates()[0].ContainerID != app || d.Updates()[0].CPUSet().String() != "1-3" {
		t.Fatalf("updates %+v once the delay is over, want %s to 1-3", d.Updates(), app)
	}
	l.step("delay over", d)
	if got := l.pool(); got != "0,6-7" {
		t.Errorf("shared pool %s before the runtime applied the shrink, want 0,6-7", got)
	}
	l.step("applied", pol.Confirm(l.m, app))
	l.want("released", app, "1-3", "0,4-7")

	if err := l.resize(app, 5000); err != nil {
		t.Fatal(err)
	}
	if err := l.resize(app, 2000); err != nil {
		t.Fatal(err)
	}
	l.exit(app, 137)
	if got := l.pool(); got != "0,3-7" {
		t.Errorf("shared pool %s once the container stopped, want 0,3-7 (its delayed CPUs back)", got)
	}
	again := l.create(pod, "app", 2000)
	l.want("restarted", again, "1-2", "0,3-7")
}

// TestInitContainerCompletedWhileThePluginWasAway: without the pod's spec,
// an init container that completed while the plugin restarted is not
// listed by the Synchronize (the runtime lists no exited container); the
// app container created next reuses its CPUs, because the pod's total
// (max(init, app), the sandbox's CPU limit) cannot hold both — it used to
// be put on the shared pool for exceeding it.
func TestInitContainerCompletedWhileThePluginWasAway(t *testing.T) {
	l := newLife(t, eightCPUs(t))
	pod := l.sandbox(l.pod("gu", 2000))
	init := l.create(pod, "init", 2000)
	initCPUs := l.cpus(init)
	d := l.pol.Synchronize(l.m, []policy.Pod{pod}, nil)
	l.step("synchronize", d)
	app := l.create(pod, "app", 2000)
	if got := l.cpus(app); !got.Equals(initCPUs) {
		t.Errorf("app runs on %s, want its pod's init container's CPUs %s", got, initCPUs)
	}
	if !l.m.Owns(app) {
		t.Errorf("app is not pinned")
	}
}

// TestSidecarGrowthLeavesTheInitContainersAfterIt: a sidecar runs beside
// the init containers declared after it, and runs beside them again when
// the pod runs again: its growth never takes their CPUs, which the app
// container after them may reuse. The spec says so; without it, what the
// plugin saw of the creations; after the plugin restarted without the
// spec, nothing tells a sidecar from an app container and a growth takes
// free CPUs only.
func TestSidecarGrowthLeavesTheInitContainersAfterIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    bool
		restart bool
		grow    string // the container that grows
		want    string // its CPUs after the growth
	}{
		{"sidecar, spec known", true, false, "side", "1,4"},
		{"sidecar, spec unknown", false, false, "side", "1,4"},
		{"sidecar, spec unknown, plugin restarted", false, true, "side", "1,4"},
		{"app, spec known", true, false, "app", "2-3"},
		{"app, spec unknown", false, false, "app", "2-3"},
		{"app, spec unknown, plugin restarted", false, true, "app", "2,4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLife(t, eightCPUs(t))
			var roles []string
			if tc.spec {
				roles = []string{"side=sidecar", "init=init", "app=app"}
			}
			pod := l.pod("gu", 3000, roles...)
			if tc.spec {
				pod.Containers = []policy.SpecContainer{{Name: "side", Role: policy.RoleSidecar, CPUs: 1},
					{Name: "init", Role: policy.RoleInit, CPUs: 2}, {Name: "app", Role: policy.RoleApp, CPUs: 1}}
				pod.GuaranteedCPUs = 3
			}
			pod = l.sandbox(pod)
			ids := map[string]string{"side": l.create(pod, "side", 1000)}
			init := l.create(pod, "init", 2000)
			l.want("init created", init, "2-3", "0,4-7")
			l.exit(init, 0)
			ids["app"] = l.create(pod, "app", 1000)
			l.want("app created", ids["app"], "2", "0,4-7")
			if tc.restart {
				var running []policy.Container
				for _, name := range []string{"side", "app"} {
					running = append(running, l.running[ids[name]])
				}
				l.step("plugin restarted", l.pol.Synchronize(policy.NewModel(l.m.State), []policy.Pod{pod}, running))
			}
			if err := l.resize(ids[tc.grow], 2000); err != nil {
				t.Fatalf("growth of %s: %v", tc.grow, err)
			}
			if got := l.cpus(ids[tc.grow]).String(); got != tc.want {
				t.Errorf("%s grew onto %s, want %s", tc.grow, got, tc.want)
			}
		})
	}
}

// TestStoppedMemberKeepsItsLimitOnceRemoved: a pod resize compares the
// spec of a member that does not run with the CPU limit the kubelet last
// started it with, whether or not the runtime removed the dead container
// since: a sidecar that restarted on its 2 CPUs after its shrink to 1 was
// refused is not asked to shrink again by its pod's next resize.
func TestStoppedMemberKeepsItsLimitOnceRemoved(t *testing.T) {
	for _, removed := range []bool{false, true} {
		t.Run(fmt.Sprintf("removed=%v", removed), func(t *testing.T) {
			l := newLife(t, eightCPUs(t))
			pod := l.sandbox(l.pod("gu", 3000, "side=sidecar", "app=app"))
			side := l.create(pod, "side", 2000)
			app := l.create(pod, "app", 1000)
			if err := l.resize(side, 1000); err == nil {
				t.Fatal("the sidecar shrank below its baseline")
			}
			l.exit(side, 137)
			side2 := l.create(pod, "side", 1000) // the kubelet's spec: restarts on its 2 CPUs
			l.want("sidecar restarted", side2, "1-2", "0,4-7")
			l.exit(side2, 0)
			if removed {
				l.remove(side)
				l.remove(side2)
			}
			spec := policy.PodSpec{"side": scenario.KubeletResources("guaranteed", 1000, 1000, 1<<30),
				"app": scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)}
			d, err := l.pol.UpdatePodSandboxWithSpec(l.m, pod, policy.PodResources{Resources: scenario.KubeletResources("guaranteed", 3000, 3000, 2<<30)}, spec)
			if err != nil {
				t.Fatalf("the app's growth was refused for the stopped sidecar: %v", err)
			}
			l.step("pod update", d)
			if err := l.resize(app, 2000); err != nil {
				t.Fatalf("app growth: %v", err)
			}
		})
	}
}

// TestGrowthAfterItsSiblingsDecrease: the kubelet sends a pod resize's
// decreases last container first, by CPU limit; a container that
// restarted on fewer CPUs than its limit (its growth was refused while it
// was down) has its limit lowered and its CPUs raised by a resize whose
// other part, a sibling's decrease, frees what it needs. With the pod's
// spec the sibling's decrease is applied first, in the same reply, and
// the sibling's own request later changes nothing; without the spec the
// growth is refused, as each part is decided alone.
func TestGrowthAfterItsSiblingsDecrease(t *testing.T) {
	pol := eightCPUs(t)
	for _, withSpec := range []bool{true, false} {
		t.Run(fmt.Sprintf("spec known: %v", withSpec), func(t *testing.T) {
			l := newLife(t, pol)
			pod := l.sandbox(l.pod("gu", 3000))
			c1 := l.create(pod, "c1", 1000)
			c2 := l.create(pod, "c2", 2000)
			l.podUpdate(pod, 4000)
			if err := l.resize(c1, 2000); err != nil {
				t.Fatal(err)
			}
			l.create(l.sandbox(l.pod("other", 3000)), "app", 3000)
			l.exit(c2, 1)
			c2 = l.create(pod, "c2", 4000) // restarts on its 2 CPUs
			l.want("c2 restarted on its own CPUs", c2, "2-3", "0")
			asked := scenario.KubeletResources("guaranteed", 3000, 3000, 1<<30)
			var spec policy.PodSpec
			if withSpec {
				spec = policy.PodSpec{"c1": scenario.KubeletResources("guaranteed", 1000, 1000, 1<<30), "c2": asked}
			}
			d, err := pol.UpdateContainerWithSpec(l.m, l.running[c2], asked, spec)
			if !withSpec {
				if err == nil || !strings.Contains(err.Error(), "resizeAllocateCPUsError") {
					t.Fatalf("c2's growth without the spec: %v, want resizeAllocateCPUsError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("c2's growth with its sibling's decrease in the spec: %v", err)
			}
			if len(d.Updates()) == 0 || d.Updates()[0].ContainerID != c1 {
				t.Fatalf("updates before c2's %+v, want c1's decrease first", d.Updates())
			}
			l.step("c2 grows after c1's decrease", d)
			if got := l.cpus(c1).Size(); got != 1 {
				t.Errorf("c1 on %s, want 1 CPU", l.cpus(c1))
			}
			if got := l.cpus(c2); got.Size() != 3 || !cpuset.New(2, 3).IsSubsetOf(got) || got.Intersection(l.cpus(c1)).Size() != 0 {
				t.Errorf("c2 on %s, want 3 CPUs keeping 2-3 apart from c1's %s", got, l.cpus(c1))
			}
			if err := l.resize(c1, 1000); err != nil {
				t.Errorf("c1's own request, after its decrease was applied: %v", err)
			}
			if got := l.cpus(c1).Size(); got != 1 {
				t.Errorf("c1 on %s after its own request, want 1 CPU", l.cpus(c1))
			}
		})
	}
}

// TestHoldEndsWithALimitOnlyResize: the resize that makes a pod's
// containers add up to its total again may change only a container's
// limit (it restarted on more CPUs than its limit after a refused
// decrease): the CPUs held for the pod then return to the shared pool,
// the shared containers grow into them in the same reply, and the model
// the decision was given is left as it was.
func TestHoldEndsWithALimitOnlyResize(t *testing.T) {
	l := newLife(t, eightCPUs(t))
	pod := l.sandbox(l.pod("gu", 3000))
	c1 := l.create(pod, "c1", 1000)
	c2 := l.create(pod, "c2", 2000)
	shared := l.create(l.sandbox(l.pod("small", 500)), "app", 500)
	l.podUpdate(pod, 4000)
	if err := l.resize(c1, 2000); err != nil {
		t.Fatal(err)
	}
	l.exit(c2, 1)
	c2 = l.create(pod, "c2", 1000) // below its baseline: restarts on its 2 CPUs
	if err := l.resize(c1, 1000); err != nil {
		t.Fatal(err)
	}
	h, held := l.m.State.Hold(pod.UID)
	if !held {
		t.Fatalf("c1's decrease while the pod's resize is in flight holds nothing")
	}
	l.podUpdate(pod, 3000)
	given := l.m.State.Clone()
	d, err := l.pol.UpdateContainer(l.m, l.running[c2], scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30))
	if err != nil {
		t.Fatalf("c2's resize to the 2 CPUs it runs on: %v", err)
	}
	if !l.m.State.Equal(given) {
		t.Fatalf("the decision changed the model it was given")
	}
	if _, still := d.Model.State.Hold(pod.UID); still {
		t.Errorf("CPUs %s still held once the pod adds up", h.CPUs)
	}
	grown := false
	for _, u := range d.Updates() {
		grown = grown || u.ContainerID == shared && h.CPUs.IsSubsetOf(u.CPUSet())
	}
	if !grown {
		t.Errorf("updates %+v: the shared container does not grow into the CPUs %s the pod held", d.Updates(), h.CPUs)
	}
	l.step("c2 resized", d)
}

// TestPodScopeShrinkAmongItsInitCPUs: under topologyManagerScope: pod an
// app container that took its init container's CPUs shrinks within them:
// the CPUs the init container's entry and the app share count once in
// the pod's affinity (they counted twice, and restricted refused a
// shrink the kubelet accepts).
func TestPodScopeShrinkAmongItsInitCPUs(t *testing.T) {
	pol := eightCoresWith(t, 2, policy.Options{TopologyPolicy: cpuallocator.TopologyRestricted, TopologyScope: cpuallocator.ScopePod})
	l := newLife(t, pol)
	pod := l.sandbox(l.pod("gu", 3000, "init0=init"))
	init0 := l.create(pod, "init0", 3000)
	l.exit(init0, 0)
	app := l.create(pod, "app0", 1000)
	if err := l.resize(app, 3000); err != nil {
		t.Fatalf("growth onto its init container's CPUs: %v", err)
	}
	l.want("grown", app, "1-3", "0,4-7")
	if err := l.resize(app, 2000); err != nil {
		t.Fatalf("shrink within its init container's CPUs: %v", err)
	}
	if got := l.cpus(app); got.Size() != 2 || !got.IsSubsetOf(cpuset.New(1, 2, 3)) {
		t.Errorf("shrunk to %s, want 2 of 1-3", got)
	}
}

// TestSidecarGrowthAfterItsSiblingsGrowth: under topologyManagerScope:
// pod the kubelet sends a sidecar's increase before the app container's,
// but the pod's resize was admitted whole, in the members' order: the app
// container's growth makes the pod's count one that only two NUMA nodes
// hold, which restricted then admits, where the sidecar's growth alone
// spreads a count one node holds over two. With the pod's spec the app
// container's growth is applied first, in the same reply; without it the
// sidecar's growth is refused.
func TestSidecarGrowthAfterItsSiblingsGrowth(t *testing.T) {
	pol := eightCoresWith(t, 2, policy.Options{TopologyPolicy: cpuallocator.TopologyRestricted, TopologyScope: cpuallocator.ScopePod})
	for _, withSpec := range []bool{true, false} {
		t.Run(fmt.Sprintf("spec known: %v", withSpec), func(t *testing.T) {
			l := newLife(t, pol)
			pod := l.sandbox(l.pod("gu", 3000, "side=sidecar"))
			side := l.create(pod, "side", 2000)
			app := l.create(pod, "app", 1000)
			l.want("the pod on node 0", app, "3", "0,4-7")
			l.podUpdate(pod, 6000)
			asked := scenario.KubeletResources("guaranteed", 3000, 3000, 1<<30)
			var spec policy.PodSpec
			if withSpec {
				spec = policy.PodSpec{"side": asked, "app": asked}
			}
			d, err := pol.UpdateContainerWithSpec(l.m, l.running[side], asked, spec)
			if !withSpec {
				if err == nil {
					t.Fatalf("the sidecar's growth alone onto a second node was accepted under restricted")
				}
				return
			}
			if err != nil {
				t.Fatalf("the sidecar's growth after the app container's: %v", err)
			}
			grewFirst := false
			for _, u := range d.Updates() {
				grewFirst = grewFirst || u.ContainerID == app && u.CPUSet().Size() == 3
			}
			if !grewFirst {
				t.Fatalf("updates before the sidecar's %+v, want the app container's growth to 3 CPUs", d.Updates())
			}
			l.step("the sidecar grows after the app container", d)
			if got := l.cpus(side); got.Size() != 3 || !cpuset.New(1, 2).IsSubsetOf(got) || got.Intersection(l.cpus(app)).Size() != 0 {
				t.Errorf("the sidecar on %s, the app container on %s", got, l.cpus(app))
			}
			if err := l.resize(app, 3000); err != nil {
				t.Errorf("the app container's own request, after its growth was applied: %v", err)
			}
		})
	}
}

// guaranteedCPU is a Guaranteed container's resources of milli milli-CPUs
// (and 1 GiB), as the kubelet sends them.
func guaranteedCPU(milli int64) policy.Resources {
	return scenario.KubeletResources("guaranteed", milli, milli, 1<<30)
}

// podTotal is a Guaranteed pod's resources of milli milli-CPUs in all, as
// UpdatePodSandbox sends them.
func podTotal(milli int64) policy.PodResources {
	return policy.PodResources{Resources: scenario.KubeletResources("guaranteed", milli, milli, 2<<30)}
}

// TestStoppedMemberGrowsWhenItsSiblingsDecreaseIsConfirmed: a pod resize
// shrinks a running container and grows one that does not run (it
// crashed) into the CPU the shrink releases. At UpdatePodSandbox the free
// CPUs cannot hold the growth, which waits; when the runtime confirms the
// decrease the stopped member takes the released CPU, as the KEP-5554
// kubelet allocates the whole resize when it admits it, and the pod's hold
// ends. Confirm without the spec leaves the growth to its re-creation.
func TestStoppedMemberGrowsWhenItsSiblingsDecreaseIsConfirmed(t *testing.T) {
	for _, withSpec := range []bool{true, false} {
		t.Run(fmt.Sprintf("spec known: %v", withSpec), func(t *testing.T) {
			l := newLife(t, eightCPUs(t))
			pod := l.sandbox(l.pod("gu", 4000))
			app0 := l.create(pod, "app0", 1000)
			app1 := l.create(pod, "app1", 3000)
			l.create(l.sandbox(l.pod("other", 1000)), "app", 1000)
			l.podUpdate(pod, 5000)
			if err := l.resize(app0, 2000); err != nil {
				t.Fatal(err)
			}
			// app0 on 1 and one CPU more, app1 on 3, other on 1: one free.
			l.want("app0 grown", app1, "2-4", "0,7")
			released := l.cpus(app0).Difference(cpuset.New(1))
			l.exit(app1, 1)
			spec := policy.PodSpec{"app0": guaranteedCPU(1000), "app1": guaranteedCPU(5000)}
			d, err := l.pol.UpdatePodSandboxWithSpec(l.m, pod, podTotal(6000), spec)
			if err != nil {
				t.Fatalf("pod growth: %v", err)
			}
			l.step("pod update", d)
			c := l.running[app0]
			d, err = l.pol.UpdateContainerWithSpec(l.m, c, guaranteedCPU(1000), spec)
			if err != nil {
				t.Fatalf("app0's decrease: %v", err)
			}
			l.step("app0's decrease", d)
			if withSpec {
				d = l.pol.ConfirmWithSpec(l.m, app0, pod, spec)
			} else {
				d = l.pol.Confirm(l.m, app0)
			}
			l.step("app0's decrease confirmed", d)
			want := cpuset.New(2, 3, 4, 7).Union(released).String()
			if !withSpec {
				want = "2-4"
			}
			if a, _ := l.m.State.Assignment(pod.UID, "app1"); a.Assigned().String() != want {
				t.Errorf("app1 (not running) holds %s, want %s", a.Assigned(), want)
			}
			if h, held := l.m.State.Hold(pod.UID); held == withSpec {
				t.Errorf("the pod's hold: %v (%s), want one only when app1 could not grow", held, h.CPUs)
			}
		})
	}
}

// TestSynchronizeKeepsAStoppedMembersLimit: containerd restarts while a
// pod's member is stopped (in crash back-off); the Synchronize does not
// list it, and the plugin keeps the limit the kubelet last started it
// with, so a pod resize whose spec asks it for fewer CPUs than its
// baseline is refused as a whole, as the kubelet's admission refuses it,
// not taken for a member the plugin knows nothing of.
func TestSynchronizeKeepsAStoppedMembersLimit(t *testing.T) {
	l := newLife(t, eightCPUs(t))
	pod := l.sandbox(l.pod("gu", 4000))
	app0 := l.create(pod, "app0", 1000)
	app1 := l.create(pod, "app1", 3000)
	l.exit(app1, 137)
	l.step("containerd restarted", l.pol.Synchronize(l.m, []policy.Pod{pod}, []policy.Container{l.running[app0]}))
	spec := policy.PodSpec{"app0": guaranteedCPU(3000), "app1": guaranteedCPU(1000)}
	_, err := l.pol.UpdatePodSandboxWithSpec(l.m, pod, podTotal(4000), spec)
	if err == nil || !strings.Contains(err.Error(), "prohibitedCPUAllocationError") || !strings.Contains(err.Error(), "container app1") {
		t.Errorf("the pod resize that shrinks the stopped app1 below its baseline: %v, want it refused prohibitedCPUAllocationError for app1", err)
	}
}

// TestStoppedMemberLimitIsItsLatestInstances: of a stopped member's two
// dead instances, a pod resize reads the limit of the one the kubelet
// started last (the runtime's ids, sorted, put it first here), before
// and after a containerd restart: app1 restarted with 2 CPUs on its 3
// (a shrink below its baseline was refused), so a spec that asks it 2
// changes nothing of it and the app's growth is admitted.
func TestStoppedMemberLimitIsItsLatestInstances(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("containerd restarted: %v", restart), func(t *testing.T) {
			l := newLife(t, eightCPUs(t))
			pod := l.sandbox(l.pod("gu", 4000))
			app0 := l.create(pod, "app0", 1000)
			l.next = 8 // app1's instances: gu-app1-9, then gu-app1-10
			first := l.create(pod, "app1", 3000)
			l.exit(first, 1)
			second := l.create(pod, "app1", 2000) // restarts on its 3 CPUs
			l.exit(second, 1)
			if first != "gu-app1-9" || second != "gu-app1-10" {
				t.Fatalf("instances %s, %s: the case needs the later one sorted first", first, second)
			}
			if restart {
				l.step("containerd restarted", l.pol.Synchronize(l.m, []policy.Pod{pod}, []policy.Container{l.running[app0]}))
			}
			spec := policy.PodSpec{"app0": guaranteedCPU(2000), "app1": guaranteedCPU(2000)}
			d, err := l.pol.UpdatePodSandboxWithSpec(l.m, pod, podTotal(4000), spec)
			if err != nil {
				t.Fatalf("the app's growth, app1 asked the 2 CPUs it last started with: %v", err)
			}
			l.step("pod update", d)
		})
	}
}

// TestGrowthOntoACompletedSiblingMarksItInit: without the pod's spec, a
// completed container is taken for an init container, whose CPUs its pod's
// later containers may reuse — by a growth as by a creation. The entry the
// growth takes CPUs from becomes an init container's, so that the state
// stays one the checkpoint accepts (two of a pod's entries share CPUs only
// when one is an init container's; TestSidecarKeepsItsCPUs shows where
// such a container restarts).
func TestGrowthOntoACompletedSiblingMarksItInit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resize func(l *life, pod policy.Pod, id string) error
	}{
		{"UpdateContainer", func(l *life, _ policy.Pod, id string) error { return l.resize(id, 3000) }},
		{"re-creation with the larger count", func(l *life, pod policy.Pod, id string) error {
			l.exit(id, 1)
			_, err := l.tryCreate(pod, "app1", 3000)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLife(t, eightCPUs(t)) // CPUs 1-7 allocatable
			pod := l.sandbox(l.pod("gu", 3000))
			app0 := l.create(pod, "app0", 1000)
			app1 := l.create(pod, "app1", 2000)
			other := l.sandbox(l.pod("other", 3000))
			l.create(other, "app", 3000) // one CPU left, the shared pool's
			l.exit(app0, 0)
			lent, _ := l.m.State.Assignment(pod.UID, "app0")
			taken := lent.Held()
			if err := tc.resize(l, pod, app1); err != nil {
				t.Fatalf("growth of app1 onto its completed sibling's CPUs: %v", err)
			}
			grown, _ := l.m.State.Assignment(pod.UID, "app1")
			if grown.Held().Size() != 3 || !taken.IsSubsetOf(grown.Held()) {
				t.Fatalf("app1 holds %s, want 3 CPUs with app0's %s", grown.Held(), taken)
			}
			if a, _ := l.m.State.Assignment(pod.UID, "app0"); !a.Init {
				t.Errorf("app0's entry %+v is not an init container's after its CPUs were reused", a)
			}
		})
	}
}

// TestPutBackResizeOfABackOffMemberEndsTheHold: the kubelet re-created a
// member in crash back-off with a count that did not fit, and it restarted
// on its CPUs with the larger limit; its running sibling grew. The resize
// put back shrinks the sibling first: the pod does not add up (the
// member's latest instance has the larger limit, whatever the order of
// the runtime's ids), so the CPU the decrease released is held for the
// pod. UpdatePodSandbox then asks the stopped member its count again: its
// CPUs do not change, its limit does (the kubelet restarts it with the
// spec's), the pod adds up, and the held CPU goes back to the shared pool
// instead of waiting for the member's next restart (make e2e-vm-kube's
// back-off case).
func TestPutBackResizeOfABackOffMemberEndsTheHold(t *testing.T) {
	l := newLife(t, eightCPUs(t)) // CPUs 1-7 allocatable
	pod := l.sandbox(l.pod("gu", 3000))
	steady := l.create(pod, "steady", 1000)
	l.next = 9 // crash's instances: gu-crash-10 (2 CPUs), then gu-crash-11 (asking 5)
	crash := l.create(pod, "crash", 2000)
	l.create(l.sandbox(l.pod("other", 2000)), "app", 2000) // two free CPUs left, one the pool's
	l.exit(crash, 1)
	if err := l.resize(steady, 2000); err != nil {
		t.Fatalf("steady's growth: %v", err)
	}
	l.next = 10
	again := l.create(pod, "crash", 5000) // restarts on its 2 CPUs
	if len(l.warnings) == 0 {
		t.Fatalf("crash re-created with 5 CPUs: no warning; it should restart on its 2")
	}
	l.exit(again, 1)
	if crash != "gu-crash-10" || again != "gu-crash-11" {
		t.Fatalf("instances %s, %s: the case needs the earlier one sorted first", crash, again)
	}
	grown := l.cpus(steady)

	spec := policy.PodSpec{"steady": guaranteedCPU(1000), "crash": guaranteedCPU(2000)}
	d, err := l.pol.UpdateContainer(l.m, l.running[steady], guaranteedCPU(1000))
	if err != nil {
		t.Fatalf("steady's decrease: %v", err)
	}
	l.step("steady's decrease", d)
	l.step("steady's decrease confirmed", l.pol.Confirm(l.m, steady))
	released := grown.Difference(l.cpus(steady))
	if h, held := l.m.State.Hold(pod.UID); !held || !h.CPUs.Equals(released) {
		t.Fatalf("after steady's decrease %s → %s: held %v %s, want %s held (crash's latest limit is 5 CPUs: the pod does not add up)", grown, l.cpus(steady), held, h.CPUs, released)
	}
	d, err = l.pol.UpdatePodSandboxWithSpec(l.m, pod, podTotal(3000), spec)
	if err != nil {
		t.Fatalf("the pod's resize put back: %v", err)
	}
	l.step("pod update", d)
	if h, held := l.m.State.Hold(pod.UID); held {
		t.Errorf("CPUs %s held for the pod after its resize was put back, want none", h.CPUs)
	}
	if !released.IsSubsetOf(l.m.SharedPool()) {
		t.Errorf("the shared pool %s should have the CPU %s steady released", l.m.SharedPool(), released)
	}
}

// TestStoppedMemberKeepsTheSpecLimitItRestartedWith: a member whose
// shrink below its baseline was refused is re-created with the spec's
// smaller count and restarts on its CPUs; stopped, it keeps that limit
// through the pod's later resizes, which ask it the same: each growth of
// its sibling is accepted (the member is not asked to shrink again), as
// the kubelet, whose spec already says that limit, resizes only the
// sibling (lifecycle seed 7, life 10).
func TestStoppedMemberKeepsTheSpecLimitItRestartedWith(t *testing.T) {
	l := newLife(t, eightCPUs(t)) // CPUs 1-7 allocatable
	pod := l.sandbox(l.pod("gu", 3000))
	side := l.create(pod, "side", 2000)
	app := l.create(pod, "app", 1000)
	if err := l.resize(side, 1000); err == nil {
		t.Fatalf("side's shrink below its baseline accepted")
	}
	l.exit(side, 1)
	again := l.create(pod, "side", 1000) // restarts on its 2 CPUs
	if l.cpus(again).Size() != 2 {
		t.Fatalf("side re-created with 1 CPU runs on %s, want its 2 baseline CPUs", l.cpus(again))
	}
	l.exit(again, 1)
	for _, appMilli := range []int64{2000, 3000} {
		spec := policy.PodSpec{"side": guaranteedCPU(1000), "app": guaranteedCPU(appMilli)}
		d, err := l.pol.UpdatePodSandboxWithSpec(l.m, pod, podTotal(1000+appMilli), spec)
		if err != nil {
			t.Fatalf("pod resize growing app to %dm, side stopped at the spec's 1000m: %v", appMilli, err)
		}
		l.step("pod update", d)
		if err := l.resize(app, appMilli); err != nil {
			t.Fatalf("app's growth to %dm: %v", appMilli, err)
		}
		if got := l.cpus(app).Size(); got != int(appMilli/1000) {
			t.Errorf("app grown to %dm runs on %d CPUs", appMilli, got)
		}
	}
}

// TestSettleWithSpecEndsAHoldTheTotalsAloneKept: the resize of
// TestPutBackResizeOfABackOffMemberEndsTheHold put back while the API's
// view lagged: UpdatePodSandbox came without the pod's spec, so the
// stopped member kept the larger limit it was re-created with and the CPU
// the sibling's decrease released stayed held. The maintenance loop's
// catch-up with the spec, once the API has it, records the member's
// limit and returns the CPU to the shared pool; it changes nothing of a
// pod that holds nothing (make e2e-vm-kube's back-off case, which failed
// twice at that check on a loaded machine).
func TestSettleWithSpecEndsAHoldTheTotalsAloneKept(t *testing.T) {
	l := newLife(t, eightCPUs(t)) // CPUs 1-7 allocatable
	pod := l.sandbox(l.pod("gu", 3000))
	steady := l.create(pod, "steady", 1000)
	crash := l.create(pod, "crash", 2000)
	other := l.sandbox(l.pod("other", 2000))
	l.create(other, "app", 2000)                      // two free CPUs left, one the pool's
	l.create(l.sandbox(l.pod("frac", 500)), "c", 500) // on the shared pool
	l.exit(crash, 1)
	if err := l.resize(steady, 2000); err != nil {
		t.Fatalf("steady's growth: %v", err)
	}
	again := l.create(pod, "crash", 5000) // restarts on its 2 CPUs
	l.exit(again, 1)
	grown := l.cpus(steady)
	spec := policy.PodSpec{"steady": guaranteedCPU(1000), "crash": guaranteedCPU(2000)}

	if d := l.pol.SettleWithSpec(l.m, other, policy.PodSpec{"app": guaranteedCPU(2000)}); d.Model != l.m {
		t.Errorf("SettleWithSpec of a pod that holds nothing changed the model")
	}
	if err := l.resize(steady, 1000); err != nil {
		t.Fatalf("steady's decrease: %v", err)
	}
	l.podUpdate(pod, 3000) // the totals alone: the API's view lags
	released := grown.Difference(l.cpus(steady))
	if h, held := l.m.State.Hold(pod.UID); !held || !h.CPUs.Equals(released) {
		t.Fatalf("after the put-back on the totals alone: held %v %s, want %s held (crash's latest limit is 5 CPUs)", held, h.CPUs, released)
	}
	d := l.pol.SettleWithSpec(l.m, pod, spec)
	l.step("settle with the spec", d)
	if h, held := l.m.State.Hold(pod.UID); held {
		t.Errorf("CPUs %s still held after the catch-up with the spec", h.CPUs)
	}
	if !released.IsSubsetOf(l.m.SharedPool()) {
		t.Errorf("the shared pool %s should have the CPU %s steady released", l.m.SharedPool(), released)
	}
	if len(d.Updates()) == 0 {
		t.Errorf("the catch-up sent the shared containers nothing: they must grow into %s", released)
	}
}
