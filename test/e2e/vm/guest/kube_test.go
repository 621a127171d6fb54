//go:build vmguest

package guest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The Kubernetes boot's payload.
const (
	k8sDir      = "/vm/k8s"
	deployDir   = repoRoot + "/deploy"
	pluginImage = "/vm/plugin-image.tar"
)

// TestKubernetes runs a real single-node Kubernetes v1.36.3 in the guest
// the way a kubeadm worker runs: the kubelet with the systemd cgroup
// driver on cgroup v2 with its default failCgroupV1, containerd with
// SystemdCgroup and the fail-closed NRI validator of
// deploy/containerd-nri.toml, and the plugin as the DaemonSet of deploy/
// from its release image. A Guaranteed pod of 2 CPUs is resized 2 → 6 → 2
// with `kubectl patch --subresource resize`; its cpuset is read in its
// cgroup (cpuset.cpus, cpuset.cpus.effective), the pod cgroup's cpu.max
// and Cpus_allowed_list inside it; a shrink below its baseline CPUs shows
// the plugin's refusal in the pod's PodResizeInProgress condition. Then a
// pod of two pinned containers: a resize that shrinks one and grows the
// other beyond what is free is refused as a whole, nothing applied. Then
// a pod's life as the kubelet lives it (podLives, one subtest each): an
// init container's CPU reused by the app container, a sidecar's kept,
// killed containers and a killed pause process re-created on their CPUs
// (nothing freed when the kubelet removes the old sandbox), containerd and
// the kubelet restarted, a completed Job's CPU back in the shared pool.
// Then a pod given a device on NUMA node 1 by a device plugin, with the
// kubelet's and the plugin's topology policies single-numa-node, pinned
// and grown on node 1 (devicesOnTheirNode); on that policy, a pod
// admitted whole at its sandbox, so that a pod created while its init
// container runs cannot take its app container's NUMA node and waits
// until it fits (podAdmittedWhole), and resizes of a pod whose container
// is in crash back-off (resizeInBackOff): a growth beyond what fits
// refused, with a running sibling's change, in the pod's
// PodResizeInProgress condition, and alone, when the kubelet re-creates
// the container, in a ResizeRefused event. The node moves in from the
// kubelet's static policy at the start, a pod the kubelet pinned keeping
// its CPUs (moveIn), and back to it at the end, the pinned pods keeping
// theirs (moveOut).
func TestKubernetes(t *testing.T) {
	if _, err := os.Stat(filepath.Join(k8sDir, "kubelet")); err != nil {
		t.Skipf("needs the Kubernetes boot's binaries in %s: %v", k8sDir, err)
	}
	if driver != harness.SystemdDriver {
		t.Fatalf("the Kubernetes boot runs the systemd driver, as kubeadm nodes do; this boot's is %s", driver)
	}
	ctx := harness.Context(t, 60*time.Minute)
	start := time.Now()
	env := newEnvWith(t, harness.ContainerdOptions{NRIValidator: &harness.NRIValidator{
		RequiredPlugins: []string{"cpumanager"}, TolerateMissingAnnotation: tolerateMissingPlugins}})
	if err := env.Containerd.ImportImages(ctx, pluginImage); err != nil {
		t.Fatal(err)
	}
	if err := env.CRI.WaitForImages(ctx, e2etest.PluginImageRepo+":"+e2etest.PluginImageTag); err != nil {
		t.Fatal(err)
	}
	tools := &harness.KubernetesTools{
		APIServer: k8sDir + "/kube-apiserver", ControllerManager: k8sDir + "/kube-controller-manager",
		Scheduler: k8sDir + "/kube-scheduler", Kubelet: k8sDir + "/kubelet", Kubectl: k8sDir + "/kubectl", Etcd: k8sDir + "/etcd",
	}
	// The kubelet's topology manager aligns the devices of the device case
	// (devicesOnTheirNode); with cpuManagerPolicy none it has no hint for
	// a pod without devices, which it admits as it would without it.
	// The node starts on the kubelet's static policy and moves to the
	// plugin (moveIn).
	cluster, err := harness.StartCluster(ctx, harness.ClusterOptions{Tools: tools, Containerd: env.Containerd, StartTimeout: 20 * time.Minute,
		CPUManager: kubeletStatic, TopologyManagerPolicy: "single-numa-node", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Kubernetes started %v after the test began", time.Since(start).Round(time.Second))
	k := &kube{t: t, Kube: &e2etest.Kube{Env: env, Cluster: cluster, Wait: 10 * time.Minute, PluginWait: 15 * time.Minute}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", cluster.LogTails(40))
			t.Logf("the plugin's logs:\n%s", cluster.ContainerLogTails(e2etest.PluginNamespace, 80))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := cluster.Close(ctx); err != nil {
			t.Errorf("clean up the cluster: %v", err)
		}
	})
	if v := k.Kubectl(ctx, k.t, "get", "node", cluster.NodeName, "-o", "jsonpath={.status.nodeInfo.kubeletVersion}"); v != "v1.36.3" {
		t.Errorf("kubelet version %q, want v1.36.3", v)
	}

	migrant, migrantCPUs := k.pinnedByTheKubelet(ctx)

	// The DaemonSet of deploy/ with the component that imports the
	// kubelet's assignments, pointed at this containerd.
	stateDir := filepath.Join(k.Cluster.Dir, "nri-cpumanager")
	k.Kubectl(ctx, k.t, "apply", "-k", k.Overlay(k.t, deployDir, []string{e2etest.KubeletCheckpointComponent}, stateDir))
	k.Kubectl(ctx, k.t, "label", "node", cluster.NodeName, e2etest.NodeLabel+"=true")
	plugin := k.WaitPluginReady(ctx, k.t, "")
	t.Logf("plugin pod %s Ready %v after the test began", plugin.Metadata.Name, time.Since(start).Round(time.Second))
	if !k.step("MoveInFromTheKubeletsStaticPolicy", func(k *kube) { k.moveIn(ctx, migrant, migrantCPUs, stateDir) }) {
		t.FailNow()
	}

	k.Apply(ctx, k.t, harness.PodManifest("shared", cluster.NodeName,
		harness.PodContainer{Name: "app", Resources: `{"requests": {"memory": "32Mi"}, "limits": {"memory": "64Mi"}}`}))
	k.Apply(ctx, k.t, harness.PodManifest("pinned", cluster.NodeName, harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(2, "64Mi")}))
	shared := k.Attach(ctx, k.t, k.WaitReady(ctx, k.t, "shared"), "app")
	pinnedPod := k.WaitReady(ctx, k.t, "pinned")
	pinned := k.Attach(ctx, k.t, pinnedPod, "app")
	// The plugin's pod as it is now: its container may have restarted
	// since it was first Ready (seen once on an emulated guest loaded by
	// other tests), and a container's ID is its instance's.
	plugin = k.WaitPluginReady(ctx, k.t, "")
	pluginCtr := k.Attach(ctx, k.t, plugin, "nri-cpumanager")

	podCgroup, err := pinned.Pod.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	uid := strings.ReplaceAll(pinnedPod.Metadata.UID, "-", "_")
	if want := "/kubepods.slice/kubepods-pod" + uid + ".slice"; podCgroup.Path != want {
		t.Errorf("pod cgroup %s, want the systemd driver's %s", podCgroup.Path, want)
	}
	check := func(cpus int, pinnedCPUs, sharedCPUs string) {
		t.Helper()
		wantCPUs(ctx, t, pinned, pinnedCPUs)
		e2etest.WantQuota(ctx, t, pinned, int64(cpus))
		wantCPUs(ctx, t, shared, sharedCPUs)
		e2etest.WantProcessCPUs(ctx, t, pluginCtr, must(sharedCPUs))
		if got, err := podCgroup.ReadFile("cpu", "cpu.max"); err != nil || got != fmt.Sprintf("%d 100000", cpus*100000) {
			t.Errorf("pod cgroup %s: cpu.max %q (%v), want %d CPUs", podCgroup.Path, got, err, cpus)
		}
	}
	check(2, "2-3", "0-1,4-15")

	for _, step := range []struct {
		cpus         int
		want, shared string
	}{
		{6, "2-7", "0-1,8-15"}, // keeps 2-3, two more whole cores of NUMA node 0
		{2, "2-3", "0-1,4-15"}, // back to the baseline CPUs
	} {
		k.resize(ctx, "pinned", step.cpus)
		k.waitResized(ctx, "pinned", step.cpus)
		t.Logf("resized to %d CPUs %v after the test began", step.cpus, time.Since(start).Round(time.Second))
		check(step.cpus, step.want, step.shared)
	}

	// Below the baseline CPUs: the plugin refuses, the pod says why.
	k.resize(ctx, "pinned", 1)
	cond := k.WaitResizeError(ctx, k.t, "pinned", regexp.MustCompile(`Infeasible: prohibitedCPUAllocation(Error)?: .*default/pinned`))
	t.Logf("PodResizeInProgress: reason %s, message %q", cond.Reason, cond.Message)
	check(2, "2-3", "0-1,4-15")
	k.resize(ctx, "pinned", 2)
	k.waitResized(ctx, "pinned", 2)

	k.multiContainerResize(ctx, pluginCtr)
	k.podLives(ctx, shared)
	if k.step("DevicesOnTheirNUMANode", func(k *kube) { k.devicesOnTheirNode(ctx, shared) }) {
		// On the single-numa-node policy the device case leaves.
		k.step("PodAdmittedWhole", func(k *kube) { k.podAdmittedWhole(ctx, shared, stateDir) })
		k.step("ResizeInCrashBackOff", func(k *kube) { k.resizeInBackOff(ctx, shared, stateDir) })
	}

	// The DaemonSet's plugin verified every cpuset on cgroup v2.
	log := cluster.ContainerLogTails(e2etest.PluginNamespace, 100000)
	if !verifiesOnV2.MatchString(log) {
		t.Errorf("the plugin does not say that it verifies cpusets in the cgroup v2 tree:\n%s", lastLines(log, 40))
	}
	for _, line := range strings.Split(log, "\n") {
		if e2etest.VerificationWarning(line) {
			t.Errorf("warning in the plugin's log: %s", line)
		}
	}
	k.step("MoveOutToTheKubeletsStaticPolicy", func(k *kube) { k.moveOut(ctx, shared, stateDir) })
}

