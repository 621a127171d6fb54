//go:build vmguest

package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// reportScript writes where a container runs to its termination message,
// which the kubelet puts in the container's status when it has exited:
// Cpus_allowed_list of a process inside it and its cgroup's cpuset (its
// cgroup namespace's root).
const reportScript = "{ grep Cpus_allowed_list /proc/self/status; " +
	"echo cpuset.cpus: $(cat /sys/fs/cgroup/cpuset.cpus); " +
	"echo cpuset.cpus.effective: $(cat /sys/fs/cgroup/cpuset.cpus.effective); } > /dev/termination-log"

// reportCPUs is the command of a container that only says where it ran.
var reportCPUs = []string{"sh", "-c", reportScript}

// jobDone is the file a Job's container waits for before it exits 0 (at
// the latest after 10 minutes): the test creates it once it has checked
// the container's CPUs.
const jobDone = "/dev/shm/done"

var waitForJobDone = waitForFile(jobDone)

// waitForFile is the command of a container that runs until the test
// creates the file in it (exec), at the latest for 10 minutes, and then
// exits 0.
func waitForFile(path string) []string {
	return []string{"sh", "-c", "i=0; while [ ! -e " + path + " ] && [ $i -lt 600 ]; do sleep 1; i=$((i+1)); done"}
}

// lives follows a pod's life on the real kubelet, as the plugin's model
// now does the kubelet CPU manager's: init containers whose CPUs the app
// containers reuse, sidecars that keep theirs, containers and sandboxes
// the kubelet re-creates, containerd and the kubelet restarted, a Job that
// completes. Each case is a subtest; they run in order on the same node,
// and pool is the shared pool each leaves behind (the next one starts
// from it).
type lives struct {
	shared *harness.Container // a Burstable container: it runs on the shared pool
	pool   cpuset.CPUSet

	initApp cpuset.CPUSet            // pod init-reuse: its init container's CPU, reused by its app
	sidecar map[string]cpuset.CPUSet // pod sidecar: each container's CPU
}

// podLives runs the cases of a pod's life after the resize cases: the
// pods "pinned" (2 CPUs) and "multi" (4 + 2) hold 8 CPUs, CPU 0 is
// reserved, 7 are free for these cases' 4.
func (k *kube) podLives(ctx context.Context, shared *harness.Container) {
	start := time.Now()
	l := &lives{shared: shared, pool: e2etest.SettledCPUs(ctx, k.t, shared, "one cpuset", func(cpuset.CPUSet) bool { return true })}
	k.t.Logf("the shared pool before the pod-life cases: %s", l.pool)
	k.wantPool(ctx, l, "before the pod-life cases")
	initReuse := k.step("InitContainerCPUsReused", func(k *kube) { k.initContainerReuse(ctx, l) })
	sidecar := k.step("SidecarKeepsItsCPUs", func(k *kube) { k.sidecarKeepsCPUs(ctx, l) })
	if sidecar {
		k.step("KilledContainersComeBackOnTheirCPUs", func(k *kube) { k.killedContainersComeBack(ctx, l) })
	}
	if initReuse {
		k.step("SandboxRecreatedKeepsCPUs", func(k *kube) { k.sandboxRecreated(ctx, l) })
	}
	if initReuse && sidecar {
		k.step("RestartsKeepCPUs", func(k *kube) { k.restartsKeepCPUs(ctx, l) })
	}
	k.step("CompletedJobReturnsCPUs", func(k *kube) { k.completedJobReturnsCPUs(ctx, l) })
	k.t.Logf("pod-life cases done in %v", time.Since(start).Round(time.Second))
}

// step runs f as a subtest with its own kube, and logs how long it took.
func (k *kube) step(name string, f func(k *kube)) bool {
	return k.t.Run(name, func(t *testing.T) {
		sub := *k
		sub.t = t
		start := time.Now()
		defer func() {
			if t.Failed() {
				// What the plugin decided, which the guest keeps.
				t.Logf("%s failed; the plugin's log:\n%s", name, k.Cluster.ContainerLogTails(e2etest.PluginNamespace, 300))
			}
		}()
		f(&sub)
		t.Logf("%s took %v", name, time.Since(start).Round(time.Second))
	})
}

