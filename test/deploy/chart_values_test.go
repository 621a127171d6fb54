package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Labels that say which tool installed an object: they differ between
// the chart and deploy/ by design.
var toolLabels = []string{"app.kubernetes.io/managed-by", "helm.sh/chart"}

// normalized returns a copy of o without the tool's labels, to compare the
// chart's objects with deploy/'s.
func normalized[T interface{ DeepCopyObject() runtime.Object }](o T) T {
	c := o.DeepCopyObject().(T)
	strip := func(l map[string]string) {
		for _, k := range toolLabels {
			delete(l, k)
		}
	}
	if m, ok := any(c).(metav1.Object); ok {
		strip(m.GetLabels())
	}
	if ds, ok := any(c).(*appsv1.DaemonSet); ok {
		strip(ds.Spec.Template.Labels)
	}
	return c
}

// objects lists every object of a rendering.
func objects(m *manifests) []metav1.Object {
	var out []metav1.Object
	add := func(o metav1.Object) { out = append(out, o) }
	for _, o := range m.namespaces {
		add(o)
	}
	for _, o := range m.configMaps {
		add(o)
	}
	for _, o := range m.daemonSets {
		add(o)
	}
	for _, o := range m.services {
		add(o)
	}
	for _, o := range m.serviceMonitors {
		add(o)
	}
	for _, o := range m.prometheusRules {
		add(o)
	}
	for _, o := range m.networkPolicies {
		add(o)
	}
	for _, o := range m.resourceQuotas {
		add(o)
	}
	for _, o := range m.serviceAccounts {
		add(o)
	}
	for _, o := range m.clusterRoles {
		add(o)
	}
	for _, o := range m.roleBindings {
		add(o)
	}
	return out
}

// checkLabels checks the recommended labels on every object and on the
// plugin's pods; helm says which tool rendered them.
func checkLabels(t *testing.T, m *manifests, helm bool) {
	t.Helper()
	managedBy := "kustomize"
	if helm {
		managedBy = "Helm"
	}
	want := map[string]string{
		"app.kubernetes.io/component":  "plugin",
		"app.kubernetes.io/part-of":    "nri-cpumanager",
		"app.kubernetes.io/managed-by": managedBy,
		"app.kubernetes.io/version":    loadChart(t).Metadata.AppVersion,
	}
	check := func(what string, labels map[string]string, chartLabel bool) {
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", what, k, labels[k], v)
			}
		}
		for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance"} {
			if labels[k] == "" {
				t.Errorf("%s: no label %s", what, k)
			}
		}
		if _, ok := labels["helm.sh/chart"]; ok != chartLabel {
			t.Errorf("%s: helm.sh/chart present %v, want %v", what, ok, chartLabel)
		}
	}
	for _, o := range objects(m) {
		check(fmt.Sprintf("%T %s", o, o.GetName()), o.GetLabels(), helm)
	}
	for _, ds := range m.daemonSets {
		check("the pods of "+ds.Name, ds.Spec.Template.Labels, false)
	}
}

// installOn returns the error helm install gives for the chart on a
// cluster of that Kubernetes version (helm's action package checks the
// chart's kubeVersion with this same function).
func installOn(ch *chartv2.Chart, version string) error {
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, version) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, version)
	}
	return nil
}

// TestChartKubeVersionIsTheDocs: the chart installs on the Kubernetes
// versions the docs require (in-place resize GA) and not before.
func TestChartKubeVersionIsTheDocs(t *testing.T) {
	ch := loadChart(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`in-place resize is GA since 1\.(\d+)`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/install.md does not say since which Kubernetes in-place resize is GA")
	}
	var minor int
	fmt.Sscan(string(m[1]), &minor)
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{fmt.Sprintf("v1.%d.0", minor), true},
		{fmt.Sprintf("v1.%d.3", minor+1), true},
		{fmt.Sprintf("v1.%d.9", minor-1), false},
	} {
		if err := installOn(ch, tc.version); (err == nil) != tc.ok {
			t.Errorf("kubeVersion %q on %s: %v, want accepted %v", ch.Metadata.KubeVersion, tc.version, err, tc.ok)
		}
	}
}

