//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// kube is the Kubernetes suite's cluster with the plugin deployed.
type kube struct {
	*e2etest.Kube
	mach     *machine
	stateDir string
	// reserved is deploy/configmap.yaml's reservedSystemCPUs.
	reserved cpuset.CPUSet
	// unit is the CPU count of the pinned pod: a whole core when
	// deploy/configmap.yaml sets full-pcpus-only, else one CPU.
	unit int
}

// TestKubernetes runs a real single-node Kubernetes (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet with cpuManagerPolicy
// none) on the harness's containerd, with the NRI validator table of
// deploy/containerd-nri.toml (rejections and fail-closed on); deploys the
// plugin as the DaemonSet of deploy/ from its release image, and drives
// pods with kubectl only, checking the cgroups and CPU affinity through
// CRI.
func TestKubernetes(t *testing.T) {
	harness.SkipUnlessCapable(t)
	mach := readMachine(t)
	mach.needCPUs(t, 2, needReservedAndPinned)
	// A first run builds Kubernetes (about 20 minutes on 2 CPUs).
	ctx := harness.Context(t, 50*time.Minute)

	start := time.Now()
	tools, err := harness.InstallKubernetes(ctx, harness.InstallOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	archive := buildPluginImage(ctx, t)
	t.Logf("binaries and image ready in %v", time.Since(start).Round(time.Second))

	env := harness.NewTestEnv(t, harness.EnvOptions{Containerd: harness.ContainerdOptions{NRIValidator: failClosed(t)}})
	if err := env.Containerd.ImportImages(ctx, archive); err != nil {
		t.Fatal(err)
	}
	if err := env.CRI.WaitForImages(ctx, e2etest.PluginImageRepo+":"+e2etest.PluginImageTag); err != nil {
		t.Fatal(err)
	}
	cluster, err := harness.StartCluster(ctx, harness.ClusterOptions{Tools: tools, Containerd: env.Containerd, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the Env's clean-up, so it runs before it.
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
		if err := cluster.CheckGone(); err != nil {
			t.Errorf("after cleaning up the cluster: %v", err)
		}
	})
	cfg := deployedConfig(t)
	k := &kube{Kube: &e2etest.Kube{Env: env, Cluster: cluster, Wait: 2 * time.Minute, PluginWait: 4 * time.Minute},
		mach: mach, stateDir: filepath.Join(cluster.Dir, "nri-cpumanager"), reserved: cfg.ReservedSystemCPUs, unit: 1}
	if cfg.CPUManagerPolicyOptions.FullPCPUsOnly {
		k.unit = mach.cores[0].Size()
	}
	if cfg.ReservedSystemCPUs.IsEmpty() || !cfg.ReservedSystemCPUs.IsSubsetOf(mach.cpus) {
		t.Skipf("deploy/configmap.yaml reserves CPUs %q, not a set of this machine's CPUs (%s): the expected cpusets would not be known", cfg.ReservedSystemCPUs, mach.cpus)
	}

	if !t.Run("deploy", k.deploy) {
		t.FailNow()
	}
	var exclusive cpuset.CPUSet
	if !t.Run("pinned and shared pods", func(t *testing.T) { exclusive = k.pinnedAndShared(ctx, t) }) {
		t.FailNow()
	}
	t.Run("refused growth", func(t *testing.T) { k.refusedGrowth(ctx, t, exclusive) })
	t.Run("events on a refused resize", func(t *testing.T) { k.eventsOnRefusal(ctx, t) })
	t.Run("API access allowed by RBAC", func(t *testing.T) { k.apiAccessAllowed(ctx, t) })
	t.Run("memory-only resize", func(t *testing.T) { k.memoryOnlyResize(ctx, t, exclusive) })
	t.Run("ConfigMap edit applied live", func(t *testing.T) { k.configMapEdit(ctx, t, exclusive) })
	t.Run("configuration groups", func(t *testing.T) { k.configGroups(ctx, t) })
	t.Run("growth and shrink", func(t *testing.T) { k.growthAndShrink(ctx, t, exclusive) })
	t.Run("plugin pod re-created", func(t *testing.T) { k.pluginPodRecreated(ctx, t, exclusive) })
	t.Run("fail closed while the plugin is away", func(t *testing.T) { k.failClosed(ctx, t, exclusive) })
	t.Run("deleted pod returns its CPUs", func(t *testing.T) { k.deletedPodReturnsCPUs(ctx, t) })
	t.Run("pod-level resources", func(t *testing.T) { k.podLevelResources(ctx, t) })
	t.Run("NodeResourceTopology", func(t *testing.T) { k.nodeResourceTopology(ctx, t) })
	t.Run("API access still allowed by RBAC", func(t *testing.T) { k.apiAccessAllowed(ctx, t) })
	t.Run("API server stopped", func(t *testing.T) { k.frozenAPIServer(ctx, t) })
	t.Run("without the API server", func(t *testing.T) { k.withoutTheAPI(ctx, t) })
}

// deploy applies deploy/ through the overlay, labels the node and waits for
// the DaemonSet's pod to be Ready through its probes.
func (k *kube) deploy(t *testing.T) {
	ctx := harness.Context(t, 5*time.Minute)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// With deploy/'s NodeResourceTopology component and its CRD, and the
	// validating NRI plugin beside the plugin (so that every adjustment
	// of the suite passes through it); see harness.DeployOverlay for why
	// the DaemonSet's CPU request goes.
	dir := k.Overlay(t, filepath.Join(root, "deploy"), []string{"components/noderesourcetopology", "components/noderesourcetopology-crd",
		harness.AdjustmentValidatorComponent}, k.stateDir)
	if out, err := k.Cluster.Kubectl(ctx, "apply", "-k", dir); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("kubectl apply -k:\n%s", strings.TrimSpace(out))
	}
	if _, err := k.Cluster.Kubectl(ctx, "label", "node", k.Cluster.NodeName, e2etest.NodeLabel+"=true"); err != nil {
		t.Fatal(err)
	}
	p := k.WaitPluginReady(ctx, t, "")
	t.Logf("plugin pod %s Ready", p.Metadata.Name)
	c := k.Attach(ctx, t, p, "nri-cpumanager")
	// The release image's binary, running as the DaemonSet's container.
	if _, err := k.waitLog(ctx, c, 0, regexp.MustCompile(`msg="?synchronized`)); err != nil {
		t.Error(err)
	}
	// And as the validating plugin, in the same pod.
	v := k.Attach(ctx, t, p, "validate-adjustments")
	if _, err := k.waitLog(ctx, v, 0, regexp.MustCompile(`msg="synchronized: validating every container creation"`)); err != nil {
		t.Error(err)
	}
}

