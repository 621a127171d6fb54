//go:build vmguest

package guest

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// What the admission and back-off cases (issue 39, item 5) rely on: the
// guest's NUMA nodes (TestTopology checks them), CPU 0 reserved by
// deploy/'s ConfigMap, and what the cases before them leave: "pinned"
// on 2-3 (node 0) and the shared pod, on the plugin's and the kubelet's
// single-numa-node policy (devicesOnTheirNode). The kubelet
// (cpuManagerPolicy none) admits pods against an allocatable of all 16
// CPUs; the plugin has 15 to give exclusively.
var (
	numaNode0, numaNode1 = must("0-7"), must("8-15")
	reservedCPUs         = must("0")
)

// The admission case's sizes: "admitted"'s init container (half a CPU:
// the shared pool), and "queued", which NUMA node 1 could hold before
// "admitted"'s app was admitted and no node can after.
const (
	admittedInitCPU = "500m"
	queuedCPUs      = 6
	// initDone is the file "admitted"'s init container waits for.
	initDone = "/dev/shm/init-done"
)

// podAdmittedWhole is issue 39's admission case on the real kubelet: the
// plugin admits a pod whole at its sandbox, as the kubelet's topology
// manager does, so a pod that comes while another's init container runs
// cannot take the CPUs (or the NUMA node) the first pod's app container
// was admitted with. Pod "admitted" has an init container of half a CPU
// (the shared pool), which runs until the test lets it end, and an app
// container that needs all of NUMA node 1 (node 0, with CPU 0 reserved
// and "pinned" on it, has fewer free CPUs): while the init container
// runs, before the app container exists, the checkpoint already has the
// app's CPUs. (An init container of whole CPUs would be placed on node 0,
// the lowest that fits, and its CPUs are the app container's to reuse:
// the kubelet admits the app container only on NUMA nodes that hold them,
// none of one node here, and so does the plugin; see
// test/scenarios/pod-admission-single-numa-node-two-sockets.yaml.) Pod
// "queued", created then, needs 6 CPUs: node 1 had them before
// "admitted"'s app was admitted, no node has them after. Its container's
// creation is refused (TopologyAffinityError: … is not admitted), which
// the kubelet shows as CreateContainerError and retries, the plugin says
// so in an AdmissionRefused event on the pod, and it takes nothing.
// "admitted"'s app then runs on the CPUs its admission gave it. Once
// "admitted" is deleted, the kubelet's next try starts "queued" on one
// NUMA node.
func (k *kube) podAdmittedWhole(ctx context.Context, shared *harness.Container, stateDir string) {
	t := k.t
	start := time.Now()
	// (The device case's last pod may still be going: its CPUs on node 1
	// come back once the plugin sees it end.)
	l := &lives{shared: shared, pool: e2etest.SettledCPUs(ctx, t, shared, "all of NUMA node 1 ("+numaNode1.String()+") shared", numaNode1.IsSubsetOf)}
	k.wantPool(ctx, l, "before the admission case")
	free := l.pool.Difference(reservedCPUs)
	free0, free1 := free.Intersection(numaNode0), free.Intersection(numaNode1)
	if !free1.Equals(numaNode1) || free0.Size() >= queuedCPUs {
		t.Fatalf("free CPUs %s: the case needs NUMA node 1 free and fewer than %d free CPUs on node 0", free, queuedCPUs)
	}
	// The kubelet admits both pods: 2 ("pinned") + 8 + 6 CPUs requested.
	t.Cleanup(func() { k.DeletePod(t, "admitted") })
	t.Cleanup(func() { k.DeletePod(t, "queued") })
	k.Apply(ctx, t, harness.PodManifest("admitted", k.Cluster.NodeName,
		harness.PodContainer{Name: "init", Init: true, Resources: guaranteedMilli(admittedInitCPU, "64Mi"), Command: waitForFile(initDone)},
		harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(free1.Size(), "64Mi")}))
	p := k.waitPod(ctx, "admitted", "its init container running", func(p *harness.KubePod) (bool, error) {
		s := p.InitContainer("init")
		return s != nil && s.State.Running != nil, nil
	})
	uid := p.Metadata.UID
	initCtr := k.Attach(ctx, t, p, "init")
	st := e2etest.ReadCheckpoint(t, stateDir, must(online))
	if a, ok := st.Assignment(uid, "init"); ok {
		t.Errorf("admitted: the checkpoint has an entry %+v of its init container of %s CPU, want none (the shared pool)", a, admittedInitCPU)
	}
	app, ok := st.Assignment(uid, "app")
	if !ok || !app.Baseline.Equals(free1) || !app.Assigned().Equals(free1) {
		t.Fatalf("admitted: the checkpoint's entry of its app container while its init container runs: %+v (present %v), want NUMA node 1's %s: the pod was not admitted whole at its sandbox",
			app, ok, free1)
	}
	// The shared pool shrinks at the admission, before the app exists.
	admitted := &lives{shared: shared, pool: l.pool.Difference(app.Baseline)}
	k.wantPool(ctx, admitted, "with admitted's init container running")
	wantCPUs(ctx, t, initCtr, admitted.pool.String())
	t.Logf("admitted: its init container runs on the shared pool %s, the checkpoint gives its app container (not created yet) %s, %v into the case",
		admitted.pool, app.Baseline, time.Since(start).Round(time.Second))

	k.Apply(ctx, t, harness.PodManifest("queued", k.Cluster.NodeName, harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(queuedCPUs, "64Mi")}))
	notAdmitted := regexp.MustCompile(`(Deferred|Infeasible): TopologyAffinityError: pod default/queued is not admitted`)
	q := k.waitPod(ctx, "queued", "its container's creation refused", func(p *harness.KubePod) (bool, error) {
		s := p.Container("app")
		if s != nil && s.State.Running != nil {
			return false, fmt.Errorf("it runs, on CPUs admitted's app container was admitted with")
		}
		return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason == "CreateContainerError" && notAdmitted.MatchString(s.State.Waiting.Message), nil
	})
	t.Logf("queued: %s: %s", q.Container("app").State.Waiting.Reason, q.Container("app").State.Waiting.Message)
	k.waitEvent(ctx, "queued", "AdmissionRefused", notAdmitted)
	if refs := e2etest.ReadCheckpoint(t, stateDir, must(online)).ContainersOfPod(q.Metadata.UID); len(refs) != 0 {
		t.Errorf("queued: the checkpoint has entries %v of a pod not admitted: it must take nothing", refs)
	}
	if s := k.Pod(ctx, t, "admitted").InitContainer("init"); s == nil || s.State.Running == nil {
		t.Fatalf("admitted: its init container %+v, want it still running: queued must be refused while it runs", s)
	}

	if _, err := initCtr.Exec(ctx, "touch", initDone); err != nil {
		t.Fatal(err)
	}
	p = k.WaitReady(ctx, t, "admitted")
	wantCPUs(ctx, t, k.Attach(ctx, t, p, "app"), app.Baseline.String())
	t.Logf("admitted: its app container runs on %s, %v into the case", app.Baseline, time.Since(start).Round(time.Second))
	k.wantPool(ctx, admitted, "while admitted runs")
	if s := k.Pod(ctx, t, "queued").Container("app"); s == nil || s.State.Running != nil {
		t.Errorf("queued: %+v, want its container still refused", s)
	}

	k.DeletePod(t, "admitted")
	q = k.WaitReady(ctx, t, "queued")
	got := exclusiveCPUs(ctx, t, k.Attach(ctx, t, q, "app"), queuedCPUs)
	if !got.IsSubsetOf(numaNode0) && !got.IsSubsetOf(numaNode1) {
		t.Errorf("queued: runs on %s, want CPUs of one NUMA node (single-numa-node)", got)
	}
	if a, ok := e2etest.ReadCheckpoint(t, stateDir, must(online)).Assignment(q.Metadata.UID, "app"); !ok || !a.Assigned().Equals(got) {
		t.Errorf("queued: the checkpoint's entry %+v (present %v), want %s", a, ok, got)
	}
	t.Logf("queued: started on %s once admitted was deleted, %v into the case", got, time.Since(start).Round(time.Second))
	k.DeletePod(t, "queued")
	k.wantPool(ctx, l, "after the admission case")
}

