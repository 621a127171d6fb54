//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
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
	cmd := exec.CommandContext(ctx, bin, "-o", archive, "-name", e2etest.PluginImageRepo, "-tag", e2etest.PluginImageTag)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build the plugin image: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
	return archive
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

// kubeEvent is the part of a core/v1 Event the suite reads.
type kubeEvent struct {
	Reason         string `json:"reason"`
	Message        string `json:"message"`
	Count          int    `json:"count"`
	InvolvedObject struct {
		Name string `json:"name"`
	} `json:"involvedObject"`
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
