package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// CreateContainer decides the cpuset of a container being created. A
// shared container gets the shared pool. An exclusive container gets N CPUs
// from the free CPUs, and every running shared container is shrunk to the
// new shared pool (Decision.Others, applied by the runtime before the new
// container is created). A refusal changes nothing.
func (p *Policy) CreateContainer(m *Model, c Container) (Decision, error) {
	display := displayName(c.Pod, c.Name)
	if c.ID == "" {
		return Decision{}, refuse(Infeasible, ReasonInvalidContainerID,
			"container %s comes without a usable container id: its cpuset could never be updated", display)
	}
	if t := m.Containers[c.ID]; t != nil && !t.Stopped {
		return Decision{}, refuse(Infeasible, ReasonInvalidContainerID,
			"container id %s of %s already names running container %s", c.ID, display, t.Display)
	}
	nm := m.Clone()
	class := Classify(c.Pod.QoS(), c.Resources)
	t := &Tracked{ID: c.ID, PodUID: c.Pod.UID, Name: c.Name, Display: display, Exclusive: class.Exclusive,
		CPULimitMilli: cpuLimitMilli(c.Resources)}

	var notes []string
	untrackable := Untrackable(c) != ""
	if class.Exclusive && !untrackable {
		if note := beyondPodLimit(nm, c, class.CPUs); note != "" {
			class.Exclusive = false
			notes = append(notes, note)
		}
	}
	if !class.Exclusive || untrackable {
		// (A container that cannot be tracked by name runs on the shared
		// pool: the plugin warns once.)
		t.Exclusive = false
		nm.add(t)
		return Decision{Model: nm, Target: &Update{ContainerID: c.ID, Display: display, CPUs: nm.SharedPool()}, Notes: notes}, nil
	}

	cpus, reused, twins, moved := p.reuseEntry(nm, c, class.CPUs)
	notes = append(notes, moved...)
	if reused {
		notes = append(notes, fmt.Sprintf("%s: re-created, keeps its exclusive CPUs %s", display, cpus))
	} else {
		var err error
		if cpus, err = p.allocateNew(nm, display, class.CPUs); err != nil {
			return Decision{}, err
		}
		nm.State.SetAssignment(c.Pod.UID, c.Name, state.Assignment{Original: cpus})
	}
	nm.State.SetContainer(c.ID, state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name})
	if !reused {
		p.takeFromPool(nm, cpus)
	}
	nm.add(t)
	return Decision{
		Model:  nm,
		Target: &Update{ContainerID: c.ID, Display: display, CPUs: cpus, Mems: p.mems(cpus)},
		Others: withTwins(nm, twins, p.syncShared(m, nm)),
		Notes:  notes,
	}, nil
}

// beyondPodLimit returns the note saying that a container asking for n
// exclusive CPUs runs on the shared pool instead because its pod's CPU
// limit cannot hold them next to the exclusive CPUs the pod's other
// containers hold ("" when it can, or when the pod's limit is unknown). Only pod-level resources (KEP-2837)
// lead there: a container without a CPU limit of its own gets the pod's,
// with the shares to match, and so looks exclusive; pinning each such
// container would give the pod more CPUs than its limit. (The kubelet's
// static policy pins no container of such a pod; the runtime's data do
// not tell them from other pods, so the plugin pins what fits.)
func beyondPodLimit(m *Model, c Container, n int) string {
	res, known := m.PodResources(c.Pod)
	limit := cpuLimitMilli(res)
	if !known || limit == 0 {
		return ""
	}
	held := 0
	for _, name := range m.State.ContainersOfPod(c.Pod.UID) {
		if a, ok := m.State.Assignment(c.Pod.UID, name); ok && name != c.Name {
			held += a.Assigned().Size()
		}
	}
	if int64(held+n)*milliCPUPerCPU <= limit {
		return ""
	}
	display := displayName(c.Pod, c.Name)
	if held == 0 {
		return fmt.Sprintf("%s: runs on the shared pool: its %d CPUs exceed its pod's CPU limit of %dm", display, n, limit)
	}
	return fmt.Sprintf("%s: runs on the shared pool: its %d CPUs and the %d exclusive CPUs of its pod's other containers exceed the pod's CPU limit of %dm (pod-level resources: containers without a CPU limit of their own share the pod's)",
		display, n, held, limit)
}