// crashLoop is the command of a container that fails 2 s after each start
// and says, in its termination message, where it ran (reportScript) and
// with which CPU quota (its cgroup's cpu.max).
var crashLoop = []string{"sh", "-c", reportScript +
	"; echo cpu.max: $(cat /sys/fs/cgroup/cpu.max) >> /dev/termination-log; sleep 2; exit 1"}

// quotaLine is crashLoop's cpu.max line.
var quotaLine = regexp.MustCompile(`(?m)^cpu\.max:\s*(.*?)\s*$`)

// backOffMessage is the kubelet's waiting message of a container in
// crash back-off, with the back-off's length.
var backOffMessage = regexp.MustCompile(`^back-off (\S+) restarting failed container`)

// backOffLeft is the part of crash's back-off left when the test asks
// for a resize: the kubelet tries the resize at once, and crash should
// not run then.
const backOffLeft = 10 * time.Second

// The back-off case's sizes. The kubelet admits a resize of "backoff" up
// to 14 CPUs (16 allocatable, "pinned" requests 2); the plugin can give
// it 13 (CPU 0 reserved), and no NUMA node more than 8 CPUs.
const (
	crashCPUs = 2
	// With a running sibling: crash to 11, steady to 3, 14 CPUs: crash
	// fits no NUMA node, and not the free CPUs once steady has its one
	// more.
	crashWithSibling, steadyWithSibling = 11, 3
	// Alone: crash to 12 (14 CPUs), 10 more than its 2.
	crashAlone = 12
)

