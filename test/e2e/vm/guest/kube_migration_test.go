//go:build vmguest

package guest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The kubelet's CPU managers the node moves between (docs/install.md):
// the static policy with the plugin's reservation (CPU 0), and none, the
// plugin's node, whose allocatable counts every CPU.
var (
	kubeletStatic = harness.KubeletCPUManager{Policy: "static", ReservedSystemCPUs: "0"}
	kubeletNone   = harness.KubeletCPUManager{Policy: "none"}
)

// kubeletCheckpoint is the part of the kubelet's cpu_manager_state the
// moves check.
type kubeletCheckpoint struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries"`
}

// readKubeletCheckpoint reads the kubelet's checkpoint.
func (k *kube) readKubeletCheckpoint() kubeletCheckpoint {
	k.t.Helper()
	cp, err := k.loadKubeletCheckpoint()
	if err != nil {
		k.t.Fatalf("the kubelet's checkpoint: %v", err)
	}
	return cp
}

// loadKubeletCheckpoint reads the kubelet's checkpoint, or says why not.
func (k *kube) loadKubeletCheckpoint() (kubeletCheckpoint, error) {
	var cp kubeletCheckpoint
	data, err := os.ReadFile(k.Cluster.KubeletCheckpoint())
	if err == nil {
		err = json.Unmarshal(data, &cp)
	}
	return cp, err
}

// tolerateMissingPlugins is the pod annotation containerd's validator
// lets start without the required plugins (TestKubernetes's
// NRIValidator).
const tolerateMissingPlugins = "tolerate-missing-nri-plugins.noderesource.dev"

// withAnnotation returns a manifest with an annotation added.
func withAnnotation(t testing.TB, manifest, key, value string) string {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	annotations[key] = value
	meta["annotations"] = annotations
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// pinnedByTheKubelet creates the pod "migrant" (a Guaranteed container
// "app" of 2 CPUs) on the kubelet's static policy, before the plugin
// runs, and returns the container and the CPUs the kubelet gave it.
func (k *kube) pinnedByTheKubelet(ctx context.Context) (*harness.Container, cpuset.CPUSet) {
	t := k.t
	// containerd's NRI validator requires the plugin for every container
	// (deploy/containerd-nri.toml): the pod carries the annotation that
	// tolerates its absence, as pods started before containerd was
	// configured for the plugin run without it.
	manifest := withAnnotation(t, harness.PodManifest("migrant", k.Cluster.NodeName,
		harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(2, "64Mi")}), tolerateMissingPlugins, "true")
	k.Apply(ctx, t, manifest)
	p := k.WaitReady(ctx, t, "migrant")
	app := k.Attach(ctx, t, p, "app")
	cpus := exclusiveCPUs(ctx, t, app, 2)
	cp := k.readKubeletCheckpoint()
	if got := cp.Entries[p.Metadata.UID]["app"]; cp.PolicyName != "static" || got != cpus.String() {
		t.Fatalf("the kubelet's checkpoint: policy %q, migrant/app on %q; want static, %s (the container's cpuset)", cp.PolicyName, got, cpus)
	}
	t.Logf("migrant: pinned by the kubelet's static policy to %s", cpus)
	return app, cpus
}

// moveIn is docs/install.md's "Importing the kubelet's CPU assignments"
// on the real kubelet, once the plugin, deployed with the
// kubelet-checkpoint component, is ready: its log says it imported the
// kubelet's assignments; the kubelet is switched to cpuManagerPolicy none
// with its checkpoint removed; the pod the kubelet pinned keeps its CPUs,
// now its original CPUs in the plugin's checkpoint, grows keeping them
// and shrinks back to them. The pod is deleted at the end: the cases
// after it start on a node where nothing is pinned.
func (k *kube) moveIn(ctx context.Context, migrant *harness.Container, cpus cpuset.CPUSet, stateDir string) {
	t := k.t
	start := time.Now()
	imported := regexp.MustCompile(`imported the kubelet's CPU assignments`)
	err := everySecond(ctx, func() (bool, error) {
		return imported.MatchString(k.Cluster.ContainerLogTails(e2etest.PluginNamespace, 100000)), nil
	})
	if err != nil {
		t.Fatalf("the plugin's log does not say that it imported the kubelet's assignments: %v\n%s",
			err, lastLines(k.Cluster.ContainerLogTails(e2etest.PluginNamespace, 100000), 30))
	}
	err = k.Cluster.SwitchKubeletCPUManager(ctx, kubeletNone, func() error {
		return os.Remove(k.Cluster.KubeletCheckpoint())
	})
	if err != nil {
		t.Fatal(err)
	}
	// Its CPU manager starts after its healthz answers, and writes a
	// checkpoint of policy none then.
	var policy string
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = everySecond(waitCtx, func() (bool, error) {
		if cp, err := k.loadKubeletCheckpoint(); err == nil {
			policy = cp.PolicyName
		}
		return policy == "none", nil
	})
	if err != nil {
		t.Errorf("the kubelet's checkpoint after its restart: policy %q, want none: %v", policy, err)
	}
	t.Logf("the kubelet runs cpuManagerPolicy none %v into the move", time.Since(start).Round(time.Second))
	// A container the plugin had not adopted would have been put on the
	// shared pool at its first Synchronize.
	wantCPUs(ctx, t, migrant, cpus.String())
	st := e2etest.ReadCheckpoint(t, stateDir, must(online))
	if a, ok := st.Assignment(migrant.Pod.Spec.UID, "app"); !ok || !a.Baseline.Equals(cpus) || !a.Assigned().Equals(cpus) {
		t.Errorf("the plugin's checkpoint entry of migrant/app: %+v (present %v), want original and assigned %s", a, ok, cpus)
	}

	k.resize(ctx, "migrant", 4)
	k.waitResized(ctx, "migrant", 4)
	grown := exclusiveCPUs(ctx, t, migrant, 4)
	if !cpus.IsSubsetOf(grown) {
		t.Errorf("migrant grew from %s to %s, losing the CPUs the kubelet gave it", cpus, grown)
	}
	k.resize(ctx, "migrant", 2)
	k.waitResized(ctx, "migrant", 2)
	wantCPUs(ctx, t, migrant, cpus.String())
	k.DeletePod(t, "migrant")
	// The cases after this one start from a node where nothing is pinned.
	k.waitGauge(ctx, "no exclusive CPU after migrant's deletion", 3*time.Minute, func(get func(string) float64) bool {
		return get("nri_cpumanager_exclusive_cpus") == 0
	})
	t.Logf("moved in from the kubelet's static policy: migrant kept %s, grew to %s and back, in %v", cpus, grown, time.Since(start).Round(time.Second))
}