// initContainerReuse: a Guaranteed pod whose init container and app
// container want 1 CPU each. The init container runs on an exclusive CPU;
// the app container runs on that same CPU (the kubelet's cpusToReuse), so
// the shared pool loses max(init, app) = 1 CPU, not 2.
func (k *kube) initContainerReuse(ctx context.Context, l *lives) {
	t := k.t
	k.Apply(ctx, k.t, harness.PodManifest("init-reuse", k.Cluster.NodeName,
		harness.PodContainer{Name: "init", Init: true, Resources: harness.GuaranteedCPUs(1, "64Mi"), Command: reportCPUs},
		harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(1, "64Mi")}))
	p := k.WaitReady(ctx, k.t, "init-reuse")
	initCPUs := k.reportedCPUs(p, "init", 1)
	app := exclusiveCPUs(ctx, t, k.Attach(ctx, k.t, p, "app"), 1)
	t.Logf("init-reuse: the init container ran on %s, the app runs on %s", initCPUs, app)
	if !initCPUs.IsSubsetOf(l.pool) {
		t.Errorf("init-reuse: the init container ran on %s, not CPUs taken from the shared pool %s", initCPUs, l.pool)
	}
	if !app.Equals(initCPUs) {
		t.Errorf("init-reuse: the app container runs on %s, the init container ran on %s: the app did not reuse the init container's CPU", app, initCPUs)
	}
	l.pool = l.pool.Difference(initCPUs.Union(app))
	l.initApp = app
	k.wantPool(ctx, l, "after init-reuse started (the pool loses max(init, app) = 1 CPU)")
}

// sidecarKeepsCPUs: a Guaranteed pod with a sidecar (an init container
// with restartPolicy Always) of 1 CPU and an app container of 1 CPU: the
// sidecar keeps its CPU, so both are pinned, on different CPUs.
func (k *kube) sidecarKeepsCPUs(ctx context.Context, l *lives) {
	t := k.t
	k.Apply(ctx, k.t, harness.PodManifest("sidecar", k.Cluster.NodeName,
		harness.PodContainer{Name: "sidecar", Init: true, RestartPolicy: "Always", Resources: harness.GuaranteedCPUs(1, "64Mi")},
		harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(1, "64Mi")}))
	p := k.WaitReady(ctx, k.t, "sidecar")
	l.sidecar = map[string]cpuset.CPUSet{}
	for _, name := range []string{"sidecar", "app"} {
		l.sidecar[name] = exclusiveCPUs(ctx, t, k.Attach(ctx, k.t, p, name), 1)
	}
	t.Logf("sidecar: the sidecar runs on %s, the app on %s", l.sidecar["sidecar"], l.sidecar["app"])
	both := l.sidecar["sidecar"].Union(l.sidecar["app"])
	if both.Size() != 2 {
		t.Errorf("sidecar: the sidecar and the app container share %s: a sidecar's CPUs are its own, not reusable", both)
	}
	if !both.IsSubsetOf(l.pool) {
		t.Errorf("sidecar: its containers run on %s, not CPUs taken from the shared pool %s", both, l.pool)
	}
	l.pool = l.pool.Difference(both)
	k.wantPool(ctx, l, "after the sidecar pod started (the pool loses 2 CPUs)")
}

// killedContainersComeBack: the processes of the sidecar pod's sidecar
// and app container are killed; the kubelet re-creates both (new ids,
// same names) and each runs on its CPU again.
func (k *kube) killedContainersComeBack(ctx context.Context, l *lives) {
	t := k.t
	p := k.Pod(ctx, k.t, "sidecar")
	old := map[string]string{}
	for _, name := range []string{"sidecar", "app"} {
		c := k.Attach(ctx, k.t, p, name)
		old[name] = c.ID
		k.kill(ctx, c)
	}
	p = k.waitRecreated(ctx, "sidecar", old)
	for name, want := range l.sidecar {
		t.Logf("sidecar/%s re-created, restart count %d", name, podStatus(p, name).RestartCount)
		wantCPUs(ctx, t, k.Attach(ctx, k.t, p, name), want.String())
	}
	k.wantPool(ctx, l, "after the sidecar pod's containers were re-created")
}

