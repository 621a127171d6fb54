package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"

	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// UpdateContainer decides a resize. c is the container as the runtime
// reports it (its current resources), update the requested resources (zero
// fields keep the current value). See docs/design.md, "Semantics", for the cases.
// A refusal changes nothing; its Decision says only the operation asked
// for.
func (p *Policy) UpdateContainer(m *Model, c Container, update Resources) (Decision, error) {
	d, err := p.decideResize(m, c, update)
	if err != nil {
		return Decision{Operation: RequestedOperation(c, update)}, err
	}
	d.Model = withCPULimit(m, d.Model, c.ID, cpuLimitMilli(MergeResources(c.Resources, update)))
	if d.Model != m {
		p.settleResize(m, &d, c)
	}
	d.describeContainer(m, c.ID)
	return d, nil
}

// settleResize holds for the pod the CPUs a resize released while the
// pod's resize is in flight, and gives a pod whose containers add up to
// its total again its held CPUs back: the container's new limit, just
// recorded, decides both.
func (p *Policy) settleResize(m *Model, d *Decision, c Container) {
	if d.Model.State == m.State {
		// (A resize that changed only the container's limit shares m's
		// state: a hold it starts or ends must not change m.)
		nm := d.Model.shallow()
		nm.State = m.State.Clone()
		d.Model = nm
	}
	before, _ := m.State.Assignment(c.Pod.UID, c.Name)
	after, _ := d.Model.State.Assignment(c.Pod.UID, c.Name)
	// (CPUs an init container's entry still holds stay the pod's.)
	released := before.Held().Difference(after.Held()).Difference(d.Model.podHeld(c.Pod.UID, c.Name))
	if p.hold(d.Model, c.Pod, released) {
		d.Notes = append(d.Notes, fmt.Sprintf("%s: its pod's resize is in flight; %s are held for the pod", displayName(c.Pod, c.Name), released))
	}
	if note := p.settleHold(d.Model, c.Pod); note != "" {
		d.Notes = append(d.Notes, note)
		d.PoolChanged = poolChanged(m, d.Model)
	}
}

// UpdateContainerWithSpec is UpdateContainer when the pod's spec is known
// (the plugin watches the Kubernetes API) and asks container c for what
// update does: when the spec changes the CPUs of the pod's other
// exclusive containers too — a resize whose pod total does not change
// sends no UpdatePodSandbox, so nothing checked the whole of it — the
// whole resize is decided first, as UpdatePodSandboxWithSpec does, and
// this container's part is refused with the reason of the container that
// fails: a sibling's growth that cannot be placed never leaves the pod
// with only its decrease applied.
func (p *Policy) UpdateContainerWithSpec(m *Model, c Container, update Resources, spec PodSpec) (Decision, error) {
	if err := p.admitWithSiblings(m, c, update, spec); err != nil {
		return Decision{Operation: RequestedOperation(c, update)}, err
	}
	d, err := p.UpdateContainer(m, c, update)
	if err != nil {
		if after, ok := p.afterSiblings(m, c, update, spec); ok {
			return after, nil
		}
	}
	return d, err
}

