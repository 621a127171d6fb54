package deploy

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestExemptionPolicy checks deploy/examples/restrict-nri-exemption.yaml,
// the ValidatingAdmissionPolicy docs/operations.md gives to restrict the
// fail-closed exemption: decoded strictly, its CEL run on example pods
// (with cel-go, the language of the API server's policies, and the
// strings library it enables), and its binding's namespaces.
func TestExemptionPolicy(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "examples", "restrict-nri-exemption.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i, obj := range []any{&policy, &binding} {
		doc, err := r.Read()
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if err := decodeStrict(doc, obj); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
	}
	if _, err := r.Read(); err != io.EOF {
		t.Errorf("more than a policy and its binding: %v", err)
	}
	if binding.Spec.PolicyName != policy.Name || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionv1.Deny {
		t.Errorf("binding %+v does not deny with policy %s", binding.Spec, policy.Name)
	}
	if p := policy.Spec.FailurePolicy; p == nil || *p != admissionv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", p)
	}
	rules := policy.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || strings.Join(rules[0].Resources, ",") != "pods" || len(rules[0].Operations) != 2 {
		t.Errorf("match constraints %+v, want pods on CREATE and UPDATE", rules)
	}

	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)), ext.Strings())
	if err != nil {
		t.Fatal(err)
	}
	compile := func(expr string) cel.Program { return celProgram(t, env, expr) }
	if len(policy.Spec.Variables) != 1 || len(policy.Spec.Validations) != 1 {
		t.Fatalf("want one variable and one validation: %+v", policy.Spec)
	}
	exemptions := compile(policy.Spec.Variables[0].Expression)
	valid := compile(policy.Spec.Validations[0].Expression)
	message := compile(policy.Spec.Validations[0].MessageExpression)
	admit := func(annotations map[string]any) (bool, string) {
		meta := map[string]any{"name": "p", "namespace": "shop"}
		if annotations != nil {
			meta["annotations"] = annotations
		}
		object := map[string]any{"metadata": meta}
		ex, _, err := exemptions.Eval(map[string]any{"object": object, "variables": map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]any{"object": object, "variables": map[string]any{"exemptions": ex}}
		ok, _, err := valid.Eval(vars)
		if err != nil {
			t.Fatal(err)
		}
		if ok.Value().(bool) {
			return true, ""
		}
		msg, _, err := message.Eval(vars)
		if err != nil {
			t.Fatal(err)
		}
		return false, msg.Value().(string)
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]any
		ok          bool
	}{
		{"no annotations", nil, true},
		{"other annotations", map[string]any{"example.com/team": "shop"}, true},
		{"the exemption", map[string]any{tolerateMissing: "true"}, false},
		{"the exemption of one container", map[string]any{tolerateMissing + "/container.app": "true"}, false},
		{"the exemption set to false", map[string]any{tolerateMissing: "false"}, false},
	} {
		ok, msg := admit(tc.annotations)
		if ok != tc.ok {
			t.Errorf("%s: admitted %v, want %v (%s)", tc.name, ok, tc.ok, msg)
		}
		if !ok && (!strings.Contains(msg, "namespace shop") || !strings.Contains(msg, tolerateMissing)) {
			t.Errorf("%s: message %q does not name the namespace and the annotation", tc.name, msg)
		}
	}

	// The binding leaves the plugin's namespace (whose DaemonSet carries
	// the exemption) and kube-system out, and covers the others.
	sel, err := metav1.LabelSelectorAsSelector(binding.Spec.MatchResources.NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	plugin := pluginOf(t, kustomize(t, deployDir))
	for ns, covered := range map[string]bool{plugin.ds.Namespace: false, "kube-system": false, "default": true, "shop": true} {
		if got := sel.Matches(labels.Set{"kubernetes.io/metadata.name": ns}); got != covered {
			t.Errorf("namespace %s: covered %v, want %v", ns, got, covered)
		}
	}
}

// celProgram compiles a CEL expression of an admission policy in env.
func celProgram(t *testing.T, env *cel.Env, expr string) cel.Program {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%q: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	return prg
}