// resizeInBackOff is issue 39's back-off case on the real kubelet: pod
// "backoff" has two pinned containers, "crash", which fails 2 s after
// each start, and "steady". The kubelet v1.36 sends the runtime nothing
// for a container that does not run, and a resize of a container resets
// its back-off (its back-off key hashes the container's resources): in
// the sync that tries the resize, after the resize, it re-creates the
// container with the new count.
//   - A resize, while crash waits out its back-off, that grows crash
//     beyond what fits and steady within what fits: the kubelet sends the
//     pod's new CPU total first (UpdatePodSandboxResources), for steady's
//     sake; the plugin, deciding every member from the pod's spec, refuses
//     it there for crash, "(not running)" (a try that finds crash running,
//     its back-off over, is refused too, and the kubelet tries again once
//     it stopped), which the pod's PodResizeInProgress condition shows, the
//     kubelet having applied nothing, until its next try (a watch of the
//     pod sees it), and the plugin's ResizeRefused event. (Were steady's
//     change its memory only, the kubelet would send the pod's memory and
//     its old CPU total: nothing the plugin could refuse.) The kubelet then
//     re-creates crash with 11 CPUs, which the plugin cannot give: crash
//     restarts on its CPUs, with the new count's CPU quota, and the plugin
//     says so in a ResizeRefused event. The kubelet's next try finds
//     crash's count the spec's and the plugin lets it through: steady's
//     part is applied, and the kubelet reports the resize done (the
//     design's "A re-creation is never refused"). Put back, steady shrinks
//     to its CPUs and crash restarts on its 2.
//   - A resize that grows crash alone beyond what fits: nothing is sent;
//     the kubelet re-creates crash with the new count: crash restarts on
//     its CPUs with a ResizeRefused event, nothing else changes.
func (k *kube) resizeInBackOff(ctx context.Context, shared *harness.Container, stateDir string) {
	t := k.t
	start := time.Now()
	l := &lives{shared: shared, pool: e2etest.SettledCPUs(ctx, t, shared, "one cpuset", func(cpuset.CPUSet) bool { return true })}
	k.wantPool(ctx, l, "before the back-off case")
	if free := l.pool.Difference(reservedCPUs); free.Size() != 13 {
		t.Fatalf("free CPUs %s, want 13 (all but CPU 0 and pinned's 2): the case's sizes count on them", free)
	}
	t.Cleanup(func() { k.DeletePod(t, "backoff") })
	k.Apply(ctx, t, harness.PodManifest("backoff", k.Cluster.NodeName,
		harness.PodContainer{Name: "crash", Resources: harness.GuaranteedCPUs(crashCPUs, "64Mi"), Command: crashLoop},
		harness.PodContainer{Name: "steady", Resources: harness.GuaranteedCPUs(2, "64Mi")}))
	p := k.waitPod(ctx, "backoff", "steady running, crash exited once", func(p *harness.KubePod) (bool, error) {
		s, c := p.Container("steady"), p.Container("crash")
		return s != nil && s.State.Running != nil && c != nil && (c.State.Terminated != nil || c.LastState.Terminated != nil), nil
	})
	uid := p.Metadata.UID
	steady := k.Attach(ctx, t, p, "steady")
	steadyCPUs := exclusiveCPUs(ctx, t, steady, 2)
	crashed := p.Container("crash").LastState.Terminated
	if crashed == nil {
		crashed = p.Container("crash").State.Terminated
	}
	crashOn := k.cpusInReport("backoff/crash", crashed.Message, crashCPUs)
	entries := func(t testing.TB) map[string]string {
		t.Helper()
		st := e2etest.ReadCheckpoint(t, stateDir, must(online))
		out := map[string]string{}
		for _, name := range []string{"crash", "steady"} {
			a, ok := st.Assignment(uid, name)
			out[name] = fmt.Sprintf("%s→%s (present %v)", a.Baseline, a.Assigned(), ok)
		}
		return out
	}
	entry := func(baseline, assigned cpuset.CPUSet) string {
		return fmt.Sprintf("%s→%s (present true)", baseline, assigned)
	}
	want := map[string]string{"crash": entry(crashOn, crashOn), "steady": entry(steadyCPUs, steadyCPUs)}
	if got := entries(t); !maps.Equal(got, want) {
		t.Fatalf("backoff: the checkpoint's entries %v, want %v", got, want)
	}
	withPod := &lives{shared: shared, pool: l.pool.Difference(crashOn.Union(steadyCPUs))}
	k.wantPool(ctx, withPod, "with backoff admitted")
	t.Logf("backoff: crash ran on %s, steady runs on %s, %v into the case", crashOn, steadyCPUs, time.Since(start).Round(time.Second))

	refused := k.step("GrowthRefusedWithARunningSibling", func(k *kube) {
		t := k.t
		k.waitBackOff(ctx, start)
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		versions, err := k.Cluster.WatchPod(watchCtx, "backoff")
		if err != nil {
			t.Fatal(err)
		}
		k.resizeTo(ctx, "backoff", map[string]int{"crash": crashWithSibling, "steady": steadyWithSibling})
		notRunning := regexp.MustCompile(`Infeasible: resizeAllocateCPUs(Error)?: pod default/backoff's resize is refused as a whole, its containers unchanged: ` +
			`container crash: .*default/backoff/crash \(not running\)`)
		seen := k.watchFor(ctx, versions, "PodResizeInProgress with the plugin's refusal", func(p *harness.KubePod) bool {
			c := p.Condition("PodResizeInProgress")
			return c != nil && c.Reason == "Error" && notRunning.MatchString(c.Message)
		})
		stopWatch()
		cond := seen.Condition("PodResizeInProgress")
		t.Logf("PodResizeInProgress: reason %s, message %q", cond.Reason, cond.Message)
		if s := seen.Container("steady"); s == nil || s.Resources == nil || s.Resources.Limits["cpu"] != "2" {
			t.Errorf("steady's status when the resize was refused: %+v, want its 2 CPUs: the kubelet applied part of a refused resize", s)
		}
		// The plugin's event on the pod: its note is the first refusal's
		// (a try while crash ran, if one came first: the events of a
		// series keep the first note).
		k.waitEvent(ctx, "backoff", "ResizeRefused", regexp.MustCompile(
			`Infeasible: resizeAllocateCPUs(Error)?: pod default/backoff's resize is refused as a whole, its containers unchanged: container crash: `))

		// The kubelet re-creates crash at once, with the count it could
		// not get: it runs on its CPUs, with the new count's CPU quota.
		k.waitEvent(ctx, "backoff", "ResizeRefused", regexp.MustCompile(fmt.Sprintf(
			`(Infeasible|Deferred): resizeAllocateCPUs(Error)?: container default/backoff/crash was re-created with %d CPUs and restarts on its CPUs %s: `,
			crashWithSibling, regexp.QuoteMeta(crashOn.String()))))
		k.wantRanOnItsCPUs(ctx, crashWithSibling, crashOn)
		if got := entries(t); got["crash"] != want["crash"] {
			t.Errorf("backoff: crash's checkpoint entry %s, want %s", got["crash"], want["crash"])
		}
		// The kubelet's next try: crash's count is the spec's, steady's
		// part is applied, keeping its CPUs.
		k.WaitResized(ctx, t, "backoff", map[string]map[string]string{"steady": {"cpu": fmt.Sprint(steadyWithSibling)}})
		grown := exclusiveCPUs(ctx, t, steady, steadyWithSibling)
		if !steadyCPUs.IsSubsetOf(grown) {
			t.Errorf("backoff: steady grew from %s to %s, losing CPUs it started with", steadyCPUs, grown)
		}
		t.Logf("backoff: the kubelet took the resize for done, crash on %s with a quota of %d CPUs, steady grown to %s, %v into the case",
			crashOn, crashWithSibling, grown, time.Since(start).Round(time.Second))

		// Put back: steady shrinks to its CPUs, crash restarts on its 2.
		k.resizeTo(ctx, "backoff", map[string]int{"crash": crashCPUs, "steady": 2})
		k.WaitResized(ctx, t, "backoff", map[string]map[string]string{"steady": {"cpu": "2"}})
		wantCPUs(ctx, t, steady, steadyCPUs.String())
		if got := entries(t); !maps.Equal(got, want) {
			t.Errorf("backoff: the checkpoint's entries after the resize was put back: %v, want %v", got, want)
		}
		k.wantPool(ctx, withPod, "after the resize was put back")
	})
	if !refused {
		t.FailNow() // the pod's spec may not be back: the second variant would prove nothing
	}

	k.step("GrowthAloneRestartsOnItsCPUs", func(k *kube) {
		k.waitBackOff(ctx, start)
		before, _ := k.crashRefusals(ctx)
		k.Resize(ctx, k.t, "backoff", wholeCPUs(map[string]int{"crash": crashAlone}))
		// The plugin reports the refused re-creation on crash again: an
		// event of its own, or (within minutes of the first, as
		// client-go's recorder does) one more of the first's series,
		// whose note stays the first's.
		var notes []string
		waitCtx, cancel := context.WithTimeout(ctx, k.Wait)
		defer cancel()
		err := everySecond(waitCtx, func() (bool, error) {
			var n int
			n, notes = k.crashRefusals(waitCtx)
			return n > before, nil
		})
		if err != nil {
			k.t.Fatalf("backoff: no ResizeRefused event on crash after %d (%q): %v", before, notes, err)
		}
		k.t.Logf("backoff: ResizeRefused on crash, counted %d times before; notes %q", before, notes)
		k.wantRanOnItsCPUs(ctx, crashAlone, crashOn)
		if got := entries(k.t); !maps.Equal(got, want) {
			k.t.Errorf("backoff: the checkpoint's entries after crash's re-creation: %v, want %v", got, want)
		}
		wantCPUs(ctx, k.t, steady, steadyCPUs.String())
		k.wantPool(ctx, withPod, "after crash restarted on its CPUs")
	})

	k.DeletePod(t, "backoff")
	k.wantPool(ctx, l, "after the back-off case")
	t.Logf("back-off case done in %v", time.Since(start).Round(time.Second))
}

