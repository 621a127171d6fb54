package deploy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The plugin's access to the API, the whole of it: the pod watch and the
// events; the NodeResourceTopology export adds its own object's verbs.
var (
	baseRules = []string{
		"/pods: list watch",
		"events.k8s.io/events: create patch",
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
			checkTopologyPolicy(t, tt.m, tt.export, sa.Name)
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
// object: rendered with the export (want), bound with Deny, matching the
// service account of sa in the release's namespace, comparing the object's
// name with the node name of the pod-bound token.
func checkTopologyPolicy(t *testing.T, m *manifests, want bool, sa string) {
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
	user := "system:serviceaccount:" + releaseNamespace + ":" + sa
	if len(p.Spec.MatchConditions) != 1 || !strings.Contains(p.Spec.MatchConditions[0].Expression, "'"+user+"'") {
		t.Errorf("match conditions %+v, want the plugin's service account %s", p.Spec.MatchConditions, user)
	}
	if len(p.Spec.Validations) != 1 || !strings.Contains(p.Spec.Validations[0].Expression, "request.name == request.userInfo.extra['authentication.kubernetes.io/node-name'][0]") {
		t.Errorf("validations %+v, want the object's name compared with the token's node", p.Spec.Validations)
	}
	if len(p.Spec.MatchConditions) == 1 && len(p.Spec.Validations) == 1 {
		checkTopologyPolicyDecisions(t, p, user)
	}
}

// checkTopologyPolicyDecisions runs the policy's CEL (with cel-go, the
// language of the API server's policies) on requests: the plugin's
// service account (user) may write the object named after the node its
// token is bound to, and no other; another account's requests are not
// the policy's to judge. An expression that fails to evaluate denies
// (failurePolicy Fail).
func checkTopologyPolicyDecisions(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, user string) {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	compile := func(expr string) cel.Program { return celProgram(t, env, expr) }
	eval := func(prg cel.Program, request map[string]any) (any, error) {
		out, _, err := prg.Eval(map[string]any{"request": request})
		if err != nil {
			return nil, err
		}
		return out.Value(), nil
	}
	match := compile(p.Spec.MatchConditions[0].Expression)
	valid := compile(p.Spec.Validations[0].Expression)
	message := compile(p.Spec.Validations[0].MessageExpression)
	boundTo := func(node string) map[string]any {
		return map[string]any{"authentication.kubernetes.io/node-name": []any{node}}
	}
	for _, tc := range []struct {
		name, user, object string
		extra              map[string]any
		judged, allowed    bool
	}{
		{"the plugin writes its node's object", user, "node-a", boundTo("node-a"), true, true},
		{"the plugin writes another node's object", user, "node-b", boundTo("node-a"), true, false},
		{"the plugin with a token bound to no node", user, "node-a", map[string]any{}, true, false},
		{"another account of the same namespace", "system:serviceaccount:" + releaseNamespace + ":other", "node-b", boundTo("node-a"), false, true},
		{"node-feature-discovery's topology updater", "system:serviceaccount:node-feature-discovery:nfd-topology-updater", "node-b", boundTo("node-a"), false, true},
	} {
		request := map[string]any{"name": tc.object, "userInfo": map[string]any{"username": tc.user, "extra": tc.extra}}
		judged, err := eval(match, request)
		if err != nil || judged != tc.judged {
			t.Errorf("%s: the policy judges the request: %v (%v), want %v", tc.name, judged, err, tc.judged)
			continue
		}
		if !tc.judged {
			continue
		}
		ok, err := eval(valid, request)
		allowed := err == nil && ok == true
		if allowed != tc.allowed {
			t.Errorf("%s: allowed %v (%v, %v), want %v", tc.name, allowed, ok, err, tc.allowed)
		}
		if !allowed {
			if msg, err := eval(message, request); err != nil || !strings.Contains(fmt.Sprint(msg), "not "+tc.object) {
				t.Errorf("%s: message %q (%v), want it to name the object %s", tc.name, msg, err, tc.object)
			}
		}
	}
}
