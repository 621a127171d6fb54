package policy

import (
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"k8s.io/utils/cpuset"
)

// Update is the cpuset the runtime should give a container.
type Update struct {
	ContainerID string
	// Display names the container for logs.
	Display string
	CPUs    cpuset.CPUSet
	// CPUList is CPUs in the Linux list format, when the policy formatted
	// it already (it does so once for the many updates that share the
	// shared pool); empty otherwise.
	CPUList string
	// Mems, when not empty, is the memory nodes the container should use
	// (alignMemory).
	Mems cpuset.CPUSet
}

// List returns the CPUs in the Linux list format ("0-3,8").
func (u Update) List() string {
	if u.CPUList != "" {
		return u.CPUList
	}
	return cpumask.Format(u.CPUs)
}

// Operation classifies a resize for metrics and logs.
type Operation string

// The resize operations.
const (
	OpNone      Operation = ""
	OpIncrease  Operation = "increase"
	OpDecrease  Operation = "decrease"
	OpUnchanged Operation = "unchanged"
)

// Decision is the outcome of one request.
type Decision struct {
	// Model is the new model, to be committed once its State is on disk.
	Model *Model
	// Target is the cpuset of the container the request is about; nil when
	// it must not be touched (shared container resize, removal, ...).
	Target *Update
	// Others are updates of other containers that may be applied at once,
	// before the target's (the runtime applies them first). Each container
	// appears at most once.
	Others []Update
	// Operation is the kind of resize (OpNone for other requests).
	Operation Operation
	// Notes are human-readable remarks for the log (adoptions, missed
	// resizes, mismatches), one line each.
	Notes []string
}
