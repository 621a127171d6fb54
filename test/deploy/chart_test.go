package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// typeFields name the configuration file's format rather than a setting:
// the chart writes them, and its schema accepts only their one value.
var typeFields = map[string]bool{"apiVersion": true, "kind": true}

// configKeys are the keys of the plugin's configuration file, from the
// config package itself (every key written out with its default), and for
// the keys whose value is a map of options, the options with their
// defaults.
func configKeys(t *testing.T) (keys []string, options map[string]map[string]string) {
	t.Helper()
	doc, err := config.Default().YAML()
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]any
	if err := yaml.Unmarshal(doc, &all); err != nil {
		t.Fatal(err)
	}
	options = map[string]map[string]string{}
	for k, v := range all {
		if typeFields[k] {
			continue
		}
		keys = append(keys, k)
		if m, ok := v.(map[string]any); ok {
			options[k] = map[string]string{}
			for o, d := range m {
				options[k][o] = fmt.Sprint(d)
			}
		}
	}
	sort.Strings(keys)
	if len(keys) < 10 || len(options) < 2 {
		t.Fatalf("config.Default().YAML() gave only keys %v, options %v", keys, options)
	}
	return keys, options
}

// alternatives give each top-level key a valid value other than its
// default, with any other key the change needs. A key the config package
// gains must be added here (the test says so).
var alternatives = map[string]map[string]any{
	"nriSocket":             {"nriSocket": "/run/containerd/nri/nri.sock"},
	"pluginName":            {"pluginName": "cpumanager-test"},
	"pluginIndex":           {"pluginIndex": "42"},
	"stateDir":              {"stateDir": "/var/lib/nri-cpumanager-test"},
	"sysfsRoot":             {"sysfsRoot": "/host/sys", "cgroupfsRoot": "/host/sys/fs/cgroup"},
	"cgroupfsRoot":          {"cgroupfsRoot": "/sys/fs/cgroup/unified"},
	"reservedSystemCPUs":    {"reservedSystemCPUs": "0,4"},
	"reservedCPUCount":      {"reservedCPUCount": 2}, // alone: it replaces the default list
	"topologyManagerPolicy": {"topologyManagerPolicy": "single-numa-node"},
	"topologyManagerScope":  {"topologyManagerScope": "pod"},
	"inPlaceResize":         {"inPlaceResize": false},
	"scaleDownDelay":        {"scaleDownDelay": "30s"},
	"alignMemory":           {"alignMemory": true},
	"metricsAddress":        {"metricsAddress": ":9200"},
	"healthAddress":         {"healthAddress": ":9203"},
	"probeSocket":           {"probeSocket": "/run/nri-cpumanager/probes/probe.sock"},
	"nriConfigureTimeout":   {"nriConfigureTimeout": "20s"},
	"logLevel":              {"logLevel": "debug"},
	"logFormat":             {"logFormat": "json"},
	"kubeletCheckpoint":     {"kubeletCheckpoint": "/var/lib/k0s/kubelet/cpu_manager_state"},
	"disconnectedTimeout":   {"disconnectedTimeout": "2m30s"},
	"isolatedCPUs":          {"isolatedCPUs": "exclusive"},
	"debugAddress":          {"debugAddress": "127.0.0.1:9300"},
	"kubernetesAPI":         {"kubernetesAPI": false},
	"observeOnly":           {"observeOnly": true},
}

// otherOption is a valid option value other than def: the other boolean,
// or a larger count.
func otherOption(t *testing.T, def string) string {
	t.Helper()
	if b, err := strconv.ParseBool(def); err == nil {
		return strconv.FormatBool(!b)
	}
	if n, err := strconv.Atoi(def); err == nil {
		return strconv.Itoa(n + 1)
	}
	t.Fatalf("no other value known for an option with default %q", def)
	return ""
}

