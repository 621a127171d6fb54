//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The plugin's image as the Kubernetes suite builds and imports it, and
// where the DaemonSet of deploy/ runs.
const (
	pluginImageRepo = "localhost/nri-cpumanager"
	pluginImageTag  = "e2e"
	pluginNamespace = "nri-cpumanager"
	pluginSelector  = "app.kubernetes.io/name=nri-cpumanager"
	// nodeLabel is the label deploy/daemonset.yaml's nodeSelector wants.
	nodeLabel = "nri-cpumanager.io/enabled"
)

// buildPluginImage builds the plugin's image the way the release does
// (hack/image: both platforms, version and revision stamped) into
// _output/e2e and returns the archive.
func buildPluginImage(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin, err := harness.GoBuild(ctx, "", "./hack/image")
	if err != nil {
		t.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(root, "_output", "e2e", "nri-cpumanager-image.tar")
	cmd := exec.CommandContext(ctx, bin, "-o", archive, "-name", pluginImageRepo, "-tag", pluginImageTag)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build the plugin image: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
	return archive
}

// overlay writes a kustomization in a temporary directory that takes
// deploy/ as it is, with its NodeResourceTopology component, and only
// points the DaemonSet at this test's containerd, state directory, image
// and API server (and puts it on the host network, and drops its CPU
// request: see the patch).
func overlay(t *testing.T, env *harness.Env, stateDir string, cluster *harness.Cluster) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(root, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	apiHost, apiPort, err := cluster.APIServerHostPort()
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
components:
- %s/components/noderesourcetopology
images:
- name: ghcr.io/nri-cpumanager/nri-cpumanager
  newName: %s
  newTag: %s
patches:
- path: daemonset-patch.yaml
`, base, base, pluginImageRepo, pluginImageTag)
	patch := fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nri-cpumanager
  namespace: nri-cpumanager
spec:
  template:
    spec:
      # The test node has no CNI: a pod network cannot be set up, the
      # host's can.
      hostNetwork: true
      containers:
      - name: nri-cpumanager
        resources:
          # On a 2-CPU node, the plugin's 100m would make the kubelet defer
          # a 1 -> 2 CPU growth itself (2 CPUs + 100m > 2 allocatable)
          # before asking the runtime, and the test wants the plugin's
          # answer.
          requests: {cpu: "0"}
        env:
        # No kube-proxy: the kubernetes Service's cluster IP leads nowhere,
        # the API server's loopback address does (the host network).
        - {name: KUBERNETES_SERVICE_HOST, value: %q}
        - {name: KUBERNETES_SERVICE_PORT, value: %q}
      volumes:
      - name: nri
        hostPath: {path: %q, type: Directory}
      - name: state
        hostPath: {path: %q, type: DirectoryOrCreate}
`, apiHost, apiPort, env.Containerd.NRISocketDir(), stateDir)
	for name, content := range map[string]string{"kustomization.yaml": kustomization, "daemonset-patch.yaml": patch} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// deployedConfig returns the plugin's configuration as deploy/configmap.yaml
// sets it, read with the plugin's own parser.
func deployedConfig(t *testing.T) *config.Config {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatalf("deploy/configmap.yaml: %v", err)
	}
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("deploy/configmap.yaml's config.yaml: %v", err)
	}
	return cfg
}

// The parts of Kubernetes objects the suite reads from `kubectl -o json`.
type (
	kubeMeta struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	}
	kubeResources struct {
		Limits map[string]string `json:"limits"`
	}
	kubeCondition struct {
		Type    string `json:"type"`
		Status  string `json:"status"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	kubeContainerStatus struct {
		Name        string `json:"name"`
		ContainerID string `json:"containerID"`
		State       struct {
			Waiting *struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"waiting"`
			Running *struct{} `json:"running"`
		} `json:"state"`
		Resources *kubeResources `json:"resources"`
	}
	kubePod struct {
		Metadata kubeMeta `json:"metadata"`
		Status   struct {
			Conditions        []kubeCondition       `json:"conditions"`
			ContainerStatuses []kubeContainerStatus `json:"containerStatuses"`
		} `json:"status"`
	}
	kubeEvent struct {
		Reason         string `json:"reason"`
		Message        string `json:"message"`
		Count          int    `json:"count"`
		InvolvedObject struct {
			Name string `json:"name"`
		} `json:"involvedObject"`
	}
)

// condition returns the pod's condition of type typ, or nil.
func (p *kubePod) condition(typ string) *kubeCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// ready reports whether the pod's Ready condition is true.
func (p *kubePod) ready() bool {
	c := p.condition("Ready")
	return c != nil && c.Status == "True"
}

// container returns the status of the pod's container called name, or nil.
func (p *kubePod) container(name string) *kubeContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// podManifest returns a pod for the test node on the host network with one
// container "app" of the busybox image (never pulled) and the given
// resources (a JSON object).
func podManifest(name, nodeName, resources string) string {
	return fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default"},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "automountServiceAccountToken": false,
    "enableServiceLinks": false, "terminationGracePeriodSeconds": 1,
    "containers": [{"name": "app", "image": %q, "imagePullPolicy": "Never", "resources": %s}]
  }
}`, name, nodeName, harness.BusyboxImage, resources)
}

// guaranteedCPUs is a Guaranteed container's resources with whole CPUs.
func guaranteedCPUs(cpus int, memory string) string {
	return fmt.Sprintf(`{"requests": {"cpu": "%d", "memory": %q}, "limits": {"cpu": "%d", "memory": %q}}`, cpus, memory, cpus, memory)
}

// sharedResources is a Burstable container that requests memory only: it
// runs on the shared pool and leaves the node's CPUs to the kubelet's
// resize admission (see the DaemonSet patch).
const sharedResources = `{"requests": {"memory": "32Mi"}, "limits": {"memory": "64Mi"}}`

// encodeJSON returns v as JSON for a kubectl patch.
func encodeJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