// pinnedAndShared runs a Guaranteed pod of one CPU (a whole core under
// full-pcpus-only) and a shared one and checks their cpusets and affinity and the plugin's
// own; it returns the pinned pod's exclusive CPUs.
func (k *kube) pinnedAndShared(ctx context.Context, t *testing.T) cpuset.CPUSet {
	k.Apply(ctx, t, harness.PodManifest("shared", k.Cluster.NodeName, harness.PodContainer{Name: "app", Resources: sharedResources}))
	k.Apply(ctx, t, harness.PodManifest("pinned", k.Cluster.NodeName, harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(k.unit, "64Mi")}))
	pinned := k.Attach(ctx, t, k.WaitReady(ctx, t, "pinned"), "app")
	shared := k.Attach(ctx, t, k.WaitReady(ctx, t, "shared"), "app")

	available := k.available()
	exclusive, ok := k.mach.oneExclusive(available)
	if ok && k.unit == 1 {
		e2etest.WantCPUs(ctx, t, pinned, exclusive)
	} else {
		t.Logf("which CPU of %s the plugin picks is not predicted on this machine (%s)", available, k.mach.unpredictable)
		exclusive = e2etest.SettledCPUs(ctx, t, pinned, fmt.Sprintf("a core (%d CPUs) of %s", k.unit, available),
			func(s cpuset.CPUSet) bool { return s.Size() == k.unit && s.IsSubsetOf(available) })
	}
	sharedPool := k.mach.cpus.Difference(exclusive)
	e2etest.WantCPUs(ctx, t, shared, sharedPool)
	e2etest.WantProcessCPUs(ctx, t, k.Attach(ctx, t, k.pluginPod(ctx, t), "nri-cpumanager"), sharedPool)
	st := k.checkpoint(t)
	if a, ok := st.Assignment(pinned.Pod.Spec.UID, "app"); !ok || !a.Baseline.Equals(exclusive) {
		t.Errorf("checkpoint entry of the pinned pod: %+v (present %v), want original %s", a, ok, exclusive)
	}
	if !st.DefaultCPUSet().Equals(sharedPool) {
		t.Errorf("checkpoint shared pool %s, want %s", st.DefaultCPUSet(), sharedPool)
	}
	return exclusive
}

