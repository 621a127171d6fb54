package policy

import (
	"errors"
	"fmt"
)

// Verdict says whether a refused request may succeed later.
type Verdict string

const (
	// Infeasible: the request can never be satisfied on this node as
	// configured.
	Infeasible Verdict = "Infeasible"
	// Deferred: the request may fit once other pods release CPUs; the
	// kubelet retries it.
	Deferred Verdict = "Deferred"
)

// Reason is the machine-readable cause of a refusal. The resize reasons are
// the ones KEP-5554 introduces.
type Reason string

const (
	// ReasonProhibitedCPUAllocation: a resize below the original CPUs.
	ReasonProhibitedCPUAllocation Reason = "prohibitedCPUAllocation"
	// ReasonInconsistentCPUAllocation: a resize that would move a container
	// between the exclusive CPUs and the shared pool.
	ReasonInconsistentCPUAllocation Reason = "inconsistentCPUAllocation"
	// ReasonGetOriginalCPUSet: the original CPUs of an exclusive container
	// are not known (state lost or corrupt).
	ReasonGetOriginalCPUSet Reason = "getOriginalCPUSet"
	// ReasonResizeAllocateCPUs: the CPUs for a growth cannot be allocated
	// (not enough free CPUs, or the topology policy cannot be met).
	ReasonResizeAllocateCPUs Reason = "resizeAllocateCPUs"
	// ReasonSMTAlignment: full-pcpus-only and a CPU count that is not a
	// multiple of the threads per core.
	ReasonSMTAlignment Reason = "smtAlignment"
	// ReasonFeatureDisabled: inPlaceResize is off and the CPU count of an
	// exclusive container would change.
	ReasonFeatureDisabled Reason = "featureDisabled"
	// ReasonAllocateCPUs: the CPUs of a new container cannot be allocated.
	ReasonAllocateCPUs Reason = "allocateCPUs"
	// ReasonTopologyAffinity: the topology manager policy refuses the
	// placement of a new container.
	ReasonTopologyAffinity Reason = "topologyAffinity"
	// ReasonInvalidContainerID: a container created without an id, or with
	// the id of a container that runs: the plugin could not tell them
	// apart.
	ReasonInvalidContainerID Reason = "invalidContainerID"
)

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
