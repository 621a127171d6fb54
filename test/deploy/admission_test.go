package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// admissionPolicy is a ValidatingAdmissionPolicy compiled and run with the
// API server's own CEL (k8s.io/apiserver of the suites' Kubernetes, its
// admission plugins' package: the same environment and libraries, the
// same variables request, object, oldObject, params and authorizer, the
// same evaluation and cost budget). What the admission plugin adds around
// it is mirrored in decide: match conditions first (an error fails the
// request under failurePolicy Fail), then every validation, its
// messageExpression for a denial. The plugin's own package
// (policy/validating) is not used: it brings client-go's informers, 400
// packages more for this module to build.
type admissionPolicy struct {
	spec                         admissionregistrationv1.ValidatingAdmissionPolicySpec
	match, validations, messages plugincel.ConditionEvaluator
	matchExprs, validExprs       []string
	msgEx                        []string
}

// condition is a CEL expression of a policy with the types it may return.
type condition struct {
	expression string
	returns    []*cel.Type
}

func (c condition) GetExpression() string    { return c.expression }
func (c condition) ReturnTypes() []*cel.Type { return c.returns }

// compilePolicy compiles p's match conditions, validations and message
// expressions as the API server does, failing the test on one it would
// not compile.
func compilePolicy(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionPolicy {
	t.Helper()
	hasParams := p.Spec.ParamKind != nil
	vars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: hasParams}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Variables) > 0 {
		t.Fatalf("policy %s: variables are not evaluated by this test", p.Name)
	}
	ap := &admissionPolicy{spec: p.Spec}
	compile := func(exprs []string, returns []*cel.Type, vars plugincel.OptionalVariableDeclarations) plugincel.ConditionEvaluator {
		var accessors []plugincel.ExpressionAccessor
		for _, e := range exprs {
			c := condition{e, returns}
			if r := compiler.CompileCELExpression(c, vars, environment.StoredExpressions); r.Error != nil {
				t.Fatalf("policy %s: %q does not compile: %v", p.Name, e, r.Error)
			}
			accessors = append(accessors, c)
		}
		return compiler.CompileCondition(accessors, vars, environment.StoredExpressions)
	}
	for _, m := range p.Spec.MatchConditions {
		ap.matchExprs = append(ap.matchExprs, m.Expression)
	}
	for _, v := range p.Spec.Validations {
		ap.validExprs = append(ap.validExprs, v.Expression)
		msg := v.MessageExpression
		if msg == "" {
			msg = "''" // the message then
		}
		ap.msgEx = append(ap.msgEx, msg)
	}
	ap.match = compile(ap.matchExprs, []*cel.Type{cel.BoolType}, vars)
	ap.validations = compile(ap.validExprs, []*cel.Type{cel.BoolType}, vars)
	ap.messages = compile(ap.msgEx, []*cel.Type{cel.StringType}, messageVars)
	return ap
}

// admissionRequest is a write of a cluster-scoped object by a user.
type admissionRequest struct {
	gvk       schema.GroupVersionKind
	resource  string
	operation admission.Operation
	name      string
	user      string
	// extra is the user's extra information (a pod-bound token's node
	// name).
	extra map[string][]string
}

// decision is what the policy made of a request: whether its match
// conditions selected it, and if so whether it was denied, with what
// message.
type decision struct {
	judged, denied bool
	message        string
}

// decide runs the policy on req with params, the binding's parameter
// (nil without one).
func (p *admissionPolicy) decide(t *testing.T, req admissionRequest, params runtime.Object) decision {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(req.gvk)
	obj.SetName(req.name)
	var object, old runtime.Object = obj, nil
	switch req.operation {
	case admission.Update:
		old = obj.DeepCopy()
	case admission.Delete:
		object, old = nil, obj
	}
	gvr := req.gvk.GroupVersion().WithResource(req.resource)
	attr := admission.NewAttributesRecord(object, old, req.gvk, "", req.name, gvr, "", req.operation, nil, false,
		&user.DefaultInfo{Name: req.user, Extra: req.extra})
	versioned := &admission.VersionedAttributes{Attributes: attr, VersionedKind: req.gvk, VersionedObject: object, VersionedOldObject: old}
	request := plugincel.CreateAdmissionRequest(attr, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(req.gvk))
	run := func(e plugincel.ConditionEvaluator, exprs []string, bindings plugincel.OptionalVariableBindings) []any {
		results, _, err := e.ForInput(context.Background(), versioned, request, bindings, nil, celconfig.RuntimeCELCostBudget)
		if err != nil {
			t.Fatalf("evaluating %q: %v", exprs, err)
		}
		out := make([]any, len(results))
		for i, r := range results {
			if r.Error != nil {
				// failurePolicy Fail: an expression that fails denies,
				// but with the API server's error for a message: a
				// policy's expressions must not fail on the requests it
				// is written for.
				t.Errorf("%q failed on %s %s by %s: %v", exprs[i], req.operation, req.name, req.user, r.Error)
				out[i] = fmt.Errorf("%q: %w", exprs[i], r.Error)
				continue
			}
			out[i] = r.EvalResult.Value()
		}
		return out
	}
	bindings := plugincel.OptionalVariableBindings{VersionedParams: params}
	for _, m := range run(p.match, p.matchExprs, bindings) {
		if err, failed := m.(error); failed {
			return decision{judged: true, denied: true, message: err.Error()}
		}
		if m != true {
			return decision{}
		}
	}
	d := decision{judged: true}
	messages := run(p.messages, p.msgEx, plugincel.OptionalVariableBindings{VersionedParams: params})
	for i, v := range run(p.validations, p.validExprs, bindings) {
		if v == true {
			continue
		}
		d.denied = true
		if err, failed := v.(error); failed {
			d.message = err.Error()
		} else if msg, ok := messages[i].(string); ok && strings.TrimSpace(msg) != "" {
			d.message = strings.TrimSpace(msg)
		} else {
			d.message = p.spec.Validations[i].Message
		}
	}
	return d
}

// paramOf returns the object a binding's paramRef names among the
// rendered ServiceAccounts, as the API server would find it, failing the
// test when it names none.
func paramOf(t *testing.T, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, accounts []*corev1.ServiceAccount) runtime.Object {
	t.Helper()
	ref := b.Spec.ParamRef
	if ref == nil || ref.Name == "" || ref.Namespace == "" || ref.Selector != nil {
		t.Fatalf("binding %s: paramRef %+v, want one object by name and namespace", b.Name, ref)
	}
	for _, sa := range accounts {
		if sa.Name == ref.Name && sa.Namespace == ref.Namespace {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sa)
			if err != nil {
				t.Fatal(err)
			}
			param := &unstructured.Unstructured{Object: u}
			param.SetAPIVersion("v1")
			param.SetKind("ServiceAccount")
			return param
		}
	}
	t.Fatalf("binding %s: paramRef %s/%s names no rendered ServiceAccount", b.Name, ref.Namespace, ref.Name)
	return nil
}