// waitBackOff waits until backoff's container crash waits out a back-off
// with at least backOffLeft of it left (the kubelet's waiting message
// says how long it is: 10 s, doubled at each restart).
func (k *kube) waitBackOff(ctx context.Context, start time.Time) {
	k.t.Helper()
	var ends time.Time
	p := k.waitPod(ctx, "backoff", fmt.Sprintf("crash waiting out a back-off with %v or more left", backOffLeft), func(p *harness.KubePod) (bool, error) {
		c := p.Container("crash")
		if c == nil || c.State.Waiting == nil || c.State.Waiting.Reason != "CrashLoopBackOff" || c.LastState.Terminated == nil {
			return false, nil
		}
		m := backOffMessage.FindStringSubmatch(c.State.Waiting.Message)
		if m == nil {
			return false, fmt.Errorf("crash's waiting message %q does not say its back-off", c.State.Waiting.Message)
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			return false, fmt.Errorf("crash's waiting message %q: %w", c.State.Waiting.Message, err)
		}
		ends = c.LastState.Terminated.FinishedAt.Add(d)
		return time.Until(ends) >= backOffLeft, nil
	})
	c := p.Container("crash")
	k.t.Logf("backoff: crash restarted %d times, %q, %v of it left; %v into the case",
		c.RestartCount, c.State.Waiting.Message, time.Until(ends).Round(time.Second), time.Since(start).Round(time.Second))
}

