package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// CreateContainer decides the cpuset of a container being created. A
// shared container gets the shared pool. An exclusive container gets N CPUs
// — those of its pod's ordinary init containers first, as the kubelet's
// static policy reuses them (reusable), then free ones — and every running
// shared container is shrunk to the new shared pool (Decision.Others,
// applied by the runtime before the new container is created). A
// container re-created under a pod and name that hold an assignment (a
// restart, a sandbox re-creation) gets exactly those CPUs back (recreate).
// A refusal changes nothing.
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
	if t := m.Containers.Get(c.ID); t != nil && !t.Stopped {
		return Decision{}, refuse(Infeasible, ReasonInvalidContainerID,
			"container id %s of %s already names running container %s", c.ID, display, t.Display)
	}
	admitted, admission, err := p.admitPod(m, c.Pod)
	if err != nil {
		return Decision{}, err
	}
	d, err := p.createIn(admitted, c, display)
	if err != nil || admitted == m {
		return d, err
	}
	// The pod was admitted with this creation: the shared containers
	// shrink from where they ran before it.
	d.PoolChanged = d.PoolChanged || poolChanged(m, d.Model)
	d.Notes = append(admission, d.Notes...)
	return d, nil
}

// createIn creates container c on a model in which its pod is admitted
// (when its spec is known).
func (p *Policy) createIn(m *Model, c Container, display string) (Decision, error) {
	class := Classify(c.Pod.QoS(), c.Resources)
	t := &Tracked{ID: c.ID, PodUID: c.Pod.UID, Name: c.Name, Display: display, Exclusive: class.Exclusive,
		CPULimitMilli: cpuLimitMilli(c.Resources), SandboxID: c.Pod.SandboxID, Role: c.Pod.RoleOf(c.Name), DeviceNodes: c.DeviceNodes,
		RanBeside: m.runningNames(c.Pod.UID, c.Name)}
	if Untrackable(c) != "" {
		// It runs on the shared pool: the plugin warns once.
		return p.createShared(m, t, nil)
	}
	if a, ok := m.State.Assignment(c.Pod.UID, c.Name); ok {
		return p.recreate(m, c, t, class, a)
	}
	if !class.Exclusive {
		return p.createShared(m, t, nil)
	}
	reuse, lenders := m.lendersFor(c.Pod, c.Name, class.CPUs)
	if note := beyondPodLimit(m, c, class.CPUs, reuse); note != "" {
		return p.createShared(m, t, []string{note})
	}
	nm := m.Clone()
	cpus, err := p.allocateFor(nm, c, display, class.CPUs, reuse)
	if err != nil {
		return Decision{}, err
	}
	var notes []string
	if reused := cpus.Intersection(reuse.CPUSet()); !reused.IsEmpty() {
		notes = append(notes, fmt.Sprintf("%s: reuses CPUs %s of its pod's init containers %s", display, reused, strings.Join(lenders, ", ")))
	}
	for _, name := range lenders {
		// A container taken for an init container (its pod's spec is not
		// known) is one from now on: its CPUs are its pod's to reuse.
		if a, _ := nm.State.Assignment(c.Pod.UID, name); !a.Init {
			a.Init = true
			nm.State.SetAssignment(c.Pod.UID, name, a)
		}
	}
	nm.State.SetAssignment(c.Pod.UID, c.Name, state.Assignment{Baseline: cpus, Init: c.Pod.RoleOf(c.Name) == RoleInit,
		DeviceNodes: deviceRecord(c.DeviceNodes)})
	nm.State.SetContainer(c.ID, state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name})
	p.takeFromPool(nm, cpus)
	nm.add(t)
	nm.clearEnding(c.Pod.UID)
	return Decision{
		Model:       nm,
		Target:      p.targetUpdate(c.ID, display, cpus),
		PoolChanged: poolChanged(m, nm),
		Notes:       notes,
	}, nil
}