// TestChartEveryDocumentedValueRenders renders every value the schema
// enumerates for the configuration (each enum value, each option with each
// of its values) and the values files the docs show, and has the plugin's
// parser read each rendered ConfigMap (renderPlugin does): what the chart
// accepts, the plugin runs with.
func TestChartEveryDocumentedValueRenders(t *testing.T) {
	ch := loadChart(t)
	var schema struct {
		Properties struct {
			Config struct {
				Properties map[string]schemaProp `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	n := 0
	for key, prop := range schema.Properties.Config.Properties {
		for _, v := range prop.Enum {
			n++
			t.Run(fmt.Sprintf("%s=%v", key, v), func(t *testing.T) {
				p := renderPlugin(t, ch, map[string]any{key: v})
				if got := effectiveYAML(t, p.cfg)[key]; asJSON(t, got) != asJSON(t, v) {
					t.Errorf("config.%s=%v through the chart, the plugin reads %v", key, v, got)
				}
			})
		}
		for opt, optProp := range prop.Properties {
			for _, v := range optProp.Enum {
				n++
				t.Run(fmt.Sprintf("%s.%s=%v", key, opt, v), func(t *testing.T) {
					renderPlugin(t, ch, map[string]any{key: map[string]any{opt: v}})
				})
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d enumerated values found in the schema", n)
	}

	// The documented one-liners and examples.
	for name, values := range map[string]map[string]any{
		"--set config.reservedCPUCount=2": {"config": map[string]any{"reservedCPUCount": 2}},
		"no CPU reserved":                 {"config": map[string]any{"reservedSystemCPUs": ""}},
		"a count with an empty list":      {"config": map[string]any{"reservedSystemCPUs": "", "reservedCPUCount": 3}},
		"no cgroup verification":          {"config": map[string]any{"cgroupfsRoot": ""}},
		"the host's /sys elsewhere":       {"config": map[string]any{"sysfsRoot": "/host/sys", "cgroupfsRoot": "/host/sys/fs/cgroup"}},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := renderChart(ch, releaseName, values)
			if err != nil {
				t.Fatal(err)
			}
			checkSafe(t, pluginOf(t, m))
		})
	}
	p := renderPlugin(t, ch, map[string]any{"reservedCPUCount": 2})
	if p.cfg.ReservedCPUCount != 2 || !p.cfg.ReservedSystemCPUs.IsEmpty() {
		t.Errorf("reservedCPUCount=2: the plugin reserves %d CPUs and the list %s", p.cfg.ReservedCPUCount, p.cfg.ReservedSystemCPUs)
	}
	if p := renderPlugin(t, ch, map[string]any{"cgroupfsRoot": ""}); p.cfg.CgroupfsRoot != "" {
		t.Errorf("cgroupfsRoot \"\": the plugin reads %q", p.cfg.CgroupfsRoot)
	}

	examples := docValuesFiles(t)
	if len(examples) == 0 {
		t.Fatal("no chart values file found in docs/install.md")
	}
	for i, values := range examples {
		t.Run(fmt.Sprintf("docs/install.md values file %d", i+1), func(t *testing.T) {
			m, err := renderChart(ch, releaseName, values)
			if err != nil {
				t.Fatalf("%v\n%v", err, values)
			}
			checkSafe(t, pluginOf(t, m))
		})
	}
}

// schemaProp is the part of a schema property the test reads.
type schemaProp struct {
	Enum       []any                 `json:"enum"`
	Properties map[string]schemaProp `json:"properties"`
}

// docValuesFiles returns the YAML blocks of docs/install.md that are
// chart values files (those writing config: at the top level).
func docValuesFiles(t *testing.T) []map[string]any {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if !regexp.MustCompile(`(?m)^config:`).MatchString(block[1]) {
			continue
		}
		var values map[string]any
		if err := yaml.Unmarshal([]byte(block[1]), &values); err != nil {
			t.Fatalf("docs/install.md: a values file does not parse: %v\n%s", err, block[1])
		}
		out = append(out, values)
	}
	return out
}

func TestChartPriorityClass(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		namespace, value, want string
		quota                  bool
	}{
		{"kube-system", "", "system-node-critical", false},
		{releaseNamespace, "", "", false},
		{releaseNamespace, "system-node-critical", "system-node-critical", true},
		{releaseNamespace, "high-priority", "high-priority", false},
		{"kube-system", "high-priority", "high-priority", false},
	} {
		m, err := renderChartIn(ch, tc.namespace, map[string]any{"priorityClassName": tc.value})
		if err != nil {
			t.Fatal(err)
		}
		p := pluginOf(t, m)
		if p.pod.PriorityClassName != tc.want || (len(m.resourceQuotas) == 1) != tc.quota {
			t.Errorf("in %s with priorityClassName %q: the pod's %q, %d quotas; want %q, quota %v",
				tc.namespace, tc.value, p.pod.PriorityClassName, len(m.resourceQuotas), tc.want, tc.quota)
		}
		if tc.quota {
			q := m.resourceQuotas[0]
			k := only(t, "ResourceQuota", kustomizeOverlay(t, filepath.Join(deployDir, "components", "node-critical")).resourceQuotas)
			sameObject(t, "the chart's and components/node-critical's quota", normalized(q).Spec, normalized(k).Spec)
		}
	}
}

func TestChartExtras(t *testing.T) {
	m := chart(t, map[string]any{
		"extraArgs":         []any{"--log-level=debug"},
		"extraEnv":          []any{map[string]any{"name": "GODEBUG", "value": "madvdontneed=1"}},
		"extraVolumes":      []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}},
		"extraVolumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/scratch"}},
		"podAnnotations":    map[string]any{"example.com/team": "platform"},
		"podLabels":         map[string]any{"example.com/tier": "node"},
	})
	p := pluginOf(t, m)
	checkSafe(t, p)
	if p.cfg.LogLevel.String() != "debug" {
		t.Errorf("extraArgs --log-level=debug: the plugin runs at %s", p.cfg.LogLevel)
	}
	env := map[string]string{}
	for _, e := range p.ctr.Env {
		env[e.Name] = e.Value
	}
	if env["GODEBUG"] != "madvdontneed=1" {
		t.Errorf("extraEnv not applied: %v", p.ctr.Env)
	}
	if v := volume(t, p.pod, "scratch"); v.EmptyDir == nil || mountAt(t, p.ctr, "/scratch").Name != "scratch" {
		t.Errorf("extraVolumes/extraVolumeMounts not applied: %+v", v)
	}
	if p.ds.Spec.Template.Annotations["example.com/team"] != "platform" || p.ds.Spec.Template.Labels["example.com/tier"] != "node" {
		t.Errorf("pod annotations %v, labels %v", p.ds.Spec.Template.Annotations, p.ds.Spec.Template.Labels)
	}
}

func TestNetworkPolicy(t *testing.T) {
	for name, m := range map[string]*manifests{"deploy/": kustomize(t, deployDir), "the chart": chart(t, nil)} {
		p := pluginOf(t, m)
		np := only(t, "NetworkPolicy", m.networkPolicies)
		if !selects(np.Spec.PodSelector.MatchLabels, p.ds.Spec.Template.Labels) || np.Namespace != p.ds.Namespace {
			t.Errorf("%s: the NetworkPolicy does not select the plugin's pods: %+v", name, np.Spec.PodSelector)
		}
		if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Ingress" || len(np.Spec.Ingress) != 1 {
			t.Fatalf("%s: policy types %v, %d ingress rules; want one Ingress rule", name, np.Spec.PolicyTypes, len(np.Spec.Ingress))
		}
		// The metrics port from the monitoring namespace alone; the
		// health port from no pod (the node, i.e. the kubelet's probes, is
		// always admitted).
		rule := np.Spec.Ingress[0]
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.String() != "metrics" || *rule.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("%s: ingress ports %+v, want TCP to the metrics port alone", name, rule.Ports)
		}
		if len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil || rule.From[0].PodSelector != nil || rule.From[0].IPBlock != nil ||
			rule.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" || len(rule.From[0].NamespaceSelector.MatchLabels) != 1 {
			t.Errorf("%s: ingress from %+v, want the namespace monitoring alone", name, rule.From)
		}
	}
	m := chart(t, map[string]any{"networkPolicy": map[string]any{"from": []any{
		map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "prometheus"}}},
	}}})
	if from := only(t, "NetworkPolicy", m.networkPolicies).Spec.Ingress[0].From; len(from) != 1 || from[0].NamespaceSelector == nil ||
		from[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "prometheus" {
		t.Errorf("networkPolicy.from not applied: %+v", from)
	}
	// The documented opt-out: [] admits scrapes from any source.
	if from := only(t, "NetworkPolicy", chart(t, map[string]any{"networkPolicy": map[string]any{"from": []any{}}}).networkPolicies).Spec.Ingress[0].From; len(from) != 0 {
		t.Errorf("networkPolicy.from [] still restricts the sources: %+v", from)
	}
	if m := chart(t, map[string]any{"config": map[string]any{"metricsAddress": ""}}); len(only(t, "NetworkPolicy", m.networkPolicies).Spec.Ingress) != 0 {
		t.Errorf("metrics off, yet the NetworkPolicy admits something")
	}
	if m := chart(t, map[string]any{"networkPolicy": map[string]any{"enabled": false}}); len(m.networkPolicies) != 0 {
		t.Errorf("networkPolicy.enabled false renders %d NetworkPolicies", len(m.networkPolicies))
	}
}

// TestHostFiles: the default install (deploy/ and the chart) mounts the
// host files the node's checks read — the kubelet's configuration file
// and drop-in directory, containerd's config.toml and conf.d — each
// read-only where it is on the host and allowed to be missing (created
// empty, FileOrCreate or DirectoryOrCreate), so that a node without it
// still starts the pod; k3s's and RKE2's from the chart's
// doctor.distribution and components/k3s and components/rke2 alike; none
// with doctor.enabled false and components/without-host-files;
// components/doctor, kept for overlays that list it, adds nothing.
func TestHostFiles(t *testing.T) {
	base := kustomize(t, deployDir)
	for _, tc := range []struct {
		name      string
		chart     map[string]any
		component string
		want      []string // host paths; directories end in .d
	}{
		{"kubeadm-style, the default", nil, "",
			[]string{"/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet.conf.d", "/etc/containerd/config.toml", "/etc/containerd/conf.d"}},
		{"k3s", map[string]any{"distribution": "k3s"}, "k3s",
			[]string{"/etc/rancher/k3s/config.yaml", "/etc/rancher/k3s/config.yaml.d", "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"}},
		{"RKE2", map[string]any{"distribution": "rke2"}, "rke2",
			[]string{"/etc/rancher/rke2/config.yaml", "/etc/rancher/rke2/config.yaml.d", "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d", "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"}},
		{"none", map[string]any{"enabled": false}, "without-host-files", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{"doctor": tc.chart}
			if tc.chart == nil {
				values = nil // doctor: null would drop the defaults
			}
			c := pluginOf(t, chart(t, values))
			k := pluginOf(t, base)
			if tc.component != "" {
				k = pluginOf(t, kustomizeOverlay(t, filepath.Join(deployDir, "components", tc.component)))
			}
			for name, p := range map[string]*deployed{"the chart": c, "deploy/": k} {
				checkSafe(t, p)
				var got []string
				for mp, m := range hostMounts(t, p) {
					if !under(mp, hostRoot) {
						continue
					}
					got = append(got, m.hostPath)
					dir := strings.HasSuffix(m.hostPath, ".d")
					if want := map[bool]corev1.HostPathType{false: corev1.HostPathFileOrCreate, true: corev1.HostPathDirectoryOrCreate}[dir]; m.hostType != want {
						t.Errorf("%s: %s is of type %s, want %s: a node without it must start the pod", name, m.hostPath, m.hostType, want)
					}
				}
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tc.want))
				if !slices.Equal(got, want) {
					t.Errorf("%s mounts %q under %s, want %q", name, got, hostRoot, want)
				}
			}
			cm, km := hostMounts(t, c), hostMounts(t, k)
			for _, h := range tc.want {
				sameObject(t, "the chart's and deploy/'s mount of "+h, cm[hostRoot+h].mount, km[hostRoot+h].mount)
			}
		})
	}
	sameObject(t, "deploy/ with components/doctor and without", pluginOf(t, kustomizeOverlay(t, filepath.Join(deployDir, "components", "doctor"))).ds.Spec, pluginOf(t, base).ds.Spec)
	// Another distribution's kubelet file, where it is on the host.
	eks := hostMounts(t, pluginOf(t, chart(t, map[string]any{"doctor": map[string]any{"kubeletConfig": "/etc/kubernetes/kubelet/config.json"}})))
	if m, ok := eks[hostRoot+"/etc/kubernetes/kubelet/config.json"]; !ok || m.hostPath != "/etc/kubernetes/kubelet/config.json" {
		t.Errorf("doctor.kubeletConfig /etc/kubernetes/kubelet/config.json: mounts %v", eks)
	}
	if _, ok := eks[hostRoot+"/var/lib/kubelet/config.yaml"]; ok {
		t.Errorf("doctor.kubeletConfig elsewhere still mounts /var/lib/kubelet/config.yaml")
	}
}

// TestAdjustmentValidator: components/adjustment-validator and the
// chart's adjustmentValidator add the validating NRI plugin's container
// (checkGuard), the same from both; the chart's two options become its
// flags; without them, the pod has the plugin's container alone.
func TestAdjustmentValidator(t *testing.T) {
	k := pluginOf(t, kustomizeOverlay(t, filepath.Join(deployDir, "components", "adjustment-validator")))
	c := pluginOf(t, chart(t, map[string]any{"adjustmentValidator": map[string]any{"enabled": true}}))
	for name, p := range map[string]*deployed{"components/adjustment-validator": k, "the chart": c} {
		if p.guard == nil {
			t.Fatalf("%s: no %s container", name, guardName)
		}
		checkSafe(t, p)
	}
	sameObject(t, "the chart's and components/adjustment-validator's container", *c.guard, *k.guard)
	both := pluginOf(t, chart(t, map[string]any{"adjustmentValidator": map[string]any{"enabled": true, "allPlugins": true, "allowUnattributedRemovals": true}}))
	checkSafe(t, both)
	if got := both.guard.Args[3:]; !slices.Equal(got, guardFlags) {
		t.Errorf("allPlugins and allowUnattributedRemovals: flags %q, want %q", got, guardFlags)
	}
	for name, m := range map[string]*manifests{"deploy/": kustomize(t, deployDir), "the chart": chart(t, nil)} {
		if p := pluginOf(t, m); p.guard != nil {
			t.Errorf("%s runs %s without the opt-in", name, guardName)
		}
	}
}