// refusedGrowth asks the pinned pod for every CPU of the node: the kubelet
// admits it (nothing else requests CPU) and the plugin refuses it because
// the reserved CPU must stay shared. The refusal must show in the pod's
// PodResizeInProgress condition and a ResizeError event, while the pod
// cgroup and every cpuset stay as they were.
func (k *kube) refusedGrowth(ctx context.Context, t *testing.T, exclusive cpuset.CPUSet) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	pinned := k.Attach(ctx, t, k.Pod(ctx, t, "pinned"), "app")
	podCgroup, err := pinned.Pod.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	wantPodCPU(t, podCgroup, int64(k.unit), "before the resize")
	quota, shares := readPodCPU(t, podCgroup)
	before := k.cpusets(ctx, t)

	n := k.mach.cpus.Size()
	k.resize(ctx, t, "pinned", fmt.Sprintf("%d", n), "64Mi")
	t.Cleanup(func() { k.putBack(t, "pinned", k.units(1), "64Mi") })
	// The plugin's refusal, whether it comes from the container's update
	// or, earlier, from the pod's: CPU 0 is reserved and stays shared.
	reason := "resizeAllocateCPUsError"
	if k.mach.unpredictable != "" {
		reason = "[A-Za-z]+" // TopologyAffinityError, when every CPU spans NUMA nodes
	}
	want := regexp.MustCompile(`(Infeasible|Deferred): ` + reason + `: .*default/pinned`)
	cond := k.WaitResizeError(ctx, t, "pinned", want)
	t.Logf("PodResizeInProgress: reason %s, message %q", cond.Reason, cond.Message)
	k.wantEvent(ctx, t, "pinned", "ResizeError", want)

	// The kubelet retries about once a second: look again after a few.
	for _, after := range []time.Duration{0, 3 * time.Second} {
		time.Sleep(after)
		if q, s := readPodCPU(t, podCgroup); q != quota || s != shares {
			t.Errorf("pod cgroup %s %v after the refusal: CPU quota %d, shares (v1) or weight (v2) %d, want them unchanged (%d, %d): the kubelet wrote the pod cgroup for a resize the runtime refused",
				podCgroup.Path, after, q, s, quota, shares)
		}
		k.wantCPUsets(ctx, t, before)
	}
	if a, _ := k.checkpoint(t).Assignment(pinned.Pod.Spec.UID, "app"); !a.Assigned().Equals(exclusive) {
		t.Errorf("checkpoint after the refusal: %+v, want %s", a, exclusive)
	}
	if pr, ok := k.checkpoint(t).PodResources(pinned.Pod.Spec.UID); ok && pr.Resources.CPUQuota > int64(k.unit)*100000 {
		t.Errorf("checkpoint records the refused pod resources: %+v (pod resources are checkpointed only when accepted)", pr.Resources)
	}
}

