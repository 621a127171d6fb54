package deploy

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/cpuset"
	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// shippedDefaults is the configuration deploy/ and the chart ship: the
// plugin's defaults exactly (the kubelet's wherever it has one), so that a
// configuration file written from the docs, which names only the keys it
// changes, keeps every other choice of deploy/.
func shippedDefaults() *config.Config {
	return config.Default()
}

// sameConfig fails the test when got and want differ, naming the keys.
func sameConfig(t *testing.T, what string, got, want *config.Config) {
	t.Helper()
	g, err := got.YAML()
	if err != nil {
		t.Fatal(err)
	}
	w, err := want.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s: the configuration differs from the expected one\n%s", what, lineDiff(string(w), string(g)))
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := in(want), in(got)
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if g[l] == 0 {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if w[l] == 0 {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// sameObject fails the test unless got and want are semantically equal.
func sameObject(t *testing.T, what string, got, want any) {
	t.Helper()
	if equality.Semantic.DeepEqual(got, want) {
		return
	}
	g, _ := yaml.Marshal(got)
	w, _ := yaml.Marshal(want)
	t.Errorf("%s differ (- want, + got):\n%s", what, lineDiff(string(w), string(g)))
}

func TestKustomizeBaseIsSafeAndShipsTheDefaults(t *testing.T) {
	m := kustomize(t, deployDir)
	p := pluginOf(t, m)
	checkSafe(t, p)
	if got := m.kinds(); got != "ClusterRole ClusterRoleBinding ConfigMap DaemonSet Namespace NetworkPolicy ServiceAccount" {
		t.Fatalf("deploy/ renders %q, want a Namespace, a ConfigMap, a DaemonSet and a NetworkPolicy", got)
	}
	if p.pod.PriorityClassName != "" {
		t.Errorf("priorityClassName %q outside kube-system: refused where the critical classes are limited (components/node-critical sets it)", p.pod.PriorityClassName)
	}
	sameConfig(t, "deploy/configmap.yaml", p.cfg, shippedDefaults())
	checkWedgeRestart(t, p)

	ns := only(t, "Namespace", m.namespaces)
	if ns.Name != p.ds.Namespace || ns.Name != p.cm.Namespace {
		t.Errorf("namespace %s, DaemonSet in %s, ConfigMap in %s", ns.Name, p.ds.Namespace, p.cm.Namespace)
	}
	// hostPath volumes are forbidden below Pod Security's privileged level.
	if lvl := ns.Labels["pod-security.kubernetes.io/enforce"]; lvl != "privileged" {
		t.Errorf("namespace enforces Pod Security level %q; the plugin's hostPath volumes need privileged", lvl)
	}
	for _, v := range p.pod.Volumes {
		if v.HostPath == nil {
			continue
		}
		if _, checked := hostFiles[v.HostPath.Path]; strings.Contains(v.HostPath.Path, "kubelet") && !checked {
			t.Errorf("volume %s mounts %s: of the kubelet's files, only its configuration is read by default; its checkpoint is opt-in (components/kubelet-checkpoint)", v.Name, v.HostPath.Path)
		}
	}
}

func TestKustomizeKubeletCheckpointComponent(t *testing.T) {
	base := pluginOf(t, kustomize(t, deployDir))
	p := pluginOf(t, kustomizeOverlay(t, components.kubeletCheckpoint))
	checkSafe(t, p)
	if p.cfg.KubeletCheckpoint != config.KubeletCheckpointPath {
		t.Errorf("with the component, kubeletCheckpoint is %q, want %q", p.cfg.KubeletCheckpoint, config.KubeletCheckpointPath)
	}
	m, ok := hostMounts(t, p)[config.KubeletCheckpointPath]
	if !ok || m.hostType != corev1.HostPathFile || !m.mount.ReadOnly {
		t.Errorf("the kubelet checkpoint mount %+v: want %s read-only from a hostPath of type File", m, config.KubeletCheckpointPath)
	}
	// Everything else as without the component.
	want := shippedDefaults()
	want.KubeletCheckpoint = config.KubeletCheckpointPath
	sameConfig(t, "base + kubelet-checkpoint", p.cfg, want)
	if len(p.pod.Volumes) != len(base.pod.Volumes)+1 || len(p.ctr.VolumeMounts) != len(base.ctr.VolumeMounts)+1 {
		t.Errorf("the component should add one volume and one mount: %d → %d volumes, %d → %d mounts",
			len(base.pod.Volumes), len(p.pod.Volumes), len(base.ctr.VolumeMounts), len(p.ctr.VolumeMounts))
	}
}

func TestKustomizePrometheusComponent(t *testing.T) {
	m := kustomizeOverlay(t, components.prometheus)
	if got := m.kinds(); got != "ClusterRole ClusterRoleBinding ConfigMap DaemonSet Namespace NetworkPolicy PrometheusRule Service ServiceAccount ServiceMonitor" {
		t.Fatalf("deploy/ with components/prometheus renders %q", got)
	}
	p := pluginOf(t, m)
	checkSafe(t, p)
	checkScraping(t, p, only(t, "Service", m.services), only(t, "ServiceMonitor", m.serviceMonitors))
	rule := only(t, "PrometheusRule", m.prometheusRules)
	if rule.Namespace != p.ds.Namespace {
		t.Errorf("PrometheusRule in %s, the plugin in %s", rule.Namespace, p.ds.Namespace)
	}
}

// TestKustomizeNodeCriticalComponent: the priority class, and a quota in
// the plugin's namespace that admits exactly that class.
func TestKustomizeNodeCriticalComponent(t *testing.T) {
	m := kustomizeOverlay(t, filepath.Join(deployDir, "components", "node-critical"))
	p := pluginOf(t, m)
	checkSafe(t, p)
	q := only(t, "ResourceQuota", m.resourceQuotas)
	if p.pod.PriorityClassName != "system-node-critical" || q.Namespace != p.ds.Namespace || q.Spec.ScopeSelector == nil ||
		len(q.Spec.ScopeSelector.MatchExpressions) != 1 ||
		q.Spec.ScopeSelector.MatchExpressions[0].ScopeName != corev1.ResourceQuotaScopePriorityClass ||
		len(q.Spec.ScopeSelector.MatchExpressions[0].Values) != 1 || q.Spec.ScopeSelector.MatchExpressions[0].Values[0] != p.pod.PriorityClassName {
		t.Errorf("priority class %q, quota in %s %+v: want system-node-critical admitted in %s", p.pod.PriorityClassName, q.Namespace, q.Spec, p.ds.Namespace)
	}
	checkLabels(t, m, false)
}

// checkScraping checks that the Service selects the plugin's pods on its
// metrics port and the ServiceMonitor selects the Service.
func checkScraping(t *testing.T, p *deployed, svc *corev1.Service, sm *monitoringv1.ServiceMonitor) {
	t.Helper()
	if svc.Namespace != p.ds.Namespace || sm.Namespace != p.ds.Namespace {
		t.Errorf("Service in %s, ServiceMonitor in %s, the plugin in %s", svc.Namespace, sm.Namespace, p.ds.Namespace)
	}
	if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) || len(sm.Spec.Selector.MatchExpressions) > 0 {
		t.Errorf("ServiceMonitor selector %+v does not select the Service's labels %v", sm.Spec.Selector, svc.Labels)
	}
	ep := only(t, "ServiceMonitor endpoint", sm.Spec.Endpoints)
	if ep.Port != "metrics" || ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoint port %v path %q, want metrics /metrics", ep.Port, ep.Path)
	}
	if !selects(svc.Spec.Selector, p.ds.Spec.Template.Labels) {
		t.Errorf("Service selector %v does not select the plugin's pods %v", svc.Spec.Selector, p.ds.Spec.Template.Labels)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP %q, want None (Prometheus scrapes each pod)", svc.Spec.ClusterIP)
	}
	port := only(t, "Service port", svc.Spec.Ports)
	if port.Name != "metrics" || port.TargetPort.String() != "metrics" || port.Port != p.ctr.Ports[0].ContainerPort {
		t.Errorf("Service port %+v, want metrics → the container's metrics port %d", port, p.ctr.Ports[0].ContainerPort)
	}
}

// TestKustomizeExampleOverlay renders the overlay docs/install.md shows:
// an own config.yaml, a mirrored image, both components, and a label for
// Prometheus.
func TestKustomizeExampleOverlay(t *testing.T) {
	m := kustomize(t, filepath.Join("testdata", "low-latency"))
	p := pluginOf(t, m)
	checkSafe(t, p)
	want := shippedDefaults()
	want.ReservedSystemCPUs = cpuset.New(0, 32)
	want.CPUManagerPolicyOptions.FullPCPUsOnly = true
	want.TopologyManagerPolicy = cpuallocator.TopologySingleNUMANode
	want.KubeletCheckpoint = config.KubeletCheckpointPath
	sameConfig(t, "the example overlay", p.cfg, want)
	if p.ctr.Image != "registry.example.com/mirror/nri-cpumanager:v0.1.0" {
		t.Errorf("image %s, want the mirror's", p.ctr.Image)
	}
	sm := only(t, "ServiceMonitor", m.serviceMonitors)
	rule := only(t, "PrometheusRule", m.prometheusRules)
	if sm.Labels["release"] != "monitoring" || rule.Labels["release"] != "monitoring" {
		t.Errorf("the release label is missing: ServiceMonitor %v, PrometheusRule %v", sm.Labels, rule.Labels)
	}
	checkScraping(t, p, only(t, "Service", m.services), sm)
}