// wantRanOnItsCPUs checks that backoff's container crash, re-created by
// the kubelet with cpus CPUs, which the plugin cannot give it, ran on its
// CPUs old: the instance created with that count (its cgroup's CPU
// quota) reports them when it exits.
func (k *kube) wantRanOnItsCPUs(ctx context.Context, cpus int, old cpuset.CPUSet) {
	k.t.Helper()
	quota := fmt.Sprintf("%d 100000", cpus*100000)
	var report string
	k.waitPod(ctx, "backoff", fmt.Sprintf("crash's instance of %d CPUs exited", cpus), func(p *harness.KubePod) (bool, error) {
		c := p.Container("crash")
		if c == nil {
			return false, nil
		}
		for _, s := range []*harness.KubeTerminatedState{c.State.Terminated, c.LastState.Terminated} {
			if s == nil {
				continue
			}
			if m := quotaLine.FindStringSubmatch(s.Message); m != nil && m[1] == quota {
				report = s.Message
				return true, nil
			}
		}
		return false, nil
	})
	if ran := k.cpusInReport(fmt.Sprintf("backoff/crash re-created with %d CPUs", cpus), report, old.Size()); !ran.Equals(old) {
		k.t.Errorf("backoff: crash re-created with %d CPUs ran on %s, want its CPUs %s", cpus, ran, old)
	}
}