// createShared starts a container on the shared pool.
func (p *Policy) createShared(m *Model, t *Tracked, notes []string) (Decision, error) {
	nm := m.Clone()
	t.Exclusive = false
	nm.add(t)
	nm.clearEnding(t.PodUID)
	return Decision{Model: nm, Target: &Update{ContainerID: t.ID, Display: t.Display, CPUs: nm.sharedMask()}, Notes: notes}, nil
}

// recreate handles a container created under a pod and name that hold an
// assignment: the kubelet re-creates a container that exited (crash, OOM
// kill, failed probe) with a new id and the same name, and every container
// of a pod whose sandbox it re-created; each gets exactly the CPUs it
// had: its baseline CPUs stay its baseline ones for the pod's whole life,
// as the kubelet's static policy keeps the (pod, container) entry across
// restarts. The kubelet re-creates it with the resources it last accepted
// for it, which may differ from what it ran on when a resize was refused:
// fewer CPUs, down to its baseline, are a shrink by the resize rules,
// more a growth; a count the resize rules refuse (below the baseline, a
// growth that cannot be placed, another CPU pool) does not keep it from
// starting: it restarts on the CPUs it held, and a warning says so
// (KEP-5554: a restart never takes away a container's CPUs). A restart
// never refuses. A predecessor still running under the name (its stop was
// never seen) loses its claim and runs on the shared pool, before the new
// container starts.
func (p *Policy) recreate(m *Model, c Container, t *Tracked, class Class, a state.Assignment) (Decision, error) {
	display := t.Display
	nm := m.Clone()
	demoted, notes := p.takeOver(nm, c)
	var warnings []string
	if rec := deviceRecord(c.DeviceNodes); a.DeviceNodes != rec {
		// Its devices as looked up at this creation.
		a.DeviceNodes = rec
		nm.State.SetAssignment(c.Pod.UID, c.Name, a)
	}
	if !a.Delayed.IsEmpty() {
		// A release still delayed is done: the new container starts on
		// its assigned CPUs.
		delayed := a.Delayed
		a.Delayed, a.ReleaseAt = cpuset.New(), time.Time{}
		nm.State.SetAssignment(c.Pod.UID, c.Name, a)
		p.giveBack(nm, c.Pod.UID, delayed)
	}
	first := m.neverCreated(c.Pod.UID, c.Name)
	if first && !p.onDeviceNodes(a.Assigned(), p.devicesOf(nm, c.Pod.UID, c.Name, c.DeviceNodes)) {
		// Admitted before its devices were known (an NRI sandbox has none):
		// it has not run on its CPUs yet, and its devices' NUMA nodes
		// decide them, as the kubelet's topology manager merges the device
		// plugin's hints into the pod's admission.
		placed, err := p.placeForDevices(nm, c, display, a)
		if err != nil {
			return Decision{}, err
		}
		if !placed.Assigned().Equals(a.Assigned()) {
			notes = append(notes, fmt.Sprintf("%s: its devices are on NUMA nodes %s: it takes %s instead of the CPUs %s its pod's admission gave it",
				display, c.DeviceNodes, placed.Assigned(), a.Assigned()))
		}
		a = placed
	}
	a, moved := p.relocate(nm, c, display, a)
	warnings = append(warnings, moved...)
	assigned, n := a.Assigned(), class.CPUs
	cpus := assigned
	var unapplied *Refusal
	switch {
	case !class.Exclusive:
		warnings = append(warnings, fmt.Sprintf("%s: re-created on the shared pool's terms (%s), but its pod and name hold the exclusive CPUs %s: it restarts on them (a restart cannot change the CPU pool); put the pod's resize back",
			display, class.Why, assigned))
		unapplied = refuse(Infeasible, ReasonInconsistentCPUAllocation, "container %s was re-created on the shared pool's terms (%s) and restarts on its exclusive CPUs %s: a resize cannot change the CPU pool",
			display, class.Why, assigned)
	case n < a.Baseline.Size():
		warnings = append(warnings, fmt.Sprintf("%s: re-created with %d CPUs, fewer than its %d baseline CPUs %s (a resize below them was refused, and the restart asks for it again): it restarts on its CPUs %s; put the resize back to at least %d CPUs",
			display, n, a.Baseline.Size(), a.Baseline, assigned, a.Baseline.Size()))
		unapplied = refuse(Infeasible, ReasonProhibitedCPUAllocation, "container %s was re-created with %d CPUs and restarts on its CPUs %s: its baseline exclusive CPUs %s (%d CPUs) must be kept",
			display, n, assigned, a.Baseline, a.Baseline.Size())
	case n < assigned.Size():
		kept, err := p.restartSize(nm, c, display, a, n)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: restarts on its CPUs %s, not on %d: %v", display, assigned, n, err))
			unapplied = unappliedRestart(display, assigned, n, err)
			break
		}
		cpus = kept
		nm.State.SetAssignment(c.Pod.UID, c.Name, state.Assignment{Baseline: a.Baseline, Resized: cpus, Init: a.Init, DeviceNodes: a.DeviceNodes})
		p.giveBack(nm, c.Pod.UID, assigned.Difference(kept))
	case n > assigned.Size():
		grown, err := p.restartSize(nm, c, display, a, n)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: restarts on its CPUs %s, not on %d: %v", display, assigned, n, err))
			unapplied = unappliedRestart(display, assigned, n, err)
			break
		}
		cpus = grown
		nm.State.SetAssignment(c.Pod.UID, c.Name, state.Assignment{Baseline: a.Baseline, Resized: cpus, Init: a.Init, DeviceNodes: a.DeviceNodes})
		p.tookGrowth(nm, c.Pod.UID, c.Name, assigned, grown)
	}
	switch {
	case first && !cpus.Equals(assigned):
		notes = append(notes, fmt.Sprintf("%s: created with %d CPUs, its pod admitted with %d: %s → %s", display, n, assigned.Size(), assigned, cpus))
	case first:
		notes = append(notes, fmt.Sprintf("%s: created on the exclusive CPUs %s its pod's admission gave it", display, cpus))
	case !cpus.Equals(assigned):
		notes = append(notes, fmt.Sprintf("%s: re-created with %d CPUs: %s → %s", display, n, assigned, cpus))
	default:
		notes = append(notes, fmt.Sprintf("%s: re-created, keeps its exclusive CPUs %s", display, cpus))
	}
	nm.State.SetContainer(c.ID, state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name})
	t.Exclusive = true
	if t.Role == RoleUnknown {
		t.Role = m.roleOf(c.Pod.UID, c.Name)
	}
	nm.add(t)
	nm.clearEnding(c.Pod.UID)
	return Decision{
		Model:       nm,
		Target:      p.targetUpdate(c.ID, display, cpus),
		Others:      twinUpdates(nm, demoted),
		PoolChanged: poolChanged(m, nm),
		Notes:       notes,
		Warnings:    warnings,
		Unapplied:   unapplied,
	}, nil
}