// memoryOnlyResize grows the pinned pod's memory: applied, cpuset kept.
func (k *kube) memoryOnlyResize(ctx context.Context, t *testing.T, exclusive cpuset.CPUSet) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	before := k.cpusets(ctx, t)
	k.resize(ctx, t, "pinned", k.units(1), "96Mi")
	p := k.waitResized(ctx, t, "pinned", k.units(1), "96Mi")
	app := k.Attach(ctx, t, p, "app")
	cg, err := app.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if limit, err := cg.MemoryLimit(); err != nil || limit != 96*harness.MiB {
		t.Errorf("memory.limit_in_bytes %d (%v), want 96Mi", limit, err)
	}
	k.wantCPUsets(ctx, t, before)
	e2etest.WantCPUs(ctx, t, app, exclusive)
}

// configMapEdit sets inPlaceResize: false in the ConfigMap: the plugin
// picks it up from the mounted volume and refuses the growth with
// featureDisabledError; then it is set back.
func (k *kube) configMapEdit(ctx context.Context, t *testing.T, exclusive cpuset.CPUSet) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	plugin := k.Attach(ctx, t, k.pluginPod(ctx, t), "nri-cpumanager")
	setResize := func(from, to string) {
		t.Helper()
		out, err := k.Cluster.Kubectl(ctx, "get", "configmap", "nri-cpumanager-config", "-n", e2etest.PluginNamespace, "-o", "jsonpath={.data.config\\.yaml}")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "inPlaceResize: "+from) {
			t.Fatalf("the ConfigMap's config.yaml has no %q:\n%s", "inPlaceResize: "+from, out)
		}
		patch := encodeJSON(t, map[string]any{"data": map[string]string{"config.yaml": strings.Replace(out, "inPlaceResize: "+from, "inPlaceResize: "+to, 1)}})
		if _, err := k.Cluster.Kubectl(ctx, "patch", "configmap", "nri-cpumanager-config", "-n", e2etest.PluginNamespace, "--type=merge", "-p", patch); err != nil {
			t.Fatal(err)
		}
	}
	mark := k.logSize(ctx, t, plugin)
	edited := time.Now()
	setResize("true", "false")
	if _, err := k.waitLog(ctx, plugin, mark, regexp.MustCompile(`configuration file changed.*inPlaceResize`)); err != nil {
		t.Fatalf("the plugin did not see the ConfigMap edit: %v", err)
	}
	t.Logf("the ConfigMap edit reached the plugin in %v", time.Since(edited).Round(100*time.Millisecond))
	n := k.mach.cpus.Size()
	k.resize(ctx, t, "pinned", fmt.Sprintf("%d", n), "96Mi")
	cond := k.WaitResizeError(ctx, t, "pinned", regexp.MustCompile(`Infeasible: featureDisabledError: .*default/pinned`))
	t.Logf("PodResizeInProgress: %q", cond.Message)
	k.putBack(t, "pinned", k.units(1), "96Mi")
	e2etest.WantCPUs(ctx, t, k.Attach(ctx, t, k.Pod(ctx, t, "pinned"), "app"), exclusive)

	mark = k.logSize(ctx, t, plugin)
	setResize("false", "true")
	if _, err := k.waitLog(ctx, plugin, mark, regexp.MustCompile(`configuration file changed.*inPlaceResize`)); err != nil {
		t.Fatalf("the plugin did not see the ConfigMap put back: %v", err)
	}
}