// asJSON normalizes a value for comparison (numbers, strings, booleans).
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// effectiveYAML is the effective configuration as the key → value map of
// the configuration file.
func effectiveYAML(t *testing.T, c *config.Config) map[string]any {
	t.Helper()
	doc, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestChartDefaultsAreDeploysDaemonSet(t *testing.T) {
	ch := loadChart(t)
	m := chart(t, nil)
	if got := m.kinds(); got != "ClusterRole ClusterRoleBinding ConfigMap DaemonSet NetworkPolicy ServiceAccount" {
		t.Fatalf("the chart's defaults render %q, want a ConfigMap, a DaemonSet and a NetworkPolicy", got)
	}
	p := pluginOf(t, m)
	checkSafe(t, p)
	sameConfig(t, "the chart's default config", p.cfg, shippedDefaults())
	checkLabels(t, m, true)

	km := kustomize(t, deployDir)
	k := pluginOf(t, km)
	checkLabels(t, km, false)
	// The same DaemonSet but for the tool's labels.
	sameObject(t, "the chart's and deploy/'s DaemonSets", normalized(p.ds), normalized(k.ds))
	sameObject(t, "the chart's and deploy/'s ConfigMap metadata", normalized(p.cm).ObjectMeta, normalized(k.cm).ObjectMeta)
	sameObject(t, "the chart's and deploy/'s NetworkPolicies", normalized(only(t, "NetworkPolicy", m.networkPolicies)), normalized(only(t, "NetworkPolicy", km.networkPolicies)))
	if want := "ghcr.io/nri-cpumanager/nri-cpumanager:" + ch.Metadata.AppVersion; p.ctr.Image != want {
		t.Errorf("the chart's image %s, want %s (the appVersion)", p.ctr.Image, want)
	}
}

func TestChartLint(t *testing.T) {
	kube, err := common.ParseKubeVersion("v1.36.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, values := range []map[string]any{
		nil,
		{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}},
	} {
		result := lint.RunAll(chartDir, values, releaseNamespace, lint.WithKubeVersion(kube))
		for _, msg := range result.Messages {
			if msg.Severity >= support.WarningSev {
				t.Errorf("helm lint with %v: %s", values, msg)
			}
		}
	}
}

func TestChartValuesAndSchemaHaveEveryConfigKey(t *testing.T) {
	keys, options := configKeys(t)
	ch := loadChart(t)
	defaults, ok := ch.Values["config"].(map[string]any)
	if !ok {
		t.Fatalf("values.yaml has no config map")
	}
	var schema struct {
		Properties struct {
			Config schemaObject `json:"config"`
		} `json:"properties"`
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	cfgSchema := schema.Properties.Config
	if cfgSchema.AdditionalProperties == nil || *cfgSchema.AdditionalProperties {
		t.Error("values.schema.json: config allows unknown keys (additionalProperties is not false)")
	}
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
		if _, ok := defaults[k]; !ok {
			t.Errorf("values.yaml: config.%s is missing (every key is written with its default)", k)
		}
		if _, ok := cfgSchema.Properties[k]; !ok {
			t.Errorf("values.schema.json: config.%s is missing", k)
		}
	}
	for k := range cfgSchema.Properties {
		if !known[k] && !typeFields[k] {
			t.Errorf("values.schema.json: config.%s is not a key of the plugin's configuration", k)
		}
	}
	for k := range defaults {
		if !known[k] {
			t.Errorf("values.yaml: config.%s is not a key of the plugin's configuration", k)
		}
	}
	for key, opts := range options {
		var optSchema schemaObject
		if err := json.Unmarshal(cfgSchema.Properties[key], &optSchema); err != nil {
			t.Errorf("values.schema.json: config.%s: %v", key, err)
			continue
		}
		if optSchema.AdditionalProperties == nil || *optSchema.AdditionalProperties {
			t.Errorf("values.schema.json: config.%s allows unknown options", key)
		}
		for o := range opts {
			if _, ok := optSchema.Properties[o]; !ok {
				t.Errorf("values.schema.json: config.%s.%s is missing", key, o)
			}
		}
		for o := range optSchema.Properties {
			if _, ok := opts[o]; !ok {
				t.Errorf("values.schema.json: config.%s.%s is not an option of the plugin", key, o)
			}
		}
	}
}

// schemaObject is the part of a JSON schema object the test reads.
type schemaObject struct {
	Properties           map[string]json.RawMessage `json:"properties"`
	AdditionalProperties *bool                      `json:"additionalProperties"`
}

func TestChartSetsEveryConfigKey(t *testing.T) {
	keys, options := configKeys(t)
	ch := loadChart(t)
	for _, key := range keys {
		if opts, ok := options[key]; ok {
			for opt, def := range opts {
				t.Run(key+"/"+opt, func(t *testing.T) {
					var want any = otherOption(t, def)
					if key == "nodeResourceTopology" { // booleans, not option strings
						want = want == "true"
					}
					p := renderPlugin(t, ch, map[string]any{key: map[string]any{opt: want}})
					got := effectiveYAML(t, p.cfg)[key].(map[string]any)[opt]
					if asJSON(t, got) != asJSON(t, want) {
						t.Errorf("config.%s.%s: set %q through the chart, the plugin reads %v", key, opt, want, got)
					}
				})
			}
			continue
		}
		t.Run(key, func(t *testing.T) {
			set, ok := alternatives[key]
			if !ok {
				t.Fatalf("config key %s has no alternative value in this test: add one to alternatives", key)
			}
			p := renderPlugin(t, ch, set)
			got := effectiveYAML(t, p.cfg)
			for k, want := range set {
				if asJSON(t, got[k]) != asJSON(t, want) {
					t.Errorf("config.%s: set %v through the chart, the plugin reads %v", k, want, got[k])
				}
			}
		})
	}
}

