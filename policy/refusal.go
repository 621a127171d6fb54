package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Verdict says whether a refused request may succeed later.
type Verdict string

const (
	// Infeasible: the request can never be satisfied on this node as
	// configured (KEP-1287's resize status; KEP-5554 makes every failed
	// feasibility check, topology errors included, Infeasible).
	Infeasible Verdict = "Infeasible"
	// Deferred: there are not enough free CPUs now, and there would be
	// once other pods release theirs; the kubelet retries it.
	Deferred Verdict = "Deferred"
)

// Reason is the machine-readable cause of a refusal: the word between the
// verdict and the explanation in the error text, and the reason label of
// the refusal metric. Reasons lists them all.
type Reason string

// The refusal reasons. Their documentation is in the reasons table.
const (
	ReasonProhibitedCPUAllocation   Reason = "prohibitedCPUAllocationError"
	ReasonInconsistentCPUAllocation Reason = "inconsistentCPUAllocationError"
	ReasonGetBaselineCPUSet         Reason = "getBaselineCPUSetError"
	ReasonResizeAllocateCPUs        Reason = "resizeAllocateCPUsError"
	ReasonSMTAlignment              Reason = "SMTAlignmentError"
	ReasonTopologyAffinity          Reason = "TopologyAffinityError"
	ReasonAllocateCPUs              Reason = "allocateCPUsError"
	ReasonFeatureDisabled           Reason = "featureDisabledError"
	ReasonInvalidContainerID        Reason = "invalidContainerIDError"
)

// Where a reason's name comes from.
const (
	fromKEP5554 = "KEP-5554"
	fromKubelet = "kubelet"
	fromPlugin  = "nri-cpumanager"
)

// ReasonDoc documents one refusal reason. The metric's help, the
// troubleshooting guide's table and its test are derived from Reasons.
type ReasonDoc struct {
	Reason Reason
	// Verdicts are the verdicts the reason comes with.
	Verdicts []Verdict
	// Source is where the name comes from: KEP-5554, the kubelet's own
	// admission errors, or this plugin.
	Source string
	// Refused says what was refused, Fix what to do; one sentence each.
	Refused, Fix string
}

// reasons is the table of every reason, in the order the documentation
// lists them. It is read-only.
var reasons = []ReasonDoc{
	{ReasonResizeAllocateCPUs, []Verdict{Infeasible}, fromKEP5554,
		"a growth cannot get its CPUs: not enough free CPUs, the shared pool would lose its last one, or the topology manager policy or full-pcpus-only cannot place it (KEP-5554 calls every failed allocation of a resize Infeasible)",
		"put the spec back; or free CPUs by deleting or shrinking other pinned pods: the kubelet retries the resize while the spec asks for it"},
	{ReasonProhibitedCPUAllocation, []Verdict{Infeasible}, fromKEP5554,
		"a shrink below the CPUs the container was created with (its baseline CPUs), which it keeps for its whole life",
		"put the spec back to at least the baseline count; to run on fewer CPUs, recreate the pod"},
	{ReasonInconsistentCPUAllocation, []Verdict{Infeasible}, fromKEP5554,
		"the container would change pools: a whole number of CPUs to a fraction, or back",
		"recreate the pod with the new shape"},
	{ReasonGetBaselineCPUSet, []Verdict{Infeasible}, fromKEP5554,
		"the CPUs the container was created with are not known (its state was lost and could not be rebuilt for it)",
		"recreate the pod"},
	{ReasonSMTAlignment, []Verdict{Infeasible}, fromKubelet,
		"full-pcpus-only and a CPU count that is not a multiple of the threads per core, at creation or resize",
		"ask for whole cores (an even count on 2-thread cores)"},
	{ReasonTopologyAffinity, []Verdict{Deferred, Infeasible}, fromKubelet,
		"under single-numa-node or restricted, a new container's CPUs, or with the pod's spec a pod's, cannot be placed as the policy requires (for example on one NUMA node), for lack of CPUs too, as the kubelet's topology manager refuses such a pod at admission (Deferred when other pods hold the CPUs it needs)",
		"ask for fewer CPUs, or relax topologyManagerPolicy; the kubelet retries the creation, and a Deferred one starts once other pods give CPUs back"},
	{ReasonAllocateCPUs, []Verdict{Deferred, Infeasible}, fromPlugin,
		"not enough free CPUs for a new pinned container (Deferred when other pods hold them), or a layout full-pcpus-only cannot fill (Infeasible)",
		"the kubelet retries the creation: a Deferred one starts once other pods give CPUs back"},
	{ReasonFeatureDisabled, []Verdict{Infeasible}, fromPlugin,
		"inPlaceResize: false in the plugin's configuration and the CPU count of a pinned container would change",
		"set inPlaceResize: true in the ConfigMap (applied live), or put the spec back; memory-only resizes pass"},
	{ReasonInvalidContainerID, []Verdict{Infeasible}, fromPlugin,
		"a container created without an id, or with the id of a container that runs, or resized while a twin of the same pod and name holds its CPUs",
		"a runtime or kubelet bug: the log has both containers; delete the pod"},
}

// Reasons returns the documentation of every refusal reason.
func Reasons() []ReasonDoc {
	out := make([]ReasonDoc, len(reasons))
	copy(out, reasons)
	return out
}

// ReasonNames returns the reasons' names, comma-separated, for help texts.
func ReasonNames() string {
	names := make([]string, len(reasons))
	for i, r := range reasons {
		names[i] = string(r.Reason)
	}
	return strings.Join(names, ", ")
}

// ReasonsMarkdown is the troubleshooting guide's table of the reasons.
func ReasonsMarkdown() string {
	var b strings.Builder
	b.WriteString("| reason | verdict | name from | what was refused | what to do |\n|---|---|---|---|---|\n")
	for _, r := range reasons {
		verdicts := make([]string, len(r.Verdicts))
		for i, v := range r.Verdicts {
			verdicts[i] = "`" + string(v) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.Reason, strings.Join(verdicts, ", "), r.Source, r.Refused, r.Fix)
	}
	return b.String()
}

// Refusal is a request the policy declines. Its Error text is what the
// kubelet shows in the pod's resize condition, so it is one line in the
// format `<Infeasible|Deferred>: <reason>: <explanation>`.
type Refusal struct {
	Verdict Verdict
	Reason  Reason
	// Message explains the refusal with the numbers and cpusets involved.
	Message string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s: %s: %s", r.Verdict, r.Reason, r.Message)
}

func refuse(v Verdict, reason Reason, format string, args ...any) *Refusal {
	return &Refusal{Verdict: v, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// AsRefusal returns the Refusal in err's chain, if any.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}