// withTwins adds to updates (those of syncShared, in id order) the
// shared-pool update of each container reuseEntry turned shared (ids),
// unless updates already name it. Their update shrinks them off the CPUs
// they leave, so it comes first.
func withTwins(nm *Model, ids []string, updates []Update) []Update {
	var twins []Update
	for _, id := range ids {
		if slices.ContainsFunc(updates, func(u Update) bool { return u.ContainerID == id }) {
			continue
		}
		twins = append(twins, Update{ContainerID: id, Display: nm.Containers[id].Display, CPUs: nm.SharedPool()})
	}
	slices.SortFunc(twins, func(a, b Update) int { return strings.Compare(a.ContainerID, b.ContainerID) })
	return append(twins, updates...)
}

// reuseEntry handles a container created under a name that already holds
// an assignment: a re-creation whose predecessor's stop was never seen, or
// a twin (two containers of one pod with one name). The new container
// takes the assignment over when its count still matches, and the entry is
// forgotten otherwise. A predecessor that is not known stopped may still
// run: it loses its claim and runs on the shared pool (the caller sends it
// there before the new container starts, see withTwins: demoted names
// those that were exclusive), so no CPU is ever in both.
func (p *Policy) reuseEntry(m *Model, c Container, n int) (cpus cpuset.CPUSet, reused bool, demoted, notes []string) {
	a, ok := m.State.Assignment(c.Pod.UID, c.Name)
	if !ok {
		return cpuset.New(), false, nil, nil
	}
	ref := state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name}
	for id, owner := range m.State.ContainerRefs() {
		if owner != ref {
			continue
		}
		m.State.DeleteContainer(id) // copy on write: the range goes on over the old map
		// CPUs the predecessor's unconfirmed shrink released go to the
		// shared pool now: it no longer holds exclusive CPUs either way.
		delete(m.Releasing, id)
		if old := m.Containers[id]; old != nil && !old.Stopped {
			if old.Exclusive {
				demoted = append(demoted, id)
			}
			m.edit(id).Exclusive = false
			notes = append(notes, fmt.Sprintf("%s: container %s takes over the exclusive CPUs of %s, which still runs under the same pod and name; %s now runs on the shared pool",
				displayName(c.Pod, c.Name), c.ID, id, id))
		}
	}
	if a.Assigned().Size() == n {
		return a.Assigned(), true, demoted, notes
	}
	m.State.DeleteAssignment(c.Pod.UID, c.Name)
	p.returnToPool(m, a.Assigned())
	return cpuset.New(), false, demoted, notes
}

// allocateNew picks n CPUs for a new exclusive container, or refuses.
func (p *Policy) allocateNew(m *Model, display string, n int) (cpuset.CPUSet, error) {
	if !p.smtAligned(n) {
		return cpuset.New(), refuse(Infeasible, ReasonSMTAlignment,
			"container %s requests %d CPUs, not a multiple of the %d threads per core that full-pcpus-only requires",
			display, n, p.topo.ThreadsPerCore())
	}
	pl := placement{keep: cpuset.New(), n: n}
	free, poolLeft := p.availability(m)
	cpus, err := p.place(pl, free, poolLeft)
	if err == nil {
		return cpus, nil
	}
	reason := ReasonAllocateCPUs
	if errors.Is(err, errTopologyPolicy) {
		reason = ReasonTopologyAffinity
	}
	return cpuset.New(), refuse(p.verdictFor(pl, err), reason,
		"cannot allocate %d exclusive CPUs for container %s (free: %s%s): %v", n, display, describe(free.CPUSet()), m.lentNote(), err)
}

// describe prints a cpuset for messages, naming the empty set.
func describe(cpus cpuset.CPUSet) string {
	if cpus.IsEmpty() {
		return "none"
	}
	return cpus.String()
}