// multiContainerResize is KEP-5554's multi-container case that needs the
// Kubernetes API and more CPUs than the host has: a pod of two pinned
// containers asks for one to shrink and the other to grow beyond what is
// free. The kubelet sends the pod's new total first (UpdatePodSandboxResources),
// the plugin, reading every container's new resources from the pod's spec
// through its watch, refuses the resize as a whole there, and the kubelet
// stops before touching any cgroup: the shrink that would have gone
// through on its own (NRI alone sees one container at a time) is not
// applied either.
func (k *kube) multiContainerResize(ctx context.Context, pluginCtr *harness.Container) {
	t := k.t
	start := time.Now()
	if v, err := e2etest.PluginMetricValue(ctx, `nri_cpumanager_kubernetes_api_available{feature="pods"}`); err != nil || v != 1 {
		t.Fatalf("kubernetes_api_available{feature=\"pods\"} = %v (%v), want 1: the plugin runs without the API", v, err)
	}
	// CPU 0 reserved (deploy/'s configuration), "pinned" on 2-3: 13 CPUs
	// free for exclusive use.
	k.Apply(ctx, k.t, harness.PodManifest("multi", k.Cluster.NodeName,
		harness.PodContainer{Name: "c1", Resources: harness.GuaranteedCPUs(2, "64Mi")},
		harness.PodContainer{Name: "c2", Resources: harness.GuaranteedCPUs(2, "64Mi")}))
	pod := k.WaitReady(ctx, k.t, "multi")
	c1, c2 := k.Attach(ctx, k.t, pod, "c1"), k.Attach(ctx, k.t, pod, "c2")
	original := exclusiveCPUs(ctx, t, c1, 2)

	// c1 grows to 4 first, keeping its CPUs, so that it may shrink back.
	k.resizeTo(ctx, "multi", map[string]int{"c1": 4})
	k.waitResizedTo(ctx, "multi", map[string]int{"c1": 4, "c2": 2})
	grown := exclusiveCPUs(ctx, t, c1, 4)
	if !original.IsSubsetOf(grown) {
		t.Errorf("c1 grew from %s to %s, losing CPUs it started with", original, grown)
	}
	t.Logf("multi: c1 grown from %s to %s %v into the multi-container case", original, grown, time.Since(start).Round(time.Second))
	// What must not move, read from the cgroup files only: exec into a
	// container costs seconds in the emulated guest.
	cgroups := map[string]*harness.Cgroup{}
	for name, c := range map[string]*harness.Container{"c1": c1, "c2": c2, "plugin": pluginCtr} {
		cg, err := c.Cgroup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cgroups[name] = cg
	}
	read := func() map[string]string {
		got := map[string]string{}
		for name, cg := range cgroups {
			cpus, err := cg.AllowedCPUs()
			if err != nil {
				t.Fatal(err)
			}
			got[name] = cpus.String()
			if name != "plugin" {
				quota, err := cg.ReadFile("cpu", "cpu.max")
				if err != nil {
					t.Fatal(err)
				}
				got[name+" cpu.max"] = quota
			}
		}
		return got
	}
	before := read()
	if before["c1"] != grown.String() || must(before["c2"]).Size() != 2 || before["c1 cpu.max"] != "400000 100000" || before["c2 cpu.max"] != "200000 100000" {
		t.Errorf("multi before its resize: %v, want c1 on %s and 4 CPUs of quota, c2 on 2 CPUs", before, grown)
	}

	// c1 back to 2 (allowed: its baseline CPUs), c2 to 12: 9 CPUs would
	// be free after c1's shrink, c2 needs 10 more. The node's allocatable
	// (16 CPUs, all requested now) lets the kubelet ask the runtime.
	k.resizeTo(ctx, "multi", map[string]int{"c1": 2, "c2": 12})
	cond := k.WaitResizeError(ctx, k.t, "multi", regexp.MustCompile(
		`(Infeasible|Deferred): resizeAllocateCPUs(Error)?: pod default/multi's resize is refused as a whole, its containers unchanged: container c2: `))
	t.Logf("PodResizeInProgress: reason %s, message %q", cond.Reason, cond.Message)
	// The kubelet retries about once a second: look again after a few.
	time.Sleep(5 * time.Second)
	if after := read(); !maps.Equal(after, before) {
		t.Errorf("the refused resize changed cgroups: before %v, after %v", before, after)
	}
	if c := k.Pod(ctx, k.t, "multi").Container("c1"); c == nil || c.Resources == nil || c.Resources.Limits["cpu"] != "4" {
		t.Errorf("c1's status after the refusal: %+v, want its 4 CPUs: the kubelet applied part of a refused resize", c)
	}

	// The spec put back: the condition clears, nothing moved.
	k.resizeTo(ctx, "multi", map[string]int{"c1": 4, "c2": 2})
	k.waitResizedTo(ctx, "multi", map[string]int{"c1": 4, "c2": 2})
	if after := read(); !maps.Equal(after, before) {
		t.Errorf("the resize put back changed cgroups: before %v, after %v", before, after)
	}
	t.Logf("multi-container case done in %v", time.Since(start).Round(time.Second))
}