// sandboxRecreated: the pause process of pod init-reuse is killed. The
// kubelet stops the pod's containers, runs a new sandbox (same pod UID),
// runs the init container again, then the app container: both on the
// pod's CPU. The old sandbox is removed by the kubelet's garbage
// collection once no container is left in it; its app container is the
// one dead instance of "app" the kubelet keeps (one per container name)
// until another instance dies, so the app is killed once more, after
// which the kubelet removes that dead instance and, within its minute's
// GC period, the old sandbox. Nothing is freed: the app keeps its CPU,
// the shared pool and the exclusive count do not change.
func (k *kube) sandboxRecreated(ctx context.Context, l *lives) {
	t := k.t
	p := k.Pod(ctx, k.t, "init-reuse")
	uid := p.Metadata.UID
	sandboxes := k.sandboxes(ctx, uid)
	if len(sandboxes) != 1 || sandboxes[0].GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("init-reuse: sandboxes %v, want one, ready", sandboxes)
	}
	oldSandbox := sandboxes[0].GetId()
	pid := k.sandboxPID(ctx, oldSandbox)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the pause process %d of sandbox %.12s: %v", pid, oldSandbox, err)
	}
	t.Logf("init-reuse: killed the pause process %d of sandbox %.12s", pid, oldSandbox)
	p = k.waitRecreated(ctx, "init-reuse", map[string]string{"app": p.Container("app").ContainerID, "init": p.InitContainer("init").ContainerID})
	app := k.Attach(ctx, k.t, p, "app")
	if app.Pod.ID == oldSandbox {
		t.Fatalf("init-reuse: the app was re-created in the old sandbox %.12s, want a new one", oldSandbox)
	}
	t.Logf("init-reuse: new sandbox %.12s", app.Pod.ID)
	if got := k.reportedCPUs(p, "init", 1); !got.Equals(l.initApp) {
		t.Errorf("init-reuse: the init container ran again on %s in the new sandbox, want the pod's %s", got, l.initApp)
	}
	wantCPUs(ctx, t, app, l.initApp.String())
	k.wantPool(ctx, l, "after init-reuse's sandbox was re-created")

	k.kill(ctx, app)
	p = k.waitRecreated(ctx, "init-reuse", map[string]string{"app": app.ID})
	k.waitSandboxGone(ctx, uid, oldSandbox)
	wantCPUs(ctx, t, k.Attach(ctx, k.t, p, "app"), l.initApp.String())
	k.wantPool(ctx, l, "after the kubelet removed init-reuse's old sandbox")
}

// restartsKeepCPUs: containerd and the kubelet are restarted, as a node
// upgrade does, with every pinned pod running: no container is
// re-created, each keeps its CPUs, the shared pool stays.
func (k *kube) restartsKeepCPUs(ctx context.Context, l *lives) {
	t := k.t
	pods := map[string][]string{"pinned": {"app"}, "multi": {"c1", "c2"}, "init-reuse": {"app"}, "sidecar": {"sidecar", "app"}}
	type running struct {
		id   string
		cpus cpuset.CPUSet
	}
	before := map[string]running{}
	for pod, names := range pods {
		p := k.Pod(ctx, k.t, pod)
		for _, name := range names {
			c := k.Attach(ctx, k.t, p, name)
			cpus, err := c.CgroupCPUs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			before[pod+"/"+name] = running{c.ID, cpus}
		}
	}
	reconnects := k.metric(ctx, "nri_cpumanager_reconnects_total")

	if err := k.Env.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("containerd restarted")
	if err := k.Cluster.RestartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("the kubelet restarted")
	k.waitGauge(ctx, "the plugin reconnected to the restarted containerd", 3*time.Minute, func(get func(string) float64) bool {
		return get("nri_cpumanager_reconnects_total") > reconnects && get("nri_cpumanager_ready") == 1
	})
	// The kubelet syncs every pod every 5 s (syncFrequency): give it a
	// few rounds to do whatever it would do to them.
	time.Sleep(time.Until(restarted.Add(20 * time.Second)))
	for pod, names := range pods {
		p := k.Pod(ctx, k.t, pod)
		for _, name := range names {
			was := before[pod+"/"+name]
			s := podStatus(p, name)
			if s == nil || runtimeID(s.ContainerID) != was.id || s.State.Running == nil {
				t.Errorf("%s/%s after the restarts: %+v, want container %.12s still running", pod, name, s, was.id)
				continue
			}
			wantCPUs(ctx, t, k.Attach(ctx, k.t, p, name), was.cpus.String())
		}
	}
	k.wantPool(ctx, l, "after containerd and the kubelet restarted")
}

