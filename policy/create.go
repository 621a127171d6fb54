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
// from the free ones (its pod's stopped containers' CPUs first), and every
// running shared container is shrunk to the new shared pool
// (Decision.Others, applied by the runtime before the new container is
// created). A container re-created under a pod and name that hold an
// assignment (a restart) gets exactly those CPUs back (recreate). A
// refusal changes nothing.
func (p *Policy) CreateContainer(m *Model, c Container) (Decision, error) {
	d, err := p.createContainer(m, c)
	if err != nil {
		return Decision{}, err
	}
	d.describeContainer(m, c.ID)
	return d, nil
}

// createContainer is CreateContainer before the decision is described.
func (p *Policy) createContainer(m *Model, c Container) (Decision, error) {
	display := displayName(c.Pod, c.Name)
	if c.ID == "" {
		return Decision{}, refuse(Infeasible, ReasonInvalidContainerID,
			"container %s comes without a usable container id: its cpuset could never be updated", display)
	}
	if t := m.Containers[c.ID]; t != nil && !t.Stopped {
		return Decision{}, refuse(Infeasible, ReasonInvalidContainerID,
			"container id %s of %s already names running container %s", c.ID, display, t.Display)
	}
	class := Classify(c.Pod.QoS(), c.Resources)
	t := &Tracked{ID: c.ID, PodUID: c.Pod.UID, Name: c.Name, Display: display, Exclusive: class.Exclusive,
		CPULimitMilli: cpuLimitMilli(c.Resources)}
	if Untrackable(c) != "" {
		// It runs on the shared pool: the plugin warns once.
		return p.createShared(m, t, nil)
	}
	if a, ok := m.State.Assignment(c.Pod.UID, c.Name); ok {
		return p.recreate(m, c, t, class, a)
	}
	if class.Exclusive {
		if note := beyondPodLimit(m, c, class.CPUs); note != "" {
			return p.createShared(m, t, []string{note})
		}
	}
	if !class.Exclusive {
		return p.createShared(m, t, nil)
	}
	nm := m.Clone()
	cpus, notes, err := p.allocateFor(nm, c, display, class.CPUs)
	if err != nil {
		return Decision{}, err
	}
	nm.State.SetAssignment(c.Pod.UID, c.Name, state.Assignment{Baseline: cpus})
	nm.State.SetContainer(c.ID, state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name})
	p.takeFromPool(nm, cpus)
	nm.add(t)
	return Decision{
		Model:  nm,
		Target: &Update{ContainerID: c.ID, Display: display, CPUs: cpus, Mems: p.mems(cpus)},
		Others: p.syncShared(m, nm),
		Notes:  notes,
	}, nil
}

// createShared starts a container on the shared pool.
func (p *Policy) createShared(m *Model, t *Tracked, notes []string) (Decision, error) {
	nm := m.Clone()
	t.Exclusive = false
	nm.add(t)
	return Decision{Model: nm, Target: &Update{ContainerID: t.ID, Display: t.Display, CPUs: nm.SharedPool()}, Notes: notes}, nil
}