// moveOut is docs/install.md's "Going back to the kubelet's static
// policy" on the real kubelet, with the pod "pinned" grown to 4 CPUs (a
// resized container, the export's hard case): the node's label removed,
// the plugin's pod gone; `nri-cpumanager export-kubelet` writes the
// plugin's checkpoint as the kubelet's; the kubelet is switched to the
// static policy on it. The kubelet starts, admits the running pods again
// (a pod it refused would fail), and keeps every pinned container on its
// CPUs through its reconciliation.
func (k *kube) moveOut(ctx context.Context, shared *harness.Container, stateDir string) {
	t := k.t
	start := time.Now()
	k.resize(ctx, "pinned", 4)
	k.waitResized(ctx, "pinned", 4)
	pinnedPod := k.Pod(ctx, t, "pinned")
	pinned := k.Attach(ctx, t, pinnedPod, "app")
	cpus := exclusiveCPUs(ctx, t, pinned, 4)
	pool := e2etest.SettledCPUs(ctx, t, shared, "one cpuset", func(cpuset.CPUSet) bool { return true })
	restarts := k.restartCounts(ctx)

	k.Kubectl(ctx, t, "label", "node", k.Cluster.NodeName, e2etest.NodeLabel+"-")
	err := everySecond(ctx, func() (bool, error) {
		return len(k.Pods(ctx, t, e2etest.PluginNamespace, e2etest.PluginSelector, "")) == 0, nil
	})
	if err != nil {
		t.Fatalf("the plugin's pod did not go when the node's label was removed: %v", err)
	}
	out, err := exec.CommandContext(ctx, plugin, "export-kubelet", "--state-dir", stateDir, "--reserved-cpus", kubeletStatic.ReservedSystemCPUs).Output()
	if err != nil {
		t.Fatalf("export-kubelet: %v", err)
	}
	t.Logf("export-kubelet:\n%s", out)
	err = k.Cluster.SwitchKubeletCPUManager(ctx, kubeletStatic, func() error {
		return os.WriteFile(k.Cluster.KubeletCheckpoint(), out, 0o644)
	})
	if err != nil {
		t.Fatalf("%v\nthe kubelet's log:\n%s", err, k.Cluster.LogTails(40))
	}
	t.Logf("the kubelet runs the static policy %v into the move", time.Since(start).Round(time.Second))
	// The kubelet admits the pods it finds again, and its CPU manager
	// reconciles every container's cpuset every 10 s: wait for three
	// rounds.
	time.Sleep(30 * time.Second)
	cp := k.readKubeletCheckpoint()
	if got := cp.Entries[pinnedPod.Metadata.UID]["app"]; cp.PolicyName != "static" || got != cpus.String() {
		t.Errorf("the kubelet's checkpoint: policy %q, pinned/app on %q; want static, %s", cp.PolicyName, got, cpus)
	}
	wantCPUs(ctx, t, pinned, cpus.String())
	wantCPUs(ctx, t, shared, pool.String())
	for name, n := range k.restartCounts(ctx) {
		if phase := k.Pod(ctx, t, name).Status.Phase; phase != "Running" {
			t.Errorf("pod %s is %s after the kubelet's restart on the static policy: it refused the pod", name, phase)
		}
		if n != restarts[name] {
			t.Errorf("pod %s: %d container restarts, %d before the move", name, n, restarts[name])
		}
	}
	t.Logf("moved back to the kubelet's static policy: pinned kept %s, the shared pool %s, in %v", cpus, pool, time.Since(start).Round(time.Second))
}

// restartCounts returns the running pods of the default namespace and
// their containers' restarts.
func (k *kube) restartCounts(ctx context.Context) map[string]int {
	counts := map[string]int{}
	for _, p := range k.Pods(ctx, k.t, "default", "", "status.phase=Running") {
		n := 0
		for _, c := range p.Status.ContainerStatuses {
			n += c.RestartCount
		}
		counts[p.Metadata.Name] = n
	}
	return counts
}