// completedJobReturnsCPUs: a Job's pod (restartPolicy Never) of 1 CPU
// runs pinned, then exits 0. Its pod turns Succeeded and stays (no TTL),
// its sandbox may stay too; the plugin learns the phase from the API and
// gives the CPU back: the shared pool grows back, the exclusive count
// drops.
func (k *kube) completedJobReturnsCPUs(ctx context.Context, l *lives) {
	t := k.t
	k.Apply(ctx, k.t, harness.JobManifest("once", k.Cluster.NodeName,
		harness.PodContainer{Name: "work", Resources: harness.GuaranteedCPUs(1, "64Mi"), Command: waitForJobDone}))
	p := k.waitJobPod(ctx, "once")
	work := k.Attach(ctx, k.t, p, "work")
	cpus := exclusiveCPUs(ctx, t, work, 1)
	t.Logf("Job once: pod %s runs on %s", p.Metadata.Name, cpus)
	if !cpus.IsSubsetOf(l.pool) {
		t.Errorf("Job once: its pod runs on %s, not a CPU taken from the shared pool %s", cpus, l.pool)
	}
	withJob := *l
	withJob.pool = l.pool.Difference(cpus)
	k.wantPool(ctx, &withJob, "while the Job's pod runs")

	if _, err := work.Exec(ctx, "touch", jobDone); err != nil {
		t.Fatal(err)
	}
	succeeded := k.waitPhase(ctx, p.Metadata.Name, "Succeeded")
	k.waitGauge(ctx, "the Job's CPU back in the shared pool", 3*time.Minute, func(get func(string) float64) bool {
		return get("nri_cpumanager_shared_cpus") == float64(l.pool.Size())
	})
	t.Logf("Job once: its CPU back in the shared pool %v after its pod turned Succeeded", time.Since(succeeded).Round(time.Second))
	k.wantPool(ctx, l, "after the Job completed")
	if got := k.Pod(ctx, k.t, p.Metadata.Name); got.Status.Phase != "Succeeded" {
		t.Errorf("Job once: its pod %s is %s, want it kept as Succeeded", p.Metadata.Name, got.Status.Phase)
	}
}

// wantPool checks the shared pool: the shared container runs on exactly
// l.pool (its cgroup and inside it), and the plugin's gauges count as many
// shared CPUs and the other online CPUs as exclusive (nothing is held for
// a resize or delayed by scaleDownDelay in these cases).
func (k *kube) wantPool(ctx context.Context, l *lives, when string) {
	k.t.Helper()
	k.t.Logf("%s: the shared pool should be %s", when, l.pool)
	wantCPUs(ctx, k.t, l.shared, l.pool.String())
	shared, exclusive := float64(l.pool.Size()), float64(must(online).Size()-l.pool.Size())
	k.waitGauge(ctx, fmt.Sprintf("%s: shared_cpus %v, exclusive_cpus %v", when, shared, exclusive), time.Minute, func(get func(string) float64) bool {
		return get("nri_cpumanager_shared_cpus") == shared && get("nri_cpumanager_exclusive_cpus") == exclusive
	})
}