// recreate handles a container created under a pod and name that hold an
// assignment: the kubelet re-creates a container that exited (crash, OOM
// kill, failed probe) with a new id and the same name, and it gets exactly
// the CPUs it had: its baseline CPUs stay its baseline ones for the pod's
// whole life, as the kubelet's static policy keeps the (pod, container)
// entry across restarts. The kubelet re-creates it with the resources it
// last accepted for it, which may differ from what it ran on when a resize
// was refused: more CPUs are a growth, fewer a shrink, by the resize
// rules; fewer than the baseline CPUs are refused (the refused shrink
// would otherwise take effect through the crash). A predecessor still
// running under the name (its stop was never seen) loses its claim and
// runs on the shared pool, before the new container starts.
func (p *Policy) recreate(m *Model, c Container, t *Tracked, class Class, a state.Assignment) (Decision, error) {
	display := t.Display
	assigned, n := a.Assigned(), class.CPUs
	if !class.Exclusive {
		return Decision{}, refuse(Infeasible, ReasonInconsistentCPUAllocation,
			"container %s is re-created on the shared pool because %s, but its pod and name hold the exclusive CPUs %s: a restart cannot change the CPU pool; put the pod's resize back",
			display, class.Why, assigned)
	}
	if n < a.Baseline.Size() {
		return Decision{}, refuse(Infeasible, ReasonProhibitedCPUAllocation,
			"container %s is re-created with %d CPUs, fewer than the %d baseline exclusive CPUs %s it keeps for its pod's whole life (a resize below them was refused, and the restart asks for it again); put the resize back to at least %d CPUs",
			display, n, a.Baseline.Size(), a.Baseline, a.Baseline.Size())
	}
	nm := m.Clone()
	demoted, notes := p.takeOver(nm, c)
	cpus := assigned
	switch {
	case n < assigned.Size():
		if err := p.admitResize(display, a, n); err != nil {
			return Decision{}, err
		}
		kept, err := p.shrinkTo(nm, c.Pod.UID, c.Name, display, a, n)
		if err != nil {
			return Decision{}, err
		}
		cpus = kept
		p.returnToPool(nm, assigned.Difference(kept))
	case n > assigned.Size():
		if err := p.admitResize(display, a, n); err != nil {
			return Decision{}, err
		}
		pl := p.growth(nm, c.Pod.UID, c.Name, assigned, n)
		free, poolLeft := p.availability(nm)
		grown, err := p.placeGrowth(pl, free, poolLeft)
		if err != nil {
			return Decision{}, refuse(p.verdictFor(pl, err), ReasonResizeAllocateCPUs,
				"cannot re-create container %s with %d exclusive CPUs keeping its %s (free: %s%s): %v",
				display, n, assigned, describe(free.CPUSet()), nm.lentNote(), err)
		}
		cpus = grown
		p.takeFromPool(nm, grown.Difference(assigned))
		p.takeHeld(nm, c.Pod.UID, grown)
	}
	if !cpus.Equals(assigned) {
		nm.State.SetAssignment(c.Pod.UID, c.Name, state.Assignment{Baseline: a.Baseline, Resized: cpus})
		notes = append(notes, fmt.Sprintf("%s: re-created with %d CPUs: %s → %s", display, n, assigned, cpus))
	} else {
		notes = append(notes, fmt.Sprintf("%s: re-created, keeps its exclusive CPUs %s", display, cpus))
	}
	nm.State.SetContainer(c.ID, state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name})
	t.Exclusive = true
	nm.add(t)
	return Decision{
		Model:  nm,
		Target: &Update{ContainerID: c.ID, Display: display, CPUs: cpus, Mems: p.mems(cpus)},
		Others: withTwins(nm, demoted, p.syncShared(m, nm)),
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

// takeOver makes container c the owner of its pod and name's assignment:
// the ids that owned it lose their claim. A predecessor that is not known
// stopped may still run: it runs on the shared pool (the caller sends it
// there before the new container starts, see withTwins: demoted names
// those that were exclusive), so no CPU is ever in both.
func (p *Policy) takeOver(m *Model, c Container) (demoted, notes []string) {
	ref := state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name}
	for id, owner := range m.State.ContainerRefs() {
		if owner != ref || id == c.ID {
			continue
		}
		m.State.DeleteContainer(id)
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
	return demoted, notes
}

// allocateFor picks n CPUs for a new exclusive container of a pod, or
// refuses. The CPUs of the pod's stopped containers are taken first (an
// init container's CPUs go to the app containers after it, as the
// kubelet reuses them); a stopped container whose CPUs are taken loses
// its assignment, and its CPUs not taken return to the shared pool.
func (p *Policy) allocateFor(m *Model, c Container, display string, n int) (cpuset.CPUSet, []string, error) {
	pl := placement{keep: cpuset.New(), n: n}
	stopped := m.stoppedEntries(c.Pod.UID)
	for _, name := range stopped {
		a, _ := m.State.Assignment(c.Pod.UID, name)
		pl.borrowed.AddSet(a.Assigned())
	}
	pl.borrowed = pl.borrowed.Or(m.heldFor(c.Pod.UID))
	pl.pod, pl.podNeed = p.podScope(m, c.Pod, c.Name, n)
	cpus, err := p.placeNew(m, display, pl)
	if err != nil {
		return cpuset.New(), nil, err
	}
	var notes []string
	for _, name := range stopped {
		a, _ := m.State.Assignment(c.Pod.UID, name)
		if taken := a.Assigned().Intersection(cpus); !taken.IsEmpty() {
			m.State.DeleteAssignment(c.Pod.UID, name)
			p.returnToPool(m, a.Assigned().Difference(cpus))
			notes = append(notes, fmt.Sprintf("%s: takes CPUs %s of its pod's stopped container %s, which gives up its exclusive CPUs %s",
				display, taken, name, a.Assigned()))
		}
	}
	p.takeHeld(m, c.Pod.UID, cpus)
	return cpus, notes, nil
}

// allocateNew picks n CPUs for a container without a pod to borrow from
// (adoption at Synchronize), or refuses.
func (p *Policy) allocateNew(m *Model, display string, n int) (cpuset.CPUSet, error) {
	return p.placeNew(m, display, placement{keep: cpuset.New(), n: n})
}

// placeNew places the CPUs of a new container, or refuses: whole cores
// under full-pcpus-only, room on the node, the topology manager policy.
func (p *Policy) placeNew(m *Model, display string, pl placement) (cpuset.CPUSet, error) {
	if !p.smtAligned(pl.n) {
		return cpuset.New(), refuse(Infeasible, ReasonSMTAlignment,
			"container %s requests %d CPUs, not a multiple of the %d threads per core that full-pcpus-only requires",
			display, pl.n, p.topo.ThreadsPerCore())
	}
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
		"cannot allocate %d exclusive CPUs for container %s (free: %s%s): %v", pl.n, display, describe(free.CPUSet()), m.lentNote(), err)
}

// describe prints a cpuset for messages, naming the empty set.
func describe(cpus cpuset.CPUSet) string {
	if cpus.IsEmpty() {
		return "none"
	}
	return cpus.String()
}