// afterSiblings decides c's part of a pod resize once the parts of c's
// running siblings that the whole resize's plan puts before it are
// applied, and reports false when there are none or it still fails. The
// whole resize was admitted (admitWithSiblings) in the plan's order —
// the decreases first, then the increases, each in the members' name
// order — but the kubelet sends the parts in its own: the decreases last
// container first, by CPU limit (kuberuntime_manager.go
// computePodResizeAction prepends each decrease), the sidecars' increases
// before the app containers'. So a container whose limit goes down while
// its CPUs go up (it restarted on fewer CPUs than its limit after a
// refused resize) comes before the sibling's decrease that frees what it
// needs, and under topologyManagerScope: pod a sidecar's growth comes
// before the app container's that makes the pod's count one only two
// NUMA nodes hold. The siblings' parts come first in the reply
// (Decision.Others, applied before the target: the decreases, the shared
// containers, the increases), and their own requests later find them
// done.
func (p *Policy) afterSiblings(m *Model, c Container, update Resources, spec PodSpec) (Decision, bool) {
	if spec == nil {
		return Decision{}, false
	}
	pm := m.podMembers(c.Pod.UID)
	asked, ok := pm.asked(spec)
	if !ok {
		return Decision{}, false
	}
	qos := c.Pod.QoS()
	var decreases, increases []int
	for i, e := range pm.exclusive {
		switch n := Classify(qos, asked[i]).CPUs; {
		case e.id == c.ID:
			if n < e.a.Assigned().Size() {
				decreases = append(decreases, i)
			} else {
				increases = append(increases, i)
			}
		case !e.running || e.unknownLimit || n == e.a.Assigned().Size():
		case n < e.a.Assigned().Size():
			decreases = append(decreases, i)
		default:
			increases = append(increases, i)
		}
	}
	next := m
	var shrunk, grown []Update
	var notes []string
	for k, i := range append(decreases, increases...) {
		e := pm.exclusive[i]
		if e.id == c.ID {
			break
		}
		current := limitResources(e.limit)
		current.MemoryLimit = 1
		sd, err := p.UpdateContainer(next, Container{ID: e.id, Name: e.name, Pod: c.Pod, Resources: current}, asked[i])
		if err != nil || sd.Target == nil {
			return Decision{}, false
		}
		if k < len(decreases) {
			shrunk = append(shrunk, *sd.Target)
		} else {
			grown = append(grown, *sd.Target)
		}
		notes = append(notes, sd.Notes...)
		// (The runtime applies it before the target: the CPUs a decrease
		// gives up are free for the target.)
		next = p.Confirm(sd.Model, e.id).Model
	}
	if len(shrunk)+len(grown) == 0 {
		return Decision{}, false
	}
	d, err := p.UpdateContainer(next, c, update)
	if err != nil {
		return Decision{}, false
	}
	// The decreases first, the shared containers then (off what the
	// increases take, onto what the decreases gave), the increases last.
	d.Others, d.PoolChanged, d.Last = shrunk, poolChanged(m, d.Model), grown
	d.Notes = append(notes, d.Notes...)
	d.describeContainer(m, c.ID)
	return d, true
}

// admitWithSiblings refuses a resize of c to update that is part of a
// pod resize (spec) its containers cannot all get.
func (p *Policy) admitWithSiblings(m *Model, c Container, update Resources, spec PodSpec) error {
	if spec == nil {
		return nil
	}
	pm := m.podMembers(c.Pod.UID)
	if len(pm.exclusive) < 2 {
		return nil
	}
	asked, ok := pm.asked(spec)
	if !ok {
		return nil
	}
	qos, want := c.Pod.QoS(), Classify(c.Pod.QoS(), MergeResources(c.Resources, update))
	others := false
	for i, e := range pm.exclusive {
		n := Classify(qos, asked[i]).CPUs
		switch {
		case e.id == c.ID && n != want.CPUs:
			return nil // the spec is not (yet) this resize's: the container level decides
		case e.id != c.ID && n != e.a.Assigned().Size():
			others = true
		}
	}
	if !others {
		return nil
	}
	return p.admitPodSpec(m.settled(), c.Pod, pm, asked)
}

// decideResize is UpdateContainer before the container's new CPU limit is
// recorded.
func (p *Policy) decideResize(m *Model, c Container, update Resources) (Decision, error) {
	qos := c.Pod.QoS()
	display := displayName(c.Pod, c.Name)
	oldClass := Classify(qos, c.Resources)
	newClass := Classify(qos, MergeResources(c.Resources, update))
	op := operation(oldClass, newClass)

	oldExclusive := oldClass.Exclusive
	if t := m.Containers.Get(c.ID); t != nil {
		oldExclusive = t.Exclusive
	}
	a, hasEntry := m.State.Assignment(c.Pod.UID, c.Name)
	if owner, owned := m.State.ContainerIDOf(state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name}); hasEntry && owned && owner != c.ID {
		if o := m.Containers.Get(owner); o != nil && !o.Stopped && (oldExclusive || newClass.Exclusive) {
			// A twin: the CPUs of the name belong to the other container.
			return Decision{}, refuse(Infeasible, ReasonInvalidContainerID,
				"container %s (id %s) does not hold the exclusive CPUs %s of its pod and name: container %s, which runs too, does",
				display, c.ID, a.Assigned(), owner)
		}
	}

	switch {
	case !oldExclusive && !newClass.Exclusive:
		// Shared containers (and memory-only changes of them) pass through.
		return Decision{Model: m, Operation: op}, nil
	case Untrackable(c) != "":
		// It runs on the shared pool whatever it asks for (the plugin
		// warned when it came).
		return Decision{Model: m, Operation: op}, nil
	case oldExclusive && !hasEntry:
		return Decision{}, refuse(Infeasible, ReasonGetBaselineCPUSet,
			"the baseline exclusive CPUs of container %s are not known (state lost or rebuilt without them); it cannot be resized, recreate the pod",
			display)
	case oldExclusive && !newClass.Exclusive:
		return Decision{}, refuse(Infeasible, ReasonInconsistentCPUAllocation,
			"container %s would move from its exclusive CPUs %s to the shared pool because %s; a resize cannot change the CPU pool",
			display, a.Assigned(), newClass.Why)
	case !oldExclusive && oldClass.Exclusive:
		// Kept on the shared pool although its resources ask for exclusive
		// CPUs (its pod's CPU limit could not hold them): it stays there.
		return Decision{Model: m, Operation: op}, nil
	case !oldExclusive && newClass.Exclusive:
		return Decision{}, refuse(Infeasible, ReasonInconsistentCPUAllocation,
			"container %s would move from the shared pool to %d exclusive CPUs (a whole-CPU request in a Guaranteed pod); a resize cannot change the CPU pool",
			display, newClass.CPUs)
	}

	assigned, n := a.Assigned(), newClass.CPUs
	op = resizeOperation(assigned.Size(), n)
	if n == assigned.Size() {
		return Decision{Model: m, Target: p.targetUpdate(c.ID, display, a.Held()), Operation: op}, nil
	}
	if err := p.admitResize(display, a, n); err != nil {
		return Decision{}, err
	}
	if n < assigned.Size() {
		return p.shrink(m, c, display, a, n)
	}
	return p.grow(m, c, display, a, n)
}

