package policy

import (
	"errors"
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// CreateContainer decides the cpuset of a container being created. A
// shared container gets the shared pool. An exclusive container gets N CPUs
// from the free CPUs, and every running shared container is shrunk to the
// new shared pool (Decision.Others, applied by the runtime before the new
// container is created). A refusal changes nothing.
func (p *Policy) CreateContainer(m *Model, c Container) (Decision, error) {
	nm := m.Clone()
	class := Classify(c.Pod.QoS(), c.Resources)
	display := displayName(c.Pod, c.Name)
	t := &Tracked{ID: c.ID, PodUID: c.Pod.UID, Name: c.Name, Display: display, Exclusive: class.Exclusive,
		CPULimitMilli: cpuLimitMilli(c.Resources)}

	if !class.Exclusive {
		nm.add(t)
		return Decision{Model: nm, Target: &Update{ContainerID: c.ID, Display: display, CPUs: nm.SharedPool()}}, nil
	}

	var notes []string
	cpus, reused := p.reuseEntry(nm, c, class.CPUs)
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
		Others: p.syncShared(m, nm),
		Notes:  notes,
	}, nil
}

// reuseEntry handles a container created under a name that already holds
// an assignment (a re-creation whose predecessor's stop was never seen): it
// keeps the assigned CPUs when their count still matches, and forgets the
// entry otherwise. The predecessor, if still tracked, is marked stopped.
func (p *Policy) reuseEntry(m *Model, c Container, n int) (cpuset.CPUSet, bool) {
	a, ok := m.State.Assignment(c.Pod.UID, c.Name)
	if !ok {
		return cpuset.New(), false
	}
	ref := state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name}
	for id, owner := range m.State.ContainerRefs() {
		if owner != ref {
			continue
		}
		m.State.DeleteContainer(id) // copy on write: the range goes on over the old map
		if old := m.edit(id); old != nil {
			old.Stopped = true
		}
		// The predecessor's process is gone: CPUs its unconfirmed shrink
		// released go to the shared pool now (its stop will not come: it
		// is marked stopped).
		delete(m.Releasing, id)
	}
	if a.Assigned().Size() == n {
		return a.Assigned(), true
	}
	m.State.DeleteAssignment(c.Pod.UID, c.Name)
	p.returnToPool(m, a.Assigned())
	return cpuset.New(), false
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
	return cpuset.New(), refuse(p.verdictFor(pl), reason,
		"cannot allocate %d exclusive CPUs for container %s (free: %s): %v", n, display, describe(free.CPUSet()), err)
}

// describe prints a cpuset for messages, naming the empty set.
func describe(cpus cpuset.CPUSet) string {
	if cpus.IsEmpty() {
		return "none"
	}
	return cpus.String()
}
