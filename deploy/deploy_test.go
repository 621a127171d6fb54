// Package deploy holds the Kubernetes manifests of nri-cpumanager; its test
// checks that they are well formed and agree with the plugin.
package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

func load(t *testing.T, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return doc
}

// dig walks a decoded YAML document.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("no key %q in %v", k, v)
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				t.Fatalf("no element %d in %v", k, v)
			}
			v = s[k]
		}
	}
	return v
}

// TestConfigMapHoldsAValidConfig parses the ConfigMap's config.yaml with
// the plugin's own parser.
func TestConfigMapHoldsAValidConfig(t *testing.T) {
	cm := load(t, "configmap.yaml")
	text, ok := dig(t, cm, "data", "config.yaml").(string)
	if !ok || strings.TrimSpace(text) == "" {
		t.Fatal("the ConfigMap has no config.yaml")
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("config.yaml in the ConfigMap: %v", err)
	}
	if cfg.NRISocket != "/var/run/nri/nri.sock" || cfg.MetricsAddress != ":9101" || cfg.StateDir != "/var/lib/nri-cpumanager" {
		t.Errorf("unexpected config: socket %s, metrics %s, state %s", cfg.NRISocket, cfg.MetricsAddress, cfg.StateDir)
	}
	// Values that differ from the defaults: the file really was read.
	if cfg.ReservedSystemCPUs.String() != "0" || !cfg.CPUManagerPolicyOptions.FullPCPUsOnly || cfg.TopologyManagerPolicy != "single-numa-node" {
		t.Errorf("the ConfigMap's settings were not read: reserved %q, full-pcpus-only %v, topology manager policy %q",
			cfg.ReservedSystemCPUs, cfg.CPUManagerPolicyOptions.FullPCPUsOnly, cfg.TopologyManagerPolicy)
	}
}

// TestDaemonSetMountsWhatTheConfigNames checks that the DaemonSet mounts
// the ConfigMap where its args say, and every host path the config uses.
func TestDaemonSetMountsWhatTheConfigNames(t *testing.T) {
	ds := load(t, "daemonset.yaml")
	spec := dig(t, ds, "spec", "template", "spec")
	ctr := dig(t, spec, "containers", 0)
	args := dig(t, ctr, "args").([]any)
	if strings.Join(toStrings(args), " ") != "run --config /etc/nri-cpumanager/config.yaml" {
		t.Errorf("args %v", args)
	}
	mounts := map[string]string{}
	for _, m := range dig(t, ctr, "volumeMounts").([]any) {
		mounts[dig(t, m, "mountPath").(string)] = dig(t, m, "name").(string)
	}
	cm := load(t, "configmap.yaml")
	cfg, err := config.Parse([]byte(dig(t, cm, "data", "config.yaml").(string)))
	if err != nil {
		t.Fatal(err)
	}
	for path, what := range map[string]string{
		"/etc/nri-cpumanager":       "the ConfigMap",
		filepath.Dir(cfg.NRISocket): "the NRI socket's directory (" + cfg.NRISocket + ")",
		cfg.StateDir:                "the state directory",
		cfg.SysfsRoot:               "sysfs",
		cfg.KubeletCheckpoint:       "the kubelet checkpoint",
	} {
		if _, ok := mounts[path]; !ok {
			t.Errorf("%s is not mounted at %s", what, path)
		}
	}
	if !strings.HasPrefix(cfg.CgroupfsRoot, cfg.SysfsRoot+"/") {
		t.Errorf("cgroupfsRoot %s is not under the mounted %s", cfg.CgroupfsRoot, cfg.SysfsRoot)
	}
	probe := dig(t, ctr, "readinessProbe", "httpGet", "path")
	if probe != "/readyz" {
		t.Errorf("readiness probe %v", probe)
	}
}

func toStrings(v []any) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i], _ = x.(string)
	}
	return out
}

// TestKustomizationListsEveryManifest checks the kustomization.
func TestKustomizationListsEveryManifest(t *testing.T) {
	k := load(t, "kustomization.yaml")
	var listed []string
	for _, r := range dig(t, k, "resources").([]any) {
		listed = append(listed, r.(string))
	}
	for _, want := range []string{"namespace.yaml", "configmap.yaml", "daemonset.yaml"} {
		found := false
		for _, l := range listed {
			found = found || l == want
		}
		if !found {
			t.Errorf("kustomization does not list %s", want)
		}
	}
}