// growthAndShrink grows the pinned pod to 2 CPUs and shrinks it back; it
// needs free CPUs beyond the reserved and the pinned one.
func (k *kube) growthAndShrink(ctx context.Context, t *testing.T, exclusive cpuset.CPUSet) {
	if n := k.mach.cpus.Size(); n < 4*k.unit {
		t.Skipf("skipped: a real growth and shrink needs at least %d CPUs (cores of %d CPUs: one with the reserved CPU, one pinned, one to grow into, one left to the shared pool); this machine has %d (%s). The refused growth above covers the smaller case.", 4*k.unit, k.unit, n, k.mach.cpus)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	k.resize(ctx, t, "pinned", k.units(2), "96Mi")
	p := k.waitResized(ctx, t, "pinned", k.units(2), "96Mi")
	app := k.Attach(ctx, t, p, "app")
	grown := e2etest.SettledCPUs(ctx, t, app, fmt.Sprintf("%d CPUs keeping %s, none reserved", 2*k.unit, exclusive), func(s cpuset.CPUSet) bool {
		return s.Size() == 2*k.unit && exclusive.IsSubsetOf(s) && s.Intersection(k.reserved).IsEmpty()
	})
	e2etest.WantCPUs(ctx, t, k.Attach(ctx, t, k.Pod(ctx, t, "shared"), "app"), k.mach.cpus.Difference(grown))
	podCgroup, err := app.Pod.Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	wantPodCPU(t, podCgroup, int64(2*k.unit), "after the growth")

	k.resize(ctx, t, "pinned", k.units(1), "96Mi")
	k.waitResized(ctx, t, "pinned", k.units(1), "96Mi")
	e2etest.WantCPUs(ctx, t, app, exclusive)
	e2etest.WantCPUs(ctx, t, k.Attach(ctx, t, k.Pod(ctx, t, "shared"), "app"), k.mach.cpus.Difference(exclusive))
}

// pluginPodRecreated deletes the plugin's pod: the DaemonSet makes a new
// one, and the pinned pod keeps its CPUs throughout.
func (k *kube) pluginPodRecreated(ctx context.Context, t *testing.T, exclusive cpuset.CPUSet) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	before := k.cpusets(ctx, t)
	old := k.pluginPod(ctx, t)
	if _, err := k.Cluster.Kubectl(ctx, "delete", "pod", "-n", e2etest.PluginNamespace, old.Metadata.Name, "--wait=true"); err != nil {
		t.Fatal(err)
	}
	k.wantCPUsets(ctx, t, before)
	renewed := k.WaitPluginReady(ctx, t, old.Metadata.UID)
	t.Logf("plugin pod %s replaced by %s", old.Metadata.Name, renewed.Metadata.Name)
	e2etest.WantCPUs(ctx, t, k.Attach(ctx, t, k.Pod(ctx, t, "pinned"), "app"), exclusive)
	k.wantCPUsets(ctx, t, before)
	e2etest.WantProcessCPUs(ctx, t, k.Attach(ctx, t, renewed, "nri-cpumanager"), k.mach.cpus.Difference(exclusive))
}

