package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

// The plugin's access to the API, the whole of it: the pod watch, the
// events and its Node's group label; the NodeResourceTopology export adds
// its own object's verbs.
var (
	baseRules = []string{
		"/pods: list watch",
		"events.k8s.io/events: create patch",
		"/nodes: get watch",
	}
	topologyRules = []string{
		"/nodes: get",
		"topology.node.k8s.io/noderesourcetopologies: delete get update create",
	}
)

// grants lists what the roles bound to the plugin's service account allow,
// one "group/resource: verbs" line per rule, sorted; it fails the test on
// a binding to anyone else, to a role not rendered, or with a name.
func grants(t *testing.T, m *manifests, sa string) []string {
	t.Helper()
	roles := map[string]*rbacv1.ClusterRole{}
	for _, r := range m.clusterRoles {
		roles[r.Name] = r
	}
	var out []string
	for _, b := range m.roleBindings {
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa || b.Subjects[0].Namespace != releaseNamespace {
			t.Errorf("ClusterRoleBinding %s binds %+v, want only the plugin's service account %s/%s", b.Name, b.Subjects, releaseNamespace, sa)
		}
		r, ok := roles[b.RoleRef.Name]
		if !ok || b.RoleRef.Kind != "ClusterRole" {
			t.Errorf("ClusterRoleBinding %s refers to %+v, not a ClusterRole rendered with it", b.Name, b.RoleRef)
			continue
		}
		for _, rule := range r.Rules {
			if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
				t.Errorf("ClusterRole %s: rule %+v", r.Name, rule)
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					verbs := slices.Clone(rule.Verbs)
					sort.Strings(verbs)
					out = append(out, g+"/"+res+": "+strings.Join(verbs, " "))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func wantGrants(sets ...[]string) []string {
	var out []string
	for _, s := range sets {
		for _, r := range s {
			g, v, _ := strings.Cut(r, ": ")
			verbs := strings.Fields(v)
			sort.Strings(verbs)
			out = append(out, g+": "+strings.Join(verbs, " "))
		}
	}
	sort.Strings(out)
	return out
}

// TestRBACIsLeastPrivilege: deploy/ and the chart give the plugin's own
// service account exactly the pod watch and the events, and the
// NodeResourceTopology export exactly its object's verbs, in each of the
// kustomize component and the chart's option; the DaemonSet runs as that
// account. Never secrets, never a write to pods or nodes. The CRD comes
// only where asked for: its own component, the chart's value.
func TestRBACIsLeastPrivilege(t *testing.T) {
	export := map[string]any{"config": map[string]any{"nodeResourceTopology": map[string]any{"enabled": true}}}
	for _, tt := range []struct {
		name        string
		m           *manifests
		want        []string
		export, crd bool
	}{
		{"deploy/", kustomize(t, deployDir), wantGrants(baseRules), false, false},
		{"deploy/ + components/noderesourcetopology", kustomizeOverlay(t, components.nodeResourceTopology), wantGrants(baseRules, topologyRules), true, false},
		{"deploy/ + components/noderesourcetopology and its CRD", kustomizeOverlay(t, components.nodeResourceTopology, components.nodeResourceTopologyCRD),
			wantGrants(baseRules, topologyRules), true, true},
		{"the chart", chart(t, nil), wantGrants(baseRules), false, false},
		{"the chart with the export", chart(t, export), wantGrants(baseRules, topologyRules), true, true},
		{"the chart with the export, CRD elsewhere", chart(t, map[string]any{"installNodeResourceTopologyCRD": false, "config": export["config"]}),
			wantGrants(baseRules, topologyRules), true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := pluginOf(t, tt.m)
			checkSafe(t, p)
			sa := only(t, "ServiceAccount", tt.m.serviceAccounts)
			if p.pod.ServiceAccountName != sa.Name || sa.Namespace != p.ds.Namespace {
				t.Errorf("the DaemonSet runs as %q, the service account is %s/%s", p.pod.ServiceAccountName, sa.Namespace, sa.Name)
			}
			if got := grants(t, tt.m, sa.Name); !slices.Equal(got, tt.want) {
				t.Errorf("grants\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if got := len(tt.m.crds) == 1 && tt.m.crds[0].Name == "noderesourcetopologies.topology.node.k8s.io"; got != tt.crd || len(tt.m.crds) > 1 {
				t.Errorf("NodeResourceTopology CRD rendered: %v, want %v (%d CRDs)", got, tt.crd, len(tt.m.crds))
			}
			checkTopologyPolicy(t, tt.m, tt.export)
			// The CRD is shared with other tools: helm uninstall must not
			// delete it, and every tool's objects with it.
			for _, crd := range tt.m.crds {
				if crd.Annotations["helm.sh/resource-policy"] != "keep" && strings.HasPrefix(tt.name, "the chart") {
					t.Errorf("the chart's CRD %s has no helm.sh/resource-policy: keep", crd.Name)
				}
			}
			if p.cfg.NodeResourceTopology.Enabled != tt.export {
				t.Errorf("nodeResourceTopology.enabled %v", p.cfg.NodeResourceTopology.Enabled)
			}
			var nodeName bool
			for _, e := range p.ctr.Env {
				if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
					nodeName = true
				}
			}
			if !nodeName {
				t.Error("no NODE_NAME from spec.nodeName: the plugin would watch the pods of its host name")
			}
		})
	}
	// The chart's RBAC is deploy/'s.
	k, c := kustomize(t, deployDir), chart(t, nil)
	for i := range k.clusterRoles {
		sameObject(t, "the chart's and deploy/'s ClusterRoles", normalized(c.clusterRoles[i]), normalized(k.clusterRoles[i]))
	}
}

// TestWithoutTheAPI: kubernetesAPI false in the chart renders no account,
// no RBAC and no token.
func TestWithoutTheAPI(t *testing.T) {
	m := chart(t, map[string]any{"config": map[string]any{"kubernetesAPI": false}})
	if got := m.kinds(); got != "ConfigMap DaemonSet NetworkPolicy" {
		t.Errorf("the chart without the API renders %q", got)
	}
	p := pluginOf(t, m)
	checkSafe(t, p)
	if _, err := renderChart(loadChart(t), releaseName, map[string]any{"config": map[string]any{"kubernetesAPI": false,
		"nodeResourceTopology": map[string]any{"enabled": true}}}); err == nil || !strings.Contains(err.Error(), "needs config.kubernetesAPI") {
		t.Errorf("the export without the API: %v", err)
	}
}

// checkTopologyPolicy checks the ValidatingAdmissionPolicy that lets the
// plugin's service account write only its own node's NodeResourceTopology
// object: rendered with the export (want), bound with Deny, its parameter
// the service account the DaemonSet of m runs as (whatever names and
// namespace the rendering gave it), and its CEL run by the API server's
// own evaluator on that account's requests (checkTopologyPolicyDecisions).
func checkTopologyPolicy(t *testing.T, m *manifests, want bool) {
	t.Helper()
	if !want {
		if len(m.policies)+len(m.policyBindings) != 0 {
			t.Errorf("%d ValidatingAdmissionPolicies and %d bindings without the export", len(m.policies), len(m.policyBindings))
		}
		return
	}
	p := only(t, "ValidatingAdmissionPolicy", m.policies)
	b := only(t, "ValidatingAdmissionPolicyBinding", m.policyBindings)
	if b.Spec.PolicyName != p.Name || len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != "Deny" {
		t.Errorf("binding %+v of policy %s: want Deny", b.Spec, p.Name)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != "Fail" {
		t.Errorf("failurePolicy %v, want Fail", p.Spec.FailurePolicy)
	}
	rules := p.Spec.MatchConstraints.ResourceRules
	var ops []string
	if len(rules) == 1 {
		for _, op := range rules[0].Operations {
			ops = append(ops, string(op))
		}
		sort.Strings(ops)
	}
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, []string{"noderesourcetopologies"}) ||
		!slices.Equal(rules[0].APIGroups, []string{"topology.node.k8s.io"}) || !slices.Equal(ops, []string{"CREATE", "DELETE", "UPDATE"}) {
		t.Errorf("match constraints %+v, want create, update and delete of noderesourcetopologies", rules)
	}
	// The parameter is the account the plugin's pods run as: a namePrefix
	// or namespace of an overlay, a release's name, moves both.
	if pk := p.Spec.ParamKind; pk == nil || pk.APIVersion != "v1" || pk.Kind != "ServiceAccount" {
		t.Fatalf("paramKind %+v, want the plugin's ServiceAccount", pk)
	}
	ds := only(t, "DaemonSet", m.daemonSets)
	if ref := b.Spec.ParamRef; ref == nil || ref.Name != ds.Spec.Template.Spec.ServiceAccountName || ref.Namespace != ds.Namespace {
		t.Fatalf("paramRef %+v, want the plugin's service account %s/%s", ref, ds.Namespace, ds.Spec.Template.Spec.ServiceAccountName)
	}
	// No account, no valid token of it: a policy without its parameter
	// must not deny every other tool's writes.
	if a := b.Spec.ParamRef.ParameterNotFoundAction; a == nil || *a != admissionregistrationv1.AllowAction {
		t.Errorf("parameterNotFoundAction %v, want Allow", a)
	}
	checkTopologyPolicyDecisions(t, p, paramOf(t, b, m.serviceAccounts), "system:serviceaccount:"+ds.Namespace+":"+ds.Spec.Template.Spec.ServiceAccountName)
}

// baseUser is the plugin's user as deploy/ names its account, before any
// overlay.
const baseUser = "system:serviceaccount:nri-cpumanager:nri-cpumanager"

// checkTopologyPolicyDecisions runs the policy, with the API server's CEL
// and param the binding's parameter, on requests: the plugin's service
// account (user) may create, update and delete the object named after
// the node its token is bound to, and no other; another account's
// requests, the account deploy/ names before an overlay renames it
// included, are not the policy's to judge. An expression that fails to
// evaluate denies (failurePolicy Fail).
func checkTopologyPolicyDecisions(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, param runtime.Object, user string) {
	t.Helper()
	policy := compilePolicy(t, p)
	boundTo := func(node string) map[string][]string {
		return map[string][]string{"authentication.kubernetes.io/node-name": {node}, "authentication.kubernetes.io/pod-name": {"nri-cpumanager-x7k2p"}}
	}
	type testCase struct {
		name, user, object string
		extra              map[string][]string
		judged, allowed    bool
	}
	cases := []testCase{
		{"the plugin writes its node's object", user, "node-a", boundTo("node-a"), true, true},
		{"the plugin writes another node's object", user, "node-b", boundTo("node-a"), true, false},
		{"the plugin with a token bound to no node", user, "node-a", nil, true, false},
		{"another account of the same namespace", user + "-other", "node-b", boundTo("node-a"), false, true},
		{"node-feature-discovery's topology updater", "system:serviceaccount:node-feature-discovery:nfd-topology-updater", "node-b", boundTo("node-a"), false, true},
		{"an administrator", "kubernetes-admin", "node-b", nil, false, true},
	}
	if user != baseUser {
		cases = append(cases, testCase{"the account as deploy/ names it before the overlay", baseUser, "node-b", boundTo("node-a"), false, true})
	}
	for _, tc := range cases {
		for _, op := range []admission.Operation{admission.Create, admission.Update, admission.Delete} {
			d := policy.decide(t, admissionRequest{
				gvk:      schema.GroupVersionKind{Group: "topology.node.k8s.io", Version: "v1alpha2", Kind: "NodeResourceTopology"},
				resource: "noderesourcetopologies", operation: op, name: tc.object, user: tc.user, extra: tc.extra,
			}, param)
			if d.judged != tc.judged || d.judged && d.denied == tc.allowed {
				t.Errorf("%s (%s %s as %s): judged %v, denied %v (%s); want judged %v, allowed %v",
					tc.name, op, tc.object, tc.user, d.judged, d.denied, d.message, tc.judged, tc.allowed)
			}
			if d.denied && !strings.Contains(d.message, "not "+tc.object) {
				t.Errorf("%s: message %q, want it to name the object %s", tc.name, d.message, tc.object)
			}
		}
	}
}

// TestTopologyPolicyFollowsTheOverlay renders the NodeResourceTopology
// export under a namePrefix and another namespace, in the overlay that
// adds the component and in an overlay of that overlay (kustomize runs a
// component's transformers before its parent's, so only a reference it
// knows, not a string, follows a rename made above it), and the chart as
// another release in another namespace; in each, the policy judges the
// renamed account's requests, with the API server's CEL, and no longer
// the account deploy/ names (checkTopologyPolicy); the role is bound to
// that account, the CRD keeps its name.
func TestTopologyPolicyFollowsTheOverlay(t *testing.T) {
	ch := loadChart(t)
	blue, err := render(ch, "blue", "other", map[string]any{"config": map[string]any{"nodeResourceTopology": map[string]any{"enabled": true}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		m          *manifests
		wantSA, ns string
	}{
		{"namePrefix and namespace in the overlay", kustomizeLayers(t, "namePrefix: blue-\nnamespace: other\n", ""),
			"blue-nri-cpumanager", "other"},
		{"namePrefix, nameSuffix and namespace above it", kustomizeLayers(t, "", "namePrefix: green-\nnameSuffix: -x\nnamespace: elsewhere\n"),
			"green-nri-cpumanager-x", "elsewhere"},
		{"the chart as release blue in namespace other", blue, "blue-nri-cpumanager", "other"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := pluginOf(t, tt.m)
			if p.pod.ServiceAccountName != tt.wantSA || p.ds.Namespace != tt.ns {
				t.Fatalf("the DaemonSet runs as %s/%s, want %s/%s", p.ds.Namespace, p.pod.ServiceAccountName, tt.ns, tt.wantSA)
			}
			for _, b := range tt.m.roleBindings {
				if len(b.Subjects) != 1 || b.Subjects[0].Name != tt.wantSA || b.Subjects[0].Namespace != tt.ns {
					t.Errorf("ClusterRoleBinding %s binds %+v, want %s/%s", b.Name, b.Subjects, tt.ns, tt.wantSA)
				}
			}
			for _, crd := range tt.m.crds {
				if crd.Name != "noderesourcetopologies.topology.node.k8s.io" {
					t.Errorf("the CRD is named %s", crd.Name)
				}
			}
			checkTopologyPolicy(t, tt.m, true)
		})
	}
}

// kustomizeLayers renders deploy/ with the NodeResourceTopology component
// and its CRD through an overlay ending in middle, and an overlay of that
// one ending in top (none when top is empty).
func kustomizeLayers(t *testing.T, middle, top string) *manifests {
	t.Helper()
	root := t.TempDir()
	write := func(dir, text string) string {
		d := filepath.Join(root, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kustomization.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	rel := func(from, p string) string {
		abs, err := filepath.Abs(p)
		if err == nil {
			p, err = filepath.Rel(from, abs)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mid := filepath.Join(root, "middle")
	dir := write("middle", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- "+rel(mid, deployDir)+
		"\ncomponents:\n- "+rel(mid, components.nodeResourceTopology)+"\n- "+rel(mid, components.nodeResourceTopologyCRD)+"\n"+middle)
	if top != "" {
		dir = write("top", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../middle\n"+top)
	}
	return kustomize(t, dir)
}