// waitGauge waits until ok holds for the plugin's metrics (get reads one
// sample, -1 when it cannot), looking once a second.
func (k *kube) waitGauge(ctx context.Context, what string, timeout time.Duration, ok func(get func(string) float64) bool) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen := map[string]float64{}
	get := func(series string) float64 {
		v, err := e2etest.PluginMetricValue(ctx, series)
		if err != nil {
			v = -1
		}
		seen[series] = v
		return v
	}
	if err := everySecond(ctx, func() (bool, error) { return ok(get), nil }); err != nil {
		k.t.Errorf("waiting for %s: the plugin's metrics say %v (%v)", what, seen, err)
	}
}

// metric reads one of the plugin's metrics.
func (k *kube) metric(ctx context.Context, series string) float64 {
	k.t.Helper()
	v, err := e2etest.PluginMetricValue(ctx, series)
	if err != nil {
		k.t.Fatal(err)
	}
	return v
}

// everySecond is harness.Poll looking at most once a second: each look
// costs a kubectl or a scrape, seconds of the emulated guest's CPUs.
func everySecond(ctx context.Context, cond func() (bool, error)) error {
	return harness.Poll(ctx, func() (bool, error) {
		ok, err := cond()
		if !ok && err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		return ok, err
	})
}

// podStatus returns the status of the pod's container, init container or
// sidecar called name, or nil.
func podStatus(p *harness.KubePod, name string) *harness.KubeContainerStatus {
	if s := p.Container(name); s != nil {
		return s
	}
	return p.InitContainer(name)
}

// runtimeID is a container id as Kubernetes reports it
// ("containerd://<id>") without its runtime's prefix, as CRI knows it.
func runtimeID(id string) string { return strings.TrimPrefix(id, "containerd://") }

// reportedCPUs returns the CPUs an exited container of reportCPUs ran on,
// from its termination message: Cpus_allowed_list inside it and its
// cgroup's cpuset.cpus and cpuset.cpus.effective, which must agree and
// hold n CPUs.
func (k *kube) reportedCPUs(p *harness.KubePod, name string, n int) cpuset.CPUSet {
	k.t.Helper()
	s := podStatus(p, name)
	if s == nil || s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
		k.t.Fatalf("%s/%s: status %+v, want it exited 0", p.Metadata.Name, name, s)
	}
	return k.cpusInReport(p.Metadata.Name+"/"+name, s.State.Terminated.Message, n)
}

// cpusInReport returns the CPUs a container of reportCPUs (who) says in
// its termination message msg that it ran on: Cpus_allowed_list inside
// it and its cgroup's cpuset.cpus and cpuset.cpus.effective, which must
// agree and hold n CPUs.
func (k *kube) cpusInReport(who, msg string, n int) cpuset.CPUSet {
	k.t.Helper()
	got := map[string]cpuset.CPUSet{}
	for _, m := range reportLine.FindAllStringSubmatch(msg, -1) {
		set, err := cpuset.Parse(m[2])
		if err != nil {
			k.t.Fatalf("%s: %s %q in its termination message %q: %v", who, m[1], m[2], msg, err)
		}
		got[m[1]] = set
	}
	cpus := got["Cpus_allowed_list"]
	if len(got) != 3 || cpus.Size() != n || !got["cpuset.cpus"].Equals(cpus) || !got["cpuset.cpus.effective"].Equals(cpus) {
		k.t.Fatalf("%s ran on %v (its termination message %q), want %d CPUs everywhere", who, got, msg, n)
	}
	return cpus
}

var reportLine = regexp.MustCompile(`(?m)^(Cpus_allowed_list|cpuset\.cpus|cpuset\.cpus\.effective):\s*(\S*)\s*$`)