// renderPlugin renders the chart with config values, and checks the
// result is safe.
func renderPlugin(t *testing.T, ch *chartv2.Chart, cfg map[string]any) *deployed {
	t.Helper()
	m, err := renderChart(ch, releaseName, map[string]any{"config": cfg})
	if err != nil {
		t.Fatalf("rendering the chart with config %v: %v", cfg, err)
	}
	p := pluginOf(t, m)
	checkSafe(t, p)
	return p
}

func TestChartKubeletCheckpointImport(t *testing.T) {
	p := pluginOf(t, chart(t, map[string]any{"config": map[string]any{"kubeletCheckpoint": config.KubeletCheckpointPath}}))
	checkSafe(t, p)
	if p.cfg.KubeletCheckpoint != config.KubeletCheckpointPath {
		t.Errorf("kubeletCheckpoint %q", p.cfg.KubeletCheckpoint)
	}
	// The same mount as deploy/'s component.
	k := pluginOf(t, kustomizeOverlay(t, components.kubeletCheckpoint))
	name := func(p *deployed) string { return hostMounts(t, p)[config.KubeletCheckpointPath].mount.Name }
	sameObject(t, "the kubelet checkpoint volume of the chart and of the component", volume(t, p.pod, name(p)), volume(t, k.pod, name(k)))
	sameObject(t, "the kubelet checkpoint mount of the chart and of the component",
		hostMounts(t, p)[config.KubeletCheckpointPath].mount, hostMounts(t, k)[config.KubeletCheckpointPath].mount)
	if m := hostMounts(t, p)[config.KubeletCheckpointPath]; m.hostType != corev1.HostPathFile {
		t.Errorf("kubelet checkpoint hostPath type %q, want File", m.hostType)
	}
}

func TestChartMonitoringMatchesKustomize(t *testing.T) {
	m := chart(t, map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
	})
	if got := m.kinds(); got != "ClusterRole ClusterRoleBinding ConfigMap DaemonSet NetworkPolicy PrometheusRule Service ServiceAccount ServiceMonitor" {
		t.Fatalf("the chart with monitoring renders %q", got)
	}
	p := pluginOf(t, m)
	checkSafe(t, p)
	checkScraping(t, p, only(t, "Service", m.services), only(t, "ServiceMonitor", m.serviceMonitors))

	k := kustomizeOverlay(t, components.prometheus)
	sameObject(t, "the chart's and components/prometheus's Services", normalized(m.services[0]), normalized(k.services[0]))
	sameObject(t, "the chart's and components/prometheus's ServiceMonitors", normalized(m.serviceMonitors[0]), normalized(k.serviceMonitors[0]))
	sameObject(t, "the chart's and components/prometheus's PrometheusRules", normalized(m.prometheusRules[0]), normalized(k.prometheusRules[0]))
	checkLabels(t, m, true)
	checkLabels(t, k, false)

	// The labels a Prometheus selects them by.
	m = chart(t, map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"role": "alerts"}},
	})
	if got := only(t, "ServiceMonitor", m.serviceMonitors).Labels["release"]; got != "prom" {
		t.Errorf("serviceMonitor.labels not applied: release=%q", got)
	}
	if got := only(t, "PrometheusRule", m.prometheusRules).Labels["role"]; got != "alerts" {
		t.Errorf("prometheusRule.labels not applied: role=%q", got)
	}
}