// unappliedRestart is the refusal of the count a container was re-created
// with, which the resize rules did not allow (err): it restarted on its
// CPUs assigned.
func unappliedRestart(display string, assigned cpuset.CPUSet, n int, err error) *Refusal {
	if r, ok := AsRefusal(err); ok {
		return refuse(r.Verdict, r.Reason, "container %s was re-created with %d CPUs and restarts on its CPUs %s: %s", display, n, assigned, r.Message)
	}
	return refuse(Infeasible, ReasonResizeAllocateCPUs, "container %s was re-created with %d CPUs and restarts on its CPUs %s: cannot grow it: %v", display, n, assigned, err)
}

// placeForDevices places again, on the NUMA nodes of its devices, the
// entry a of a container its pod's admission placed before its devices
// were known (it has not run on it): the entry's CPUs go back (but those
// its pod's other entries hold) and its count is placed anew with the
// device hint, reusing its pod's init containers' CPUs first, as at
// admission. When no placement honours the devices, best-effort keeps
// the admitted CPUs (the topology manager would have admitted the pod
// elsewhere), single-numa-node and restricted refuse the creation
// (TopologyAffinityError), changing nothing.
func (p *Policy) placeForDevices(m *Model, c Container, display string, a state.Assignment) (state.Assignment, error) {
	trial := m.Clone()
	trial.State.DeleteAssignment(c.Pod.UID, c.Name)
	p.giveBack(trial, c.Pod.UID, a.Held())
	reuse, _ := trial.reusable(c.Pod, c.Name)
	cpus, err := p.allocateFor(trial, c, display, a.Assigned().Size(), reuse)
	if err != nil {
		if p.opts.TopologyPolicy == cpuallocator.TopologyBestEffort {
			return a, nil
		}
		return a, err
	}
	placed := state.Assignment{Baseline: cpus, Init: a.Init, DeviceNodes: deviceRecord(c.DeviceNodes)}
	trial.State.SetAssignment(c.Pod.UID, c.Name, placed)
	p.takeFromPool(trial, cpus)
	*m = *trial
	return placed, nil
}