// admitResize refuses a change of an exclusive container's CPU count to n
// that the configuration or KEP-5554 forbids, whatever the free CPUs: in-place
// resize disabled, a count full-pcpus-only cannot align, a shrink below the
// baseline CPUs.
func (p *Policy) admitResize(display string, a state.Assignment, n int) error {
	assigned := a.Assigned()
	switch {
	case !p.opts.InPlaceResize:
		return refuse(Infeasible, ReasonFeatureDisabled,
			"in-place resize of exclusive CPUs is disabled (inPlaceResize: false): container %s keeps its %d CPUs %s, requested %d",
			display, assigned.Size(), assigned, n)
	case !p.smtAligned(n):
		return refuse(Infeasible, ReasonSMTAlignment,
			"container %s requests %d CPUs, not a multiple of the %d threads per core that full-pcpus-only requires; it keeps %s",
			display, n, p.topo.ThreadsPerCore(), assigned)
	case n < a.Baseline.Size():
		return refuse(Infeasible, ReasonProhibitedCPUAllocation,
			"container %s cannot shrink to %d CPUs: its baseline exclusive CPUs %s (%d CPUs) must be kept; it keeps %s",
			display, n, a.Baseline, a.Baseline.Size(), assigned)
	}
	return nil
}

// shrink keeps the baseline CPUs and releases the least compact rest that
// the topology rules allow. The released CPUs join the shared pool only
// once the runtime confirmed the shrink (Confirm): until then they belong
// to nobody. With a scale-down delay the container keeps them until the
// delay is over (Assignment.Delayed, ReleaseDelayed): its cpuset does not
// change now, and its application has that long to move its threads off
// them.
func (p *Policy) shrink(m *Model, c Container, display string, a state.Assignment, n int) (Decision, error) {
	assigned := a.Assigned()
	nm := m.Clone()
	kept, err := p.shrinkTo(nm, c.Pod.UID, c.Name, display, a, n)
	if err != nil {
		return Decision{}, err
	}
	released := assigned.Difference(kept)
	shrunk := a
	shrunk.Resized = kept
	note := fmt.Sprintf("%s: shrinks %s → %s, releases %s after the runtime confirms", display, assigned, kept, released)
	if delay := p.opts.ScaleDownDelay; delay > 0 {
		shrunk.Delayed, shrunk.ReleaseAt = a.Delayed.Union(released), p.opts.Now().Add(delay)
		note = fmt.Sprintf("%s: shrinks %s → %s; keeps %s until %s (scaleDownDelay: %s)",
			display, assigned, kept, shrunk.Delayed, shrunk.ReleaseAt.UTC().Format(time.RFC3339), delay)
	}
	nm.State.SetAssignment(c.Pod.UID, c.Name, shrunk)
	if p.opts.ScaleDownDelay <= 0 {
		// CPUs another entry of the pod holds (an init container's it
		// took) stay the pod's; the rest belong to nobody until the
		// runtime confirms the shrink.
		given := released.Difference(nm.podHeld(c.Pod.UID, c.Name))
		p.returnToPool(nm, given)
		nm.Releasing[c.ID] = nm.Releasing[c.ID].Union(given)
	}
	p.track(nm, c, display)
	return Decision{
		Model:     nm,
		Target:    p.targetUpdate(c.ID, display, shrunk.Held()),
		Operation: OpDecrease,
		Notes:     []string{note},
	}, nil
}

