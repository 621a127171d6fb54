package policy

import (
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// Update is the cpuset the runtime should give a container.
type Update struct {
	ContainerID string
	// Display names the container for logs.
	Display string
	// CPUs is the cpuset, as a bitmap: the updates of the shared
	// containers share the pool's, so no receiver may change it.
	CPUs cpumask.Mask
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
	return u.CPUs.String()
}

// CPUSet returns CPUs as a cpuset.
func (u Update) CPUSet() cpuset.CPUSet { return u.CPUs.CPUSet() }

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
	// Warnings are what the operator should act on although the request
	// went through (a restart on other CPUs than it asked for), one line
	// each.
	Warnings []string
	// Unapplied is what a container's re-creation asked that the plugin
	// could not give it (a resize the kubelet took for done while the
	// container was down: it restarted on its CPUs, with Warnings saying
	// so); the plugin reports it on the pod as a refused resize. Nil
	// otherwise.
	Unapplied *Refusal

	// What the plugin logs of a container request (CreateContainer,
	// UpdateContainer): the container's cpuset in the model the decision
	// started from and in the new one, whether it runs on exclusive CPUs,
	// and the shared pool before and after.
	Before, After             cpumask.Mask
	Exclusive                 bool
	SharedBefore, SharedAfter cpumask.Mask
	// What the plugin logs of a pod-level update (UpdatePodSandbox): the
	// pod's resources before, and its running containers' cpusets by name.
	PodBefore Resources
	PodCPUs   []ContainerCPUs
}

// ContainerCPUs is the cpuset of a container, by name.
type ContainerCPUs struct {
	Name string
	CPUs cpuset.CPUSet
}

// describeContainer fills in what the plugin logs of a decision about
// container id, which started from model m.
func (d *Decision) describeContainer(m *Model, id string) {
	d.Before, d.SharedBefore = m.CPUMaskOf(id), m.sharedMask()
	if d.Model == nil {
		return
	}
	d.After, d.SharedAfter = d.Model.CPUMaskOf(id), d.Model.sharedMask()
	d.Exclusive = d.Model.Owns(id)
}
