package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The plugin's image as the Kubernetes suites build and import it, and
// where the DaemonSet of deploy/ runs.
const (
	PluginImageRepo = "localhost/nri-cpumanager"
	PluginImageTag  = "e2e"
	PluginNamespace = "nri-cpumanager"
	PluginSelector  = "app.kubernetes.io/name=nri-cpumanager"
	// NodeLabel is the label deploy/daemonset.yaml's nodeSelector wants.
	NodeLabel = "nri-cpumanager.io/enabled"
	// PluginMetrics is the DaemonSet's plugin's /metrics, on the node's
	// host network.
	PluginMetrics = "http://127.0.0.1:9101/metrics"
)

// PluginMetricValue reads one sample of the DaemonSet's plugin's metrics.
func PluginMetricValue(ctx context.Context, series string) (float64, error) {
	return harness.MetricValue(ctx, PluginMetrics, series)
}

// Kube drives a suite's single-node cluster with kubectl, and reads its
// containers through CRI on the suite's containerd.
type Kube struct {
	Env     *harness.Env
	Cluster *harness.Cluster
	// Wait bounds each wait for a pod (Ready, resized, its resize
	// refused), PluginWait the wait for the DaemonSet's pod: minutes on
	// the host, many more in the emulated guest.
	Wait, PluginWait time.Duration
}