// failClosed takes the plugin off the node (the DaemonSet's node label
// removed): a new pod cannot be created, and says why; the plugin comes
// back (its own pod tolerates its absence) and the pod starts on the
// shared pool.
func (k *kube) failClosed(ctx context.Context, t *testing.T, exclusive cpuset.CPUSet) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := k.Cluster.Kubectl(ctx, "label", "node", k.Cluster.NodeName, e2etest.NodeLabel+"-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		k.Cluster.Kubectl(ctx, "label", "node", k.Cluster.NodeName, e2etest.NodeLabel+"=true", "--overwrite")
	})
	if err := harness.Poll(ctx, func() (bool, error) {
		out, err := k.Cluster.Kubectl(ctx, "get", "pods", "-n", e2etest.PluginNamespace, "-l", e2etest.PluginSelector, "-o", "name")
		return err == nil && strings.TrimSpace(out) == "", nil
	}); err != nil {
		t.Fatalf("the plugin pod did not go: %v", err)
	}
	k.Apply(ctx, t, harness.PodManifest("late", k.Cluster.NodeName, harness.PodContainer{Name: "app", Resources: sharedResources}))
	t.Cleanup(func() { k.DeletePod(t, "late") })
	const wantErr = `required plugin "` + pluginName + `" not present`
	var waiting string
	err := harness.Poll(ctx, func() (bool, error) {
		p := k.Pod(ctx, t, "late")
		if c := p.Container("app"); c != nil && c.State.Waiting != nil && c.State.Waiting.Message != "" {
			waiting = c.State.Waiting.Reason + ": " + c.State.Waiting.Message
			return c.State.Waiting.Reason == "CreateContainerError", nil
		}
		if c := p.Container("app"); c != nil && c.State.Running != nil {
			return false, fmt.Errorf("the pod runs although the plugin is away")
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod created while the plugin is away: last state %q: %v", waiting, err)
	}
	t.Logf("while the plugin is away: %s", waiting)
	if !strings.Contains(waiting, wantErr) {
		t.Errorf("the pod's waiting state %q does not say %q", waiting, wantErr)
	}

	if _, err := k.Cluster.Kubectl(ctx, "label", "node", k.Cluster.NodeName, e2etest.NodeLabel+"=true"); err != nil {
		t.Fatal(err)
	}
	k.WaitPluginReady(ctx, t, "")
	late := k.Attach(ctx, t, k.WaitReady(ctx, t, "late"), "app")
	e2etest.WantCPUs(ctx, t, late, k.mach.cpus.Difference(exclusive))
	e2etest.WantCPUs(ctx, t, k.Attach(ctx, t, k.Pod(ctx, t, "pinned"), "app"), exclusive)
}

// deletedPodReturnsCPUs deletes the pinned pod: its CPUs go back to the
// shared pool.
func (k *kube) deletedPodReturnsCPUs(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	uid := k.Pod(ctx, t, "pinned").Metadata.UID
	k.DeletePod(t, "pinned")
	shared := k.Attach(ctx, t, k.Pod(ctx, t, "shared"), "app")
	e2etest.WantCPUs(ctx, t, shared, k.mach.cpus)
	e2etest.WantProcessCPUs(ctx, t, k.Attach(ctx, t, k.pluginPod(ctx, t), "nri-cpumanager"), k.mach.cpus)
	st := k.checkpoint(t)
	if _, ok := st.Assignment(uid, "app"); ok || st.NumAssignments() != 0 || !st.DefaultCPUSet().Equals(k.mach.cpus) {
		t.Errorf("checkpoint after the deletion: %d entries, shared pool %s, want none and %s", st.NumAssignments(), st.DefaultCPUSet(), k.mach.cpus)
	}
}

// podLevelResources runs a Guaranteed pod whose resources are set at the
// pod level only (KEP-2837): the kubelet gives each of its two containers
// the pod's CPU limit and the shares to match, so both look exclusive. The
// plugin pins one, runs the other on the shared pool so that the pod gets
// no more exclusive CPUs than its limit, and says so in its log.
func (k *kube) podLevelResources(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cpu := k.units(1)
	k.Apply(ctx, t, fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "pod-level", "namespace": "default"},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "automountServiceAccountToken": false,
    "enableServiceLinks": false, "terminationGracePeriodSeconds": 1,
    "resources": {"requests": {"cpu": %q, "memory": "128Mi"}, "limits": {"cpu": %q, "memory": "128Mi"}},
    "containers": [
      {"name": "app", "image": %q, "imagePullPolicy": "Never"},
      {"name": "side", "image": %q, "imagePullPolicy": "Never"}]
  }
}`, k.Cluster.NodeName, cpu, cpu, harness.BusyboxImage, harness.BusyboxImage))
	defer k.DeletePod(t, "pod-level")
	p := k.WaitReady(ctx, t, "pod-level")

	st := k.checkpoint(t)
	var pinned, shared string
	var exclusive cpuset.CPUSet
	for _, name := range []string{"app", "side"} {
		if a, ok := st.Assignment(p.Metadata.UID, name); ok {
			pinned, exclusive = name, a.Baseline
		} else {
			shared = name
		}
	}
	if pinned == "" || shared == "" {
		t.Fatalf("checkpoint: %d of the pod's 2 containers pinned, want 1 (the pod's CPU limit is %s CPUs, each container's too)", st.NumAssignments(), cpu)
	}
	if exclusive.Size() != k.unit || !exclusive.IsSubsetOf(k.available()) {
		t.Errorf("%s pinned to %s, want %d CPUs of %s", pinned, exclusive, k.unit, k.available())
	}
	e2etest.WantCPUs(ctx, t, k.Attach(ctx, t, p, pinned), exclusive)
	e2etest.WantCPUs(ctx, t, k.Attach(ctx, t, p, shared), k.mach.cpus.Difference(exclusive))
	plugin := k.Attach(ctx, t, k.pluginPod(ctx, t), "nri-cpumanager")
	note := regexp.MustCompile(`default/pod-level/` + shared + `: runs on the shared pool: its \d+ CPUs and the \d+ exclusive CPUs of its pod's other containers exceed the pod's CPU limit`)
	if line, err := k.waitLog(ctx, plugin, 0, note); err != nil {
		t.Errorf("plugin log: %v", err)
	} else {
		t.Logf("plugin: %s", strings.TrimSpace(line))
	}
}

// available returns the whole cores without a reserved CPU.
func (k *kube) available() cpuset.CPUSet {
	available := cpuset.New()
	for _, core := range k.mach.cores {
		if core.Intersection(k.reserved).IsEmpty() {
			available = available.Union(core)
		}
	}
	return available
}

// units returns n cores' worth of CPUs as a Kubernetes quantity.
func (k *kube) units(n int) string { return fmt.Sprint(n * k.unit) }

// pluginPod returns the DaemonSet's one pod.
func (k *kube) pluginPod(ctx context.Context, t *testing.T) *harness.KubePod {
	t.Helper()
	var list struct {
		Items []harness.KubePod `json:"items"`
	}
	if err := k.Cluster.KubectlJSON(ctx, &list, "get", "pods", "-n", e2etest.PluginNamespace, "-l", e2etest.PluginSelector); err != nil {
		t.Fatal(err)
	}
	var live []harness.KubePod
	for _, p := range list.Items {
		if p.Ready() {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d Ready plugin pods of %d, want one", len(live), len(list.Items))
	}
	return &live[0]
}

// resize asks for new resources of a pod's container "app" through the
// resize subresource, as a user would.
func (k *kube) resize(ctx context.Context, t *testing.T, name, cpu, memory string) {
	t.Helper()
	k.Resize(ctx, t, name, map[string]map[string]string{"app": {"cpu": cpu, "memory": memory}})
}

// putBack asks for the given resources again and waits until no resize is
// in progress or pending: how a user stops the kubelet's retries.
func (k *kube) putBack(t *testing.T, name, cpu, memory string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k.resize(ctx, t, name, cpu, memory)
	k.waitResized(ctx, t, name, cpu, memory)
}

// waitResized waits until the pod's container "app" runs with the given
// resources and no resize is in progress or pending.
func (k *kube) waitResized(ctx context.Context, t *testing.T, name, cpu, memory string) *harness.KubePod {
	t.Helper()
	return k.WaitResized(ctx, t, name, map[string]map[string]string{"app": {"cpu": cpu, "memory": memory}})
}

// wantEvent checks that the pod has an event with reason and a message
// matching want.
func (k *kube) wantEvent(ctx context.Context, t *testing.T, name, reason string, want *regexp.Regexp) {
	t.Helper()
	var list struct {
		Items []kubeEvent `json:"items"`
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := harness.Poll(ctx, func() (bool, error) {
		if err := k.Cluster.KubectlJSON(ctx, &list, "get", "events", "--field-selector", "involvedObject.name="+name+",reason="+reason); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if want.MatchString(e.Message) {
				t.Logf("event %s (count %d): %q", e.Reason, e.Count, e.Message)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("pod %s: no %s event matching %q among %+v: %v", name, reason, want, list.Items, err)
	}
}

// cpusets returns the cgroup cpuset of every container of the test's pods
// and the plugin's.
func (k *kube) cpusets(ctx context.Context, t *testing.T) map[string]cpuset.CPUSet {
	t.Helper()
	out := map[string]cpuset.CPUSet{}
	var list struct {
		Items []harness.KubePod `json:"items"`
	}
	for _, ns := range []string{"default", e2etest.PluginNamespace} {
		if err := k.Cluster.KubectlJSON(ctx, &list, "get", "pods", "-n", ns); err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running == nil {
					continue
				}
				c := k.Attach(ctx, t, &p, cs.Name)
				cpus, err := c.CgroupCPUs(ctx)
				if err != nil {
					t.Fatal(err)
				}
				out[ns+"/"+p.Metadata.Name+"/"+cs.Name] = cpus
			}
		}
	}
	return out
}

// wantCPUsets checks that the containers of before still have their
// cpusets.
func (k *kube) wantCPUsets(ctx context.Context, t *testing.T, before map[string]cpuset.CPUSet) {
	t.Helper()
	now := k.cpusets(ctx, t)
	for name, cpus := range before {
		if got, ok := now[name]; ok && !got.Equals(cpus) {
			t.Errorf("%s: cpuset %s, was %s", name, got, cpus)
		}
	}
}

// checkpoint reads and verifies the plugin's checkpoint.
func (k *kube) checkpoint(t *testing.T) *state.State {
	t.Helper()
	return e2etest.ReadCheckpoint(t, k.stateDir, k.mach.cpus)
}

// readPodCPU returns the CPU quota of a pod cgroup and its cpu.shares
// (cgroup v1) or cpu.weight (v2).
func readPodCPU(t *testing.T, g *harness.Cgroup) (quota, weight int64) {
	t.Helper()
	var err error
	if quota, err = g.CPUQuota(); err != nil {
		t.Fatal(err)
	}
	if g.Version() == 1 {
		weight, err = g.CPUShares()
	} else {
		weight, err = g.CPUWeight()
	}
	if err != nil {
		t.Fatal(err)
	}
	return quota, weight
}

// wantPodCPU checks that a pod cgroup has the CPU quota and shares (or
// their cgroup v2 weight) the kubelet gives a pod of cpus CPUs.
func wantPodCPU(t *testing.T, g *harness.Cgroup, cpus int64, when string) {
	t.Helper()
	quota, err := g.CPUQuota()
	if err != nil {
		t.Fatal(err)
	}
	ok, got, err := g.SharesMatch(cpus * 1024)
	if err != nil {
		t.Fatal(err)
	}
	if quota != cpus*100000 || !ok {
		t.Errorf("pod cgroup %s %s: CPU quota %d, %s; want quota %d and shares %d", g.Path, when, quota, got, cpus*100000, cpus*1024)
	}
}

// logSize returns the current size of a container's log file, a mark for
// waitLog.
func (k *kube) logSize(ctx context.Context, t *testing.T, c *harness.Container) int64 {
	t.Helper()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(st.GetLogPath())
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// waitLog waits for a line of the container's log (the kubelet's CRI log
// file) after offset to match re, and returns it.
func (k *kube) waitLog(ctx context.Context, c *harness.Container, offset int64, re *regexp.Regexp) (string, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var line string
	err = harness.Poll(ctx, func() (bool, error) {
		data, err := os.ReadFile(st.GetLogPath())
		if err != nil {
			return false, err
		}
		if int64(len(data)) < offset {
			offset = 0
		}
		for _, l := range strings.Split(string(data[offset:]), "\n") {
			if re.MatchString(l) {
				line = l
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("no line matching %q in %s's log %s: %w", re, c, st.GetLogPath(), err)
	}
	return line, nil
}