// ReleaseDelayed ends the scale-down delays that are over: each running
// container that kept CPUs past a decrease shrinks to its assigned CPUs
// (Decision.Others, an unsolicited update); the CPUs it gives up belong to
// nobody until the runtime applied that (Releasing, Confirm), then join
// the shared pool, or stay held for the pod while its resize is in flight.
// A delay of a container that does not run ends at once.
func (p *Policy) ReleaseDelayed(m *Model) Decision {
	now := p.opts.Now()
	var due []state.ContainerRef
	for ref, a := range m.State.Assignments() {
		if !a.Delayed.IsEmpty() && !now.Before(a.ReleaseAt) {
			due = append(due, ref)
		}
	}
	if len(due) == 0 {
		return Decision{Model: m}
	}
	slices.SortFunc(due, func(x, y state.ContainerRef) int { return strings.Compare(x.PodUID+"/"+x.Name, y.PodUID+"/"+y.Name) })
	nm := m.Clone()
	var updates []Update
	var notes []string
	for _, ref := range due {
		a, _ := nm.State.Assignment(ref.PodUID, ref.Name)
		delayed := a.Delayed
		a.Delayed, a.ReleaseAt = cpuset.New(), time.Time{}
		nm.State.SetAssignment(ref.PodUID, ref.Name, a)
		id, owned := nm.State.ContainerIDOf(ref)
		t := nm.Containers.Get(id)
		if !owned || t == nil || t.Stopped {
			p.giveBack(nm, ref.PodUID, delayed)
			continue
		}
		given := delayed.Difference(nm.podHeld(ref.PodUID, ""))
		p.returnToPool(nm, given)
		nm.Releasing[id] = nm.Releasing[id].Union(given)
		if pod := (Pod{UID: ref.PodUID}); p.hold(nm, pod, given) {
			notes = append(notes, fmt.Sprintf("%s: its pod's resize is in flight; %s are held for the pod", t.Display, given))
		}
		updates = append(updates, *p.targetUpdate(id, t.Display, a.Held()))
		notes = append(notes, fmt.Sprintf("%s: its scale-down delay is over; releases %s, runs on %s", t.Display, delayed, a.Held()))
	}
	return Decision{Model: nm, Others: updates, Notes: notes}
}

// shrinkTo chooses the n CPUs a shrink keeps: the baseline ones and the
// most compact of the rest, inside the NUMA affinity the topology manager
// policy admits for n CPUs (for the pod's CPUs under the pod scope) — a
// shrink obeys the policy as a growth does, so it never keeps a shape a
// growth would be refused. When no choice of the assigned CPUs is allowed
// it is refused.
func (p *Policy) shrinkTo(m *Model, podUID, name, display string, a state.Assignment, n int) (cpuset.CPUSet, error) {
	assigned := a.Assigned()
	pl := placement{keep: a.Baseline, n: n, devices: p.devicesOf(m, podUID, name, 0)}
	if p.opts.TopologyScope == cpuallocator.ScopePod {
		// The pod's other CPUs, but those the container runs on too
		// (its init containers' it took): the shrink keeps some of
		// them, and the others stay the init containers', so they never
		// add to the pod's count.
		pl.pod = m.podHeld(podUID, name).Difference(assigned)
	}
	affinity, err := p.admitTopology(pl, maskOf(assigned.Difference(a.Baseline)))
	if err != nil {
		return cpuset.New(), refuse(Infeasible, ReasonResizeAllocateCPUs,
			"cannot shrink container %s from %s to %d CPUs keeping %s: no choice of its CPUs is allowed: %v",
			display, assigned, n, a.Baseline, err)
	}
	from := assigned
	if affinity != 0 {
		from = assigned.Intersection(p.topo.CPUsInNUMANodes(affinity)).Union(a.Baseline)
	}
	// CPUs its pod's init containers hold too (it took them from them)
	// are kept first: giving them up would not give them back.
	if shared := from.Intersection(m.podHeld(podUID, name)).Difference(a.Baseline); !shared.IsEmpty() {
		keep, within := a.Baseline.Union(shared), from
		if keep.Size() > n {
			keep, within = a.Baseline, keep
		}
		if kept, err := p.alloc.Shrink(within, keep, n); err == nil {
			return kept, nil
		}
	}
	kept, err := p.alloc.Shrink(from, a.Baseline, n)
	if err != nil {
		return cpuset.New(), refuse(Infeasible, ReasonResizeAllocateCPUs,
			"cannot shrink container %s from %s to %d CPUs keeping %s: %v", display, assigned, n, a.Baseline, err)
	}
	return kept, nil
}