func TestChartUnderAnotherReleaseName(t *testing.T) {
	m, err := renderChart(loadChart(t), "cpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := pluginOf(t, m)
	checkSafe(t, p)
	if p.ds.Name != "cpu-nri-cpumanager" || p.cm.Name != "cpu-nri-cpumanager-config" {
		t.Errorf("release cpu names the DaemonSet %s and the ConfigMap %s", p.ds.Name, p.cm.Name)
	}
	if p.ds.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "cpu" {
		t.Errorf("selector %v does not name the release", p.ds.Spec.Selector.MatchLabels)
	}
}

func TestChartNonDefaultValues(t *testing.T) {
	m := chart(t, map[string]any{
		"image":          map[string]any{"repository": "registry.example/nri-cpumanager", "tag": "v9.9.9"},
		"nodeSelector":   map[string]any{"kubernetes.io/os": "linux", enabledLabel: "true", "pool": "latency"},
		"tolerations":    []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "latency", "effect": "NoSchedule"}},
		"resources":      map[string]any{"requests": map[string]any{"cpu": "200m", "memory": "96Mi"}, "limits": map[string]any{"memory": "256Mi"}},
		"podAnnotations": map[string]any{"example.com/team": "platform"},
		"config":         map[string]any{"metricsAddress": ""},
	})
	p := pluginOf(t, m)
	checkSafe(t, p)
	if p.ctr.Image != "registry.example/nri-cpumanager:v9.9.9" {
		t.Errorf("image %s", p.ctr.Image)
	}
	if p.pod.NodeSelector["pool"] != "latency" || len(p.pod.Tolerations) != 1 || p.pod.Tolerations[0].Key != "dedicated" {
		t.Errorf("nodeSelector %v, tolerations %v", p.pod.NodeSelector, p.pod.Tolerations)
	}
	if q := p.ctr.Resources.Limits[corev1.ResourceMemory]; q.String() != "256Mi" {
		t.Errorf("memory limit %s", q.String())
	}
	if p.pod.PriorityClassName != "" || p.ds.Spec.Template.Annotations["example.com/team"] != "platform" {
		t.Errorf("priorityClassName %q, annotations %v", p.pod.PriorityClassName, p.ds.Spec.Template.Annotations)
	}

	digest := "sha256:" + strings.Repeat("ab", 32)
	p = pluginOf(t, chart(t, map[string]any{"image": map[string]any{"digest": digest}}))
	checkSafe(t, p)
	if !strings.HasSuffix(p.ctr.Image, "@"+digest) {
		t.Errorf("image %s is not pinned by the digest", p.ctr.Image)
	}
}

func TestChartRefusesMistakes(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"misspelt top-level key", map[string]any{"nodeselector": map[string]any{}}, "nodeselector"},
		{"misspelt config key", map[string]any{"config": map[string]any{"reservedSystemCpus": "0"}}, "reservedSystemCpus"},
		{"unknown option", map[string]any{"config": map[string]any{"cpuManagerPolicyOptions": map[string]any{"full-pcpu-only": "true"}}}, "full-pcpu-only"},
		{"option as a boolean", map[string]any{"config": map[string]any{"cpuManagerPolicyOptions": map[string]any{"full-pcpus-only": true}}}, "full-pcpus-only"},
		{"unknown topology policy", map[string]any{"config": map[string]any{"topologyManagerPolicy": "single-numa"}}, "topologyManagerPolicy"},
		{"unquoted plugin index", map[string]any{"config": map[string]any{"pluginIndex": 9}}, "pluginIndex"},
		{"bad CPU list", map[string]any{"config": map[string]any{"reservedSystemCPUs": "0-"}}, "reservedSystemCPUs"},
		{"relative path", map[string]any{"config": map[string]any{"stateDir": "state"}}, "stateDir"},
		{"latest image", map[string]any{"image": map[string]any{"tag": "latest"}}, "tag"},
		{"CPU limit", map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "128Mi"}}}, "limits"},
		{"no memory limit", map[string]any{"resources": map[string]any{"limits": nil, "requests": map[string]any{"cpu": "100m"}}}, "limits"},
		{"cgroup tree outside sysfsRoot", map[string]any{"config": map[string]any{"sysfsRoot": "/host/sys"}}, "cgroupfsRoot"},
		{"ServiceMonitor without metrics", map[string]any{"config": map[string]any{"metricsAddress": ""}, "serviceMonitor": map[string]any{"enabled": true}}, "metricsAddress"},
		{"a CPU list and a count", map[string]any{"config": map[string]any{"reservedSystemCPUs": "0,1", "reservedCPUCount": 2}}, "reservedCPUCount"},
		{"an extra argument not a string", map[string]any{"extraArgs": []any{map[string]any{"a": 1}}}, "extraArgs"},
		{"an extra variable without a name", map[string]any{"extraEnv": []any{map[string]any{"value": "1"}}}, "extraEnv"},
		{"a misspelt networkPolicy key", map[string]any{"networkPolicy": map[string]any{"enable": false}}, "enable"},
		{"Kubernetes before 1.35", nil, "kubeVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.want == "kubeVersion" {
				err = installOn(ch, "v1.34.2")
			} else {
				_, err = renderChart(ch, releaseName, tc.values)
			}
			if err == nil {
				t.Fatalf("values %v rendered without error", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("values %v: the error does not name %q:\n%v", tc.values, tc.want, err)
			}
			t.Logf("refused: %v", err)
		})
	}
}
