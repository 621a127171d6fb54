package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Paths of what is tested, from this module's directory.
var (
	deployDir  = filepath.Join("..", "..", "deploy")
	chartDir   = filepath.Join(deployDir, "helm", "nri-cpumanager")
	components = struct {
		kubeletCheckpoint, prometheus, nodeResourceTopology, nodeResourceTopologyCRD string
	}{
		filepath.Join(deployDir, "components", "kubelet-checkpoint"),
		filepath.Join(deployDir, "components", "prometheus"),
		filepath.Join(deployDir, "components", "noderesourcetopology"),
		filepath.Join(deployDir, "components", "noderesourcetopology-crd"),
	}
)

// The release the chart's defaults are compared under: installed as
// docs/install.md says, it names its objects as deploy/ does.
const (
	releaseName      = "nri-cpumanager"
	releaseNamespace = "nri-cpumanager"
)

// manifests are the decoded objects of one rendering, by kind.
type manifests struct {
	namespaces      []*corev1.Namespace
	configMaps      []*corev1.ConfigMap
	daemonSets      []*appsv1.DaemonSet
	services        []*corev1.Service
	serviceMonitors []*monitoringv1.ServiceMonitor
	prometheusRules []*monitoringv1.PrometheusRule
	networkPolicies []*networkingv1.NetworkPolicy
	resourceQuotas  []*corev1.ResourceQuota
	serviceAccounts []*corev1.ServiceAccount
	clusterRoles    []*rbacv1.ClusterRole
	roleBindings    []*rbacv1.ClusterRoleBinding
	crds            []*apiextensionsv1.CustomResourceDefinition
	policies        []*admissionregistrationv1.ValidatingAdmissionPolicy
	policyBindings  []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// kinds lists the kinds present, e.g. "ConfigMap DaemonSet".
func (m *manifests) kinds() string {
	var out []string
	add := func(kind string, n int) {
		for range n {
			out = append(out, kind)
		}
	}
	add("ClusterRole", len(m.clusterRoles))
	add("ClusterRoleBinding", len(m.roleBindings))
	add("CustomResourceDefinition", len(m.crds))
	add("ServiceAccount", len(m.serviceAccounts))
	add("ConfigMap", len(m.configMaps))
	add("DaemonSet", len(m.daemonSets))
	add("Namespace", len(m.namespaces))
	add("NetworkPolicy", len(m.networkPolicies))
	add("PrometheusRule", len(m.prometheusRules))
	add("ResourceQuota", len(m.resourceQuotas))
	add("Service", len(m.services))
	add("ServiceMonitor", len(m.serviceMonitors))
	add("ValidatingAdmissionPolicy", len(m.policies))
	add("ValidatingAdmissionPolicyBinding", len(m.policyBindings))
	sort.Strings(out)
	return strings.Join(out, " ")
}

// only returns the one element of list, failing the test if there is not
// exactly one.
func only[T any](t *testing.T, what string, list []T) T {
	t.Helper()
	if len(list) != 1 {
		t.Fatalf("want exactly one %s, got %d", what, len(list))
	}
	return list[0]
}

// decodeStrict decodes one YAML document into obj, refusing unknown
// fields, fields in the wrong case and duplicate fields: a misspelt field
// in a manifest fails here instead of being dropped by the API server.
func decodeStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := json.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// decodeAll splits a YAML stream and decodes each object into its typed
// struct by apiVersion and kind. A kind the packaging is not expected to
// ship is an error.
func decodeAll(stream []byte) (*manifests, error) {
	m := &manifests{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "v1 Namespace":
			obj = into(&m.namespaces)
		case "v1 ConfigMap":
			obj = into(&m.configMaps)
		case "apps/v1 DaemonSet":
			obj = into(&m.daemonSets)
		case "v1 Service":
			obj = into(&m.services)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			obj = into(&m.serviceMonitors)
		case "monitoring.coreos.com/v1 PrometheusRule":
			obj = into(&m.prometheusRules)
		case "networking.k8s.io/v1 NetworkPolicy":
			obj = into(&m.networkPolicies)
		case "v1 ResourceQuota":
			obj = into(&m.resourceQuotas)
		case "v1 ServiceAccount":
			obj = into(&m.serviceAccounts)
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			obj = into(&m.clusterRoles)
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			obj = into(&m.roleBindings)
		case "apiextensions.k8s.io/v1 CustomResourceDefinition":
			obj = into(&m.crds)
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
			obj = into(&m.policies)
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
			obj = into(&m.policyBindings)
		default:
			return nil, fmt.Errorf("document %d: unexpected object %s %s", i, head.APIVersion, head.Kind)
		}
		if err := decodeStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, head.Kind, err)
		}
	}
}

// stripComments drops comment-only lines, so a document holding nothing
// but a comment counts as empty.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// kustomize renders a kustomization directory as kubectl kustomize does.
func kustomize(t *testing.T, dir string) *manifests {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeAll(out)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	return m
}

// kustomizeOverlay renders deploy/ with the given components, through an
// overlay such as an operator writes (kustomize takes relative paths only).
func kustomizeOverlay(t *testing.T, comps ...string) *manifests {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		abs, err := filepath.Abs(p)
		if err == nil {
			p, err = filepath.Rel(dir, abs)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + rel(deployDir) + "\ncomponents:\n"
	for _, c := range comps {
		k += "- " + rel(c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomize(t, dir)
}

// loadChart loads the chart directory as helm install does.
func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return ch
}

// renderChart renders the chart with values over its defaults, validated
// against values.schema.json, as helm template does; release is the
// release name.
func renderChart(ch *chartv2.Chart, release string, values map[string]any) (*manifests, error) {
	return render(ch, release, releaseNamespace, values)
}

// renderChartIn renders the chart as release nri-cpumanager in namespace.
func renderChartIn(ch *chartv2.Chart, namespace string, values map[string]any) (*manifests, error) {
	return render(ch, releaseName, namespace, values)
}

func render(ch *chartv2.Chart, release, namespace string, values map[string]any) (*manifests, error) {
	vals, err := chartutil.ToRenderValues(ch, values, common.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var stream bytes.Buffer
	for _, name := range names {
		fmt.Fprintf(&stream, "---\n# Source: %s\n%s\n", name, files[name])
	}
	return decodeAll(stream.Bytes())
}

// chart renders the chart with values, failing the test on any error.
func chart(t *testing.T, values map[string]any) *manifests {
	t.Helper()
	m, err := renderChart(loadChart(t), releaseName, values)
	if err != nil {
		t.Fatalf("rendering the chart with %v: %v", values, err)
	}
	return m
}

// into appends a new zero object to list and returns it, to decode into.
func into[T any](list *[]*T) any {
	o := new(T)
	*list = append(*list, o)
	return o
}