// kube drives the guest's cluster (e2etest.Kube) for one test or
// subtest.
type kube struct {
	t *testing.T
	*e2etest.Kube
}

// resize asks for cpus whole CPUs (and 64Mi) for the pod's container
// "app" through the resize subresource, as a user would.
func (k *kube) resize(ctx context.Context, name string, cpus int) {
	k.resizeTo(ctx, name, map[string]int{"app": cpus})
}

// resizeTo asks, in one patch of the resize subresource, for whole CPUs
// (and 64Mi) for each named container of the pod.
func (k *kube) resizeTo(ctx context.Context, name string, cpus map[string]int) {
	k.t.Helper()
	k.Resize(ctx, k.t, name, wholeCPUs(cpus))
}

// waitResized waits until the pod's container "app" runs with cpus CPUs
// and no resize is in progress or pending.
func (k *kube) waitResized(ctx context.Context, name string, cpus int) {
	k.waitResizedTo(ctx, name, map[string]int{"app": cpus})
}

// waitResizedTo waits until each named container of the pod runs with its
// CPUs (the kubelet's status) and no resize is in progress or pending.
func (k *kube) waitResizedTo(ctx context.Context, name string, cpus map[string]int) {
	k.t.Helper()
	limits := map[string]map[string]string{}
	for c, n := range cpus {
		limits[c] = map[string]string{"cpu": fmt.Sprint(n)}
	}
	k.WaitResized(ctx, k.t, name, limits)
}

// wholeCPUs returns the resources of containers of whole CPUs and 64Mi.
func wholeCPUs(cpus map[string]int) map[string]map[string]string {
	out := map[string]map[string]string{}
	for c, n := range cpus {
		out[c] = map[string]string{"cpu": fmt.Sprint(n), "memory": "64Mi"}
	}
	return out
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
