package policy

import (
	"slices"

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
	// appears at most once. They are the decision's own; Updates adds the
	// shared containers' when the decision changed the shared pool.
	Others []Update
	// PoolChanged says that the decision changed the shared pool: every
	// running container that owns no assignment in Model (the shared
	// containers) moves to Model's pool, after Others and before Last.
	// The decision does not list them (one update per shared container
	// would make its cost grow with the node's pods): Updates does, for
	// the reply.
	PoolChanged bool
	// Last are updates the runtime applies after the shared containers'
	// (a pod resize's increases, which may take CPUs the shared
	// containers leave).
	Last []Update
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

// Updates returns every update of other containers the decision makes,
// in the order the runtime must apply them: Others, then — when the
// shared pool changed — one for each running shared container of Model in
// container id order (those Others or Last name excepted), then Last.
// Each container appears once. It costs the node's containers: call it
// once, when the reply is built.
func (d Decision) Updates() []Update {
	if !d.PoolChanged {
		if len(d.Last) == 0 {
			return d.Others
		}
		return slices.Concat(d.Others, d.Last)
	}
	named := make(map[string]bool, len(d.Others)+len(d.Last))
	for _, u := range d.Others {
		named[u.ContainerID] = true
	}
	for _, u := range d.Last {
		named[u.ContainerID] = true
	}
	m := d.Model
	pool := m.sharedMask()
	list := pool.String()
	out := make([]Update, 0, len(d.Others)+max(0, len(m.recs)-m.State.NumContainers())+len(d.Last))
	out = append(out, d.Others...)
	for _, t := range m.recs {
		if _, owns := m.State.Container(t.ID); t.Stopped || owns || named[t.ID] {
			continue
		}
		out = append(out, Update{ContainerID: t.ID, Display: t.Display, CPUs: pool, CPUList: list})
	}
	return append(out, d.Last...)
}

// poolChanged tells whether a decision that turned model before into
// after changed the shared pool (Decision.PoolChanged).
func poolChanged(before, after *Model) bool {
	return !before.sharedMask().Equal(after.sharedMask())
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