// watchFor reads versions of a pod (Cluster.WatchPod) until one
// satisfies ok, and returns it; it fails the test when the watch ends or
// k.Wait passes first.
func (k *kube) watchFor(ctx context.Context, versions <-chan harness.KubePod, what string, ok func(*harness.KubePod) bool) *harness.KubePod {
	k.t.Helper()
	timeout := time.After(k.Wait)
	var last *harness.KubePod
	for {
		select {
		case p, open := <-versions:
			if !open {
				k.t.Fatalf("waiting for %s: the watch of the pod ended; its last version's conditions: %+v", what, conditionsOf(last))
			}
			last = &p
			if ok(last) {
				return last
			}
		case <-timeout:
			k.t.Fatalf("waiting for %s: not seen in %v; the pod's last conditions: %+v", what, k.Wait, conditionsOf(last))
		case <-ctx.Done():
			k.t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// conditionsOf returns a pod's conditions, nil for no pod.
func conditionsOf(p *harness.KubePod) []harness.KubeCondition {
	if p == nil {
		return nil
	}
	return p.Status.Conditions
}

// guaranteedMilli is harness.GuaranteedCPUs of a CPU quantity that need
// not be whole ("500m").
func guaranteedMilli(cpu, memory string) string {
	return fmt.Sprintf(`{"requests": {"cpu": %q, "memory": %q}, "limits": {"cpu": %q, "memory": %q}}`, cpu, memory, cpu, memory)
}

// waitPod waits (up to k.Wait, looking once a second) until cond holds
// for the pod, and returns the pod; an error of cond ends the wait at
// once.
func (k *kube) waitPod(ctx context.Context, name, what string, cond func(p *harness.KubePod) (bool, error)) *harness.KubePod {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, k.Wait)
	defer cancel()
	var p *harness.KubePod
	err := everySecond(ctx, func() (bool, error) {
		p = k.Pod(ctx, k.t, name)
		return cond(p)
	})
	if err != nil {
		out, _ := k.Cluster.Kubectl(context.Background(), "describe", "pod", name)
		k.t.Fatalf("pod %s: waiting for %s: %v\n%s", name, what, err, out)
	}
	return p
}

// pluginComponent is the reporting controller of the plugin's events.
const pluginComponent = "nri-cpumanager"

// eventWait bounds a wait for the plugin's event on a pod, which it
// writes within seconds of what it reports.
const eventWait = 3 * time.Minute

// pluginEvent is an event as `kubectl get events` lists it: core/v1's
// view of the plugin's events.k8s.io events (the note is the message,
// the reporting controller the reporting component, the container the
// field path of the object it regards).
type pluginEvent struct {
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	Type               string `json:"type"`
	ReportingComponent string `json:"reportingComponent"`
	InvolvedObject     struct {
		FieldPath string `json:"fieldPath"`
	} `json:"involvedObject"`
	Series *struct {
		Count int `json:"count"`
	} `json:"series"`
}

// occurrences is how many times the event was reported: its series'
// count, or once.
func (e pluginEvent) occurrences() int {
	if e.Series != nil && e.Series.Count > 1 {
		return e.Series.Count
	}
	return 1
}

// events lists the events on a pod of the default namespace with the
// reason (`kubectl get events` of the pod); none when the API server does
// not answer (the next look tells).
func (k *kube) events(ctx context.Context, pod, reason string) []pluginEvent {
	var list struct {
		Items []pluginEvent `json:"items"`
	}
	query := url.Values{"fieldSelector": {"involvedObject.name=" + pod + ",reason=" + reason}}
	if err := k.Cluster.GetJSON(ctx, "/api/v1/namespaces/default/events?"+query.Encode(), &list); err != nil {
		return nil
	}
	return list.Items
}

// crashRefusals counts the plugin's ResizeRefused events on backoff's
// container crash, and returns their notes.
func (k *kube) crashRefusals(ctx context.Context) (int, []string) {
	n, notes := 0, []string(nil)
	for _, e := range k.events(ctx, "backoff", "ResizeRefused") {
		if e.InvolvedObject.FieldPath == "spec.containers{crash}" && e.ReportingComponent == pluginComponent {
			n += e.occurrences()
			notes = append(notes, e.Message)
		}
	}
	return n, notes
}

// waitEvent waits (up to eventWait) for an event on the pod with the
// reason and a message matching want, and checks that it is a warning of
// the plugin's.
func (k *kube) waitEvent(ctx context.Context, pod, reason string, want *regexp.Regexp) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, eventWait)
	defer cancel()
	var seen []pluginEvent
	var found *pluginEvent
	err := everySecond(ctx, func() (bool, error) {
		seen = k.events(ctx, pod, reason)
		for i := range seen {
			if want.MatchString(seen[i].Message) {
				found = &seen[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		k.t.Fatalf("pod %s: no %s event matching %q among %+v: %v", pod, reason, want, seen, err)
	}
	k.t.Logf("%s event on pod %s: %q", reason, pod, found.Message)
	if found.Type != "Warning" || found.ReportingComponent != pluginComponent {
		k.t.Errorf("%s event on pod %s: %+v, want a Warning of nri-cpumanager's", reason, pod, *found)
	}
}