// restartSize is the cpuset a re-created container asks n CPUs of (its
// baseline count or more), by the resize rules: a shrink keeps the
// baseline and the most compact rest, a growth takes free CPUs.
func (p *Policy) restartSize(m *Model, c Container, display string, a state.Assignment, n int) (cpuset.CPUSet, error) {
	if err := p.admitResize(display, a, n); err != nil {
		return cpuset.New(), err
	}
	if n < a.Assigned().Size() {
		return p.shrinkTo(m, c.Pod.UID, c.Name, display, a, n)
	}
	pl := p.growth(m, c.Pod, c.Name, a.Assigned(), n)
	free, poolLeft := p.availability(m)
	return p.placeGrowth(pl, free, poolLeft)
}

// relocate moves the CPUs of a re-created container's entry that a
// running container of its pod holds — a container taken for an init
// container without the pod's spec, whose CPUs its pod's later containers
// took, that turned out to be a sidecar or an app container — to free
// ones: a CPU never runs two containers. Its baseline keeps what is left
// of it and gains the new CPUs. The kubelet never gets there: it knows
// which containers are init containers. It returns the entry and a
// warning when it moved CPUs.
func (p *Policy) relocate(m *Model, c Container, display string, a state.Assignment) (state.Assignment, []string) {
	busy := a.Assigned().Intersection(m.runningCPUs(c.Pod.UID, c.Name))
	if busy.IsEmpty() {
		return a, nil
	}
	keep := a.Assigned().Difference(busy)
	free, poolLeft := p.availability(m)
	cpus, err := p.place(placement{keep: keep, n: a.Assigned().Size(), devices: p.devicesOf(m, c.Pod.UID, c.Name, c.DeviceNodes)}, free, poolLeft)
	if err != nil {
		// Nowhere to go: it keeps the CPUs nobody runs on, at least one.
		if keep.IsEmpty() {
			keep = cpuset.New(busy.List()[0])
		}
		cpus = keep
	}
	baseline := a.Baseline.Difference(busy).Union(cpus.Difference(a.Assigned()))
	if baseline.IsEmpty() {
		baseline = cpus
	}
	moved := state.Assignment{Baseline: baseline, Init: a.Init, DeviceNodes: a.DeviceNodes}
	if !baseline.Equals(cpus) {
		moved.Resized = cpus
	}
	m.State.SetAssignment(c.Pod.UID, c.Name, moved)
	p.takeFromPool(m, cpus.Difference(a.Assigned()))
	return moved, []string{fmt.Sprintf("%s: its CPUs %s run its pod's container(s) %s, which took them when it had stopped (its pod's spec is not known, and it was taken for an init container): it restarts on %s instead of %s",
		display, busy, strings.Join(m.runningNamesOn(c.Pod.UID, busy), ", "), cpus, a.Assigned())}
}