// Kubectl runs kubectl and returns its output without surrounding white
// space.
func (k *Kube) Kubectl(ctx context.Context, t testing.TB, args ...string) string {
	t.Helper()
	out, err := k.Cluster.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// Apply applies a manifest.
func (k *Kube) Apply(ctx context.Context, t testing.TB, manifest string) {
	t.Helper()
	if _, err := k.Cluster.KubectlStdin(ctx, manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// KubeletCheckpointComponent is deploy/'s component that imports the
// kubelet's CPU assignments.
const KubeletCheckpointComponent = "components/kubelet-checkpoint"

// Overlay writes, in a directory of the test's, a kustomization that
// takes deploy (deploy/ or the payload's copy) as it is, with the given
// components of it, and only points the DaemonSet at this containerd's
// NRI socket, the state directory, the imported image and the cluster's
// API server, on the host network (the node has no CNI); see
// harness.DeployOverlay. With KubeletCheckpointComponent, the component
// reads the cluster's kubelet's checkpoint.
func (k *Kube) Overlay(t testing.TB, deploy string, components []string, stateDir string) string {
	t.Helper()
	apiHost, apiPort, err := k.Cluster.APIServerHostPort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := harness.DeployOverlay{
		Deploy: deploy, Components: components, Image: PluginImageRepo, Tag: PluginImageTag,
		NRISocketDir: k.Env.Containerd.NRISocketDir(), StateDir: stateDir,
		APIHost: apiHost, APIPort: apiPort,
		KubeletConfig: k.Cluster.KubeletConfigFile(), ContainerdConfig: k.Env.Containerd.ConfigPath(),
	}
	if slices.Contains(components, KubeletCheckpointComponent) {
		o.KubeletCheckpoint = k.Cluster.KubeletCheckpoint()
	}
	if err := o.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The suites read pods from the API server (Cluster.GetJSON), as
// `kubectl get -o json` would print them, and change them with kubectl:
// the waits read a pod once a second or more, and a kubectl process costs
// seconds of the emulated guest's CPUs, taken from the components that do
// what the test waits for.

// Pods lists the pods of a namespace that match a label selector and a
// field selector ("" for any).
func (k *Kube) Pods(ctx context.Context, t testing.TB, namespace, labelSelector, fieldSelector string) []harness.KubePod {
	t.Helper()
	pods, err := k.listPods(ctx, namespace, labelSelector, fieldSelector)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// listPods is Pods returning its error.
func (k *Kube) listPods(ctx context.Context, namespace, labelSelector, fieldSelector string) ([]harness.KubePod, error) {
	query := url.Values{}
	if labelSelector != "" {
		query.Set("labelSelector", labelSelector)
	}
	if fieldSelector != "" {
		query.Set("fieldSelector", fieldSelector)
	}
	path := "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods"
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var list struct {
		Items []harness.KubePod `json:"items"`
	}
	if err := k.Cluster.GetJSON(ctx, path, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Pod returns a pod of the default namespace.
func (k *Kube) Pod(ctx context.Context, t testing.TB, name string) *harness.KubePod {
	t.Helper()
	var p harness.KubePod
	if err := k.Cluster.GetJSON(ctx, "/api/v1/namespaces/default/pods/"+url.PathEscape(name), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// WaitPluginReady waits (up to PluginWait) until the DaemonSet has exactly
// one pod, Ready through its probes and other than the pod with UID
// notUID ("" for any), and `kubectl rollout status` agrees; it returns
// that pod. (rollout status alone can answer before the DaemonSet
// controller has seen a node just labelled.)
func (k *Kube) WaitPluginReady(ctx context.Context, t testing.TB, notUID string) *harness.KubePod {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, k.PluginWait)
	defer cancel()
	var found *harness.KubePod
	var last string
	err := harness.Poll(ctx, func() (bool, error) {
		pods, err := k.listPods(ctx, PluginNamespace, PluginSelector, "")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d pods", len(pods))
		if len(pods) != 1 || pods[0].Metadata.UID == notUID || !pods[0].Ready() {
			return false, nil
		}
		found = &pods[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("no Ready plugin pod (last: %s): %v\n%s", last, err, k.DescribePlugin(context.Background()))
	}
	if _, err := k.Cluster.Kubectl(ctx, "rollout", "status", "daemonset/nri-cpumanager", "-n", PluginNamespace, "--timeout=1m"); err != nil {
		t.Fatal(err)
	}
	return found
}

// DescribePlugin returns `kubectl describe` of the plugin's pods, for
// failure messages.
func (k *Kube) DescribePlugin(ctx context.Context) string {
	out, err := k.Cluster.Kubectl(ctx, "describe", "pods", "-n", PluginNamespace, "-l", PluginSelector)
	if err != nil {
		return err.Error()
	}
	return out
}

// WaitReady waits (up to Wait) for a pod of the default namespace to be
// Ready, and returns it.
func (k *Kube) WaitReady(ctx context.Context, t testing.TB, name string) *harness.KubePod {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, k.Wait)
	defer cancel()
	var p *harness.KubePod
	if err := harness.Poll(ctx, func() (bool, error) {
		p = k.Pod(ctx, t, name)
		return p.Ready(), nil
	}); err != nil {
		out, _ := k.Cluster.Kubectl(context.Background(), "describe", "pod", name)
		t.Fatalf("pod %s not Ready: %v\n%s", name, err, out)
	}
	return p
}

// Attach returns the CRI view of a pod's container, init container or
// sidecar.
func (k *Kube) Attach(ctx context.Context, t testing.TB, p *harness.KubePod, name string) *harness.Container {
	t.Helper()
	cs := p.Container(name)
	if cs == nil {
		cs = p.InitContainer(name)
	}
	if cs == nil || cs.ContainerID == "" {
		t.Fatalf("pod %s has no container %s yet", p.Metadata.Name, name)
	}
	c, err := k.Env.CRI.Attach(ctx, cs.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Resize asks, in one patch of the pod's resize subresource, as a user
// would, for new requests and limits (equal) of the named containers:
// resource name ("cpu", "memory") to quantity.
func (k *Kube) Resize(ctx context.Context, t testing.TB, name string, containers map[string]map[string]string) {
	t.Helper()
	// The API server refuses a resize whose containers come in another
	// order than the pod's ("may not be renamed or reordered"): the
	// suites' pods name theirs in sorted order, so sort (a map's order
	// is random).
	var list []any
	for _, c := range slices.Sorted(maps.Keys(containers)) {
		list = append(list, map[string]any{"name": c, "resources": map[string]any{"requests": containers[c], "limits": containers[c]}})
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": list}})
	if err != nil {
		t.Fatal(err)
	}
	k.Kubectl(ctx, t, "patch", "pod", name, "--subresource", "resize", "--patch", string(patch))
}

// WaitResized waits (up to Wait) until each named container of the pod
// runs with the given limits (the kubelet's status) and no resize is in
// progress or pending, and returns the pod.
func (k *Kube) WaitResized(ctx context.Context, t testing.TB, name string, containers map[string]map[string]string) *harness.KubePod {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, k.Wait)
	defer cancel()
	var p *harness.KubePod
	err := harness.Poll(ctx, func() (bool, error) {
		p = k.Pod(ctx, t, name)
		if p.Condition("PodResizeInProgress") != nil || p.Condition("PodResizePending") != nil {
			return false, nil
		}
		for cname, limits := range containers {
			c := p.Container(cname)
			if c == nil || c.Resources == nil {
				return false, nil
			}
			for resource, quantity := range limits {
				if c.Resources.Limits[resource] != quantity {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod %s not resized to %v: %v; conditions %+v", name, containers, err, p.Status.Conditions)
	}
	return p
}

// WaitResizeError waits (up to Wait) for the pod's PodResizeInProgress
// condition with reason Error and a message matching want, and returns
// it.
func (k *Kube) WaitResizeError(ctx context.Context, t testing.TB, name string, want *regexp.Regexp) harness.KubeCondition {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, k.Wait)
	defer cancel()
	var last harness.KubeCondition
	err := harness.Poll(ctx, func() (bool, error) {
		p := k.Pod(ctx, t, name)
		if c := p.Condition("PodResizeInProgress"); c != nil {
			last = *c
			return c.Reason == "Error" && want.MatchString(c.Message), nil
		}
		if c := p.Condition("PodResizePending"); c != nil {
			last = *c
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s: no PodResizeInProgress Error matching %q: last condition %+v: %v", name, want, last, err)
	}
	return last
}

// DeletePod deletes pods of the default namespace and waits (up to Wait)
// until they are gone: one kubectl call, the pods terminating together.
func (k *Kube) DeletePod(t testing.TB, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), k.Wait)
	defer cancel()
	args := append(append([]string{"delete", "pod"}, names...), "--ignore-not-found", "--wait=true")
	if _, err := k.Cluster.Kubectl(ctx, args...); err != nil {
		t.Error(err)
	}
}