// kill kills a container's command (SIGKILL from the guest: its pid 1
// ignores signals sent from inside), as a crash or the OOM killer does.
func (k *kube) kill(ctx context.Context, c *harness.Container) {
	k.t.Helper()
	pid, err := c.PID(ctx)
	if err != nil || pid <= 0 {
		k.t.Fatalf("%s: pid %d (%v)", c, pid, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		k.t.Fatalf("kill %s (pid %d): %v", c, pid, err)
	}
	k.t.Logf("killed %s (container %.12s, pid %d)", c, c.ID, pid)
}

// waitRecreated waits until the pod is Ready with each container of old
// (a container, init container or sidecar name, and its id) done with
// that id: a running container of another id, or
// for an init container another one that has exited.
func (k *kube) waitRecreated(ctx context.Context, name string, old map[string]string) *harness.KubePod {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var p *harness.KubePod
	err := everySecond(ctx, func() (bool, error) {
		p = k.Pod(ctx, k.t, name)
		if !p.Ready() {
			return false, nil
		}
		for c, id := range old {
			s := podStatus(p, c)
			if s == nil || s.ContainerID == "" || runtimeID(s.ContainerID) == runtimeID(id) || (s.State.Running == nil && s.State.Terminated == nil) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		out, _ := k.Cluster.Kubectl(context.Background(), "describe", "pod", name)
		k.t.Fatalf("pod %s: containers %v not re-created: %v\n%s", name, old, err, out)
	}
	return p
}

// waitJobPod waits for the one pod of a Job, running and Ready.
func (k *kube) waitJobPod(ctx context.Context, job string) *harness.KubePod {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var items []harness.KubePod
	err := everySecond(ctx, func() (bool, error) {
		items = k.Pods(ctx, k.t, "default", "batch.kubernetes.io/job-name="+job, "")
		return len(items) == 1 && items[0].Ready(), nil
	})
	if err != nil {
		out, _ := k.Cluster.Kubectl(context.Background(), "describe", "job", job)
		k.t.Fatalf("Job %s: no Ready pod (%d pods): %v\n%s", job, len(items), err, out)
	}
	return &items[0]
}

// waitPhase waits for a pod's phase and returns when it was seen.
func (k *kube) waitPhase(ctx context.Context, name, phase string) time.Time {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last string
	if err := everySecond(ctx, func() (bool, error) {
		last = k.Pod(ctx, k.t, name).Status.Phase
		return last == phase, nil
	}); err != nil {
		k.t.Fatalf("pod %s: phase %s, want %s: %v", name, last, phase, err)
	}
	return time.Now()
}

// sandboxes lists the runtime's sandboxes of a pod.
func (k *kube) sandboxes(ctx context.Context, uid string) []*runtimeapi.PodSandbox {
	k.t.Helper()
	resp, err := k.Env.CRI.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{
		Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}}})
	if err != nil {
		k.t.Fatalf("list the sandboxes of pod %s: %v", uid, err)
	}
	return resp.GetItems()
}

// sandboxPID returns the pid of a sandbox's pause process, from
// containerd's verbose sandbox status.
func (k *kube) sandboxPID(ctx context.Context, id string) int {
	k.t.Helper()
	resp, err := k.Env.CRI.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		k.t.Fatalf("status of sandbox %.12s: %v", id, err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil || info.Pid <= 0 {
		k.t.Fatalf("sandbox %.12s: no pid in its verbose status (%v): %q", id, err, resp.GetInfo()["info"])
	}
	return info.Pid
}

// waitSandboxGone waits until the runtime no longer has a pod's sandbox:
// the kubelet's garbage collection (every minute) removed it.
func (k *kube) waitSandboxGone(ctx context.Context, uid, id string) {
	k.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var left []string
	err := everySecond(ctx, func() (bool, error) {
		left = nil
		for _, s := range k.sandboxes(ctx, uid) {
			left = append(left, fmt.Sprintf("%.12s (%s)", s.GetId(), s.GetState()))
			if s.GetId() == id {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var inOld []string
		if resp, lerr := k.Env.CRI.Runtime.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{
			Filter: &runtimeapi.ContainerFilter{PodSandboxId: id}}); lerr == nil {
			for _, c := range resp.GetContainers() {
				inOld = append(inOld, fmt.Sprintf("%s %.12s (%s)", c.GetMetadata().GetName(), c.GetId(), c.GetState()))
			}
		}
		k.t.Fatalf("the kubelet did not remove the old sandbox %.12s: the pod's sandboxes %v, containers left in it %v: %v", id, left, inOld, err)
	}
	k.t.Logf("the kubelet removed the old sandbox %.12s after %v; the pod's sandboxes: %v", id, time.Since(start).Round(time.Second), left)
}