// grow keeps every assigned CPU and adds free ones (those it keeps past a
// decrease first, then those held for its pod and its pod's reusable
// ones); the shared containers shrink first (Others), then the target
// grows.
func (p *Policy) grow(m *Model, c Container, display string, a state.Assignment, n int) (Decision, error) {
	assigned := a.Assigned()
	pl := p.growth(m, c.Pod, c.Name, assigned, n)
	free, poolLeft := p.availability(m)
	if !a.Delayed.IsEmpty() {
		if kept := a.Delayed.Size(); assigned.Size()+kept >= n {
			pl.borrowed = maskOf(a.Delayed) // its own, at no cost
		} else {
			pl.keep = assigned.Union(a.Delayed)
		}
	}
	cpus, err := p.placeGrowth(pl, free, poolLeft)
	if err != nil {
		return Decision{}, refuse(Infeasible, ReasonResizeAllocateCPUs,
			"cannot grow container %s from %d to %d exclusive CPUs keeping %s (free: %s%s): %v",
			display, assigned.Size(), n, assigned, describe(free.CPUSet()), m.lentNote(), err)
	}
	nm := m.Clone()
	grown := a
	grown.Resized = cpus
	if grown.Delayed = a.Delayed.Difference(cpus); grown.Delayed.IsEmpty() {
		grown.ReleaseAt = time.Time{}
	}
	nm.State.SetAssignment(c.Pod.UID, c.Name, grown)
	p.tookGrowth(nm, c.Pod.UID, c.Name, assigned, cpus)
	p.track(nm, c, display)
	return Decision{
		Model:       nm,
		Target:      p.targetUpdate(c.ID, display, grown.Held()),
		PoolChanged: poolChanged(m, nm),
		Operation:   OpIncrease,
		Notes:       []string{fmt.Sprintf("%s: grows %s → %s", display, assigned, cpus)},
	}, nil
}

// placeGrowth places a growth. Under isolatedCPUs: exclusive the isolated
// CPUs come first, as for a creation: when the free isolated CPUs can hold
// the growth under the topology manager policy, it takes only them, even
// on a NUMA node its CPUs do not use yet (the other CPUs are the shared
// pool's: a growth that took them while isolated ones are free would
// starve the shared containers). Otherwise it is placed as any growth,
// the allocator still preferring isolated CPUs within the NUMA nodes the
// topology rules choose.
func (p *Policy) placeGrowth(pl placement, free cpumask.Mask, poolLeft int) (cpuset.CPUSet, error) {
	if p.beyondPool {
		isolated := free.AndNot(p.poolBaseMask)
		if isolated.Count() >= pl.n-pl.keep.Size() {
			if cpus, err := p.place(pl, isolated, poolLeft); err == nil {
				return cpus, nil
			}
		}
	}
	return p.place(pl, free, poolLeft)
}

// track records that a container owns the assignment of its name (its
// cpuset follows from it: Model.CPUsOf).
func (p *Policy) track(m *Model, c Container, display string) {
	if m.Containers.Get(c.ID) == nil {
		m.add(&Tracked{ID: c.ID, PodUID: c.Pod.UID, Name: c.Name, Display: display, Exclusive: true, DeviceNodes: c.DeviceNodes})
	}
	m.State.SetContainer(c.ID, state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name})
}

func (p *Policy) targetUpdate(id, display string, cpus cpuset.CPUSet) *Update {
	return &Update{ContainerID: id, Display: display, CPUs: maskOf(cpus), Mems: p.mems(cpus)}
}

// RequestedOperation classifies the CPU change a resize request asks for
// (by CPU limit, or request for containers without a limit), whatever
// becomes of it.
func RequestedOperation(c Container, update Resources) Operation {
	qos := c.Pod.QoS()
	return operation(Classify(qos, c.Resources), Classify(qos, MergeResources(c.Resources, update)))
}

// resizeOperation classifies a change of exclusive CPU count.
func resizeOperation(from, to int) Operation {
	switch {
	case to > from:
		return OpIncrease
	case to < from:
		return OpDecrease
	}
	return OpUnchanged
}

// operation classifies a change of CPU limit (in milli-CPU, falling back to
// the request for containers without a limit).
func operation(from, to Class) Operation {
	f, t := from.LimitMilli, to.LimitMilli
	if f == 0 && t == 0 {
		f, t = from.RequestMilli, to.RequestMilli
	}
	return resizeOperation(int(f), int(t))
}