// beyondPodLimit returns the note saying that a container asking for n
// exclusive CPUs runs on the shared pool instead because its pod's CPU
// limit cannot hold them next to the exclusive CPUs the pod holds (but the
// reusable ones it takes first) ("" when it can, or when the pod's limit
// is unknown). Only pod-level resources (KEP-2837) lead there: a container
// without a CPU limit of its own gets the pod's, with the shares to match,
// and so looks exclusive; pinning each such container would give the pod
// more CPUs than its limit. (The kubelet's static policy pins no container
// of such a pod; the runtime's data do not tell them from other pods, so
// the plugin pins what fits.)
func beyondPodLimit(m *Model, c Container, n int, reuse cpumask.Mask) string {
	res, known := m.PodResources(c.Pod)
	limit := cpuLimitMilli(res)
	if !known || limit == 0 {
		return ""
	}
	held := m.podHeld(c.Pod.UID, c.Name).Size()
	if int64(held+max(0, n-reuse.Count()))*milliCPUPerCPU <= limit {
		return ""
	}
	display := displayName(c.Pod, c.Name)
	if held == 0 {
		return fmt.Sprintf("%s: runs on the shared pool: its %d CPUs exceed its pod's CPU limit of %dm", display, n, limit)
	}
	return fmt.Sprintf("%s: runs on the shared pool: its %d CPUs and the %d exclusive CPUs of its pod's other containers exceed the pod's CPU limit of %dm (pod-level resources: containers without a CPU limit of their own share the pod's)",
		display, n, held, limit)
}

// twinUpdates returns, in id order, the shared-pool update of each
// container reuseEntry turned shared (ids). Their update shrinks them off
// the CPUs they leave, so it comes first (Decision.Others: the other
// shared containers' follow when the pool changed).
func twinUpdates(nm *Model, ids []string) []Update {
	var twins []Update
	for _, id := range ids {
		twins = append(twins, Update{ContainerID: id, Display: nm.Containers.Get(id).Display, CPUs: nm.sharedMask()})
	}
	slices.SortFunc(twins, func(a, b Update) int { return strings.Compare(a.ContainerID, b.ContainerID) })
	return twins
}

// takeOver makes container c the owner of its pod and name's assignment:
// the ids that owned it lose their claim. A predecessor that is not known
// stopped may still run: it runs on the shared pool (the caller sends it
// there before the new container starts, see twinUpdates: demoted names
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
		if old := m.Containers.Get(id); old != nil && !old.Stopped {
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
// refuses: the reusable CPUs of its pod first (all of them when they
// cannot hold n), then the CPUs held for its pod while its resize is in
// flight, then free ones.
func (p *Policy) allocateFor(m *Model, c Container, display string, n int, reuse cpumask.Mask) (cpuset.CPUSet, error) {
	pl := placement{keep: cpuset.New(), n: n, borrowed: reuse.Or(m.heldFor(c.Pod.UID)), reuse: reuse, devices: p.devicesOf(m, c.Pod.UID, c.Name, c.DeviceNodes)}
	pl.pod, pl.podNeed = p.podScope(m, c.Pod, c.Name, n, reuse)
	cpus, err := p.placeNew(m, display, pl)
	if err != nil {
		return cpuset.New(), err
	}
	p.takeHeld(m, c.Pod.UID, cpus)
	return cpus, nil
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
	if errors.Is(err, errTopologyPolicy) || p.admitsNUMAHints() {
		// Under single-numa-node and restricted the kubelet's topology
		// manager refuses a container it cannot place before its CPU
		// manager allocates anything, a shortfall of CPUs included: the
		// static policy offers no hint that holds it
		// (generateCPUTopologyHints), and the policy admits no hint
		// without one.
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
