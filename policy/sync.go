package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// Synchronize reconciles the model with the runtime's full view of pods
// and containers (NRI Synchronize, on every (re)connection), as docs/design.md
// "Restart and recovery" says:
//   - assignments of containers that no longer run are dropped;
//   - running exclusive containers without an assignment are adopted,
//     keeping their current cpuset when it is valid (the right size, not
//     reserved, disjoint from every other exclusive set, leaving the shared
//     pool non-empty) and else given fresh CPUs — so a lost or corrupt
//     checkpoint is rebuilt from the runtime's view;
//   - a pinned container whose CPU count changed while the plugin was not
//     connected (containerd applies a resize without a disconnected
//     plugin, and the kubelet does not retry it) is resized by the usual
//     rules, or keeps its CPUs when the resize would be refused;
//   - every container whose cpuset differs from what it should be gets an
//     update: the recorded cpuset for exclusive containers, the shared
//     pool for the others.
//
// The updates come in an order that removes CPUs before adding any:
// containers that only lose CPUs first, then those that lose some and gain
// others (so that they release what the next ones gain), then those that
// only gain.
func (p *Policy) Synchronize(m *Model, pods []Pod, containers []Container) Decision {
	nm := NewModel(m.State.Clone())
	nm.Lending = m.Lending.Clone()
	nm.State.DeleteContainers()
	var notes []string
	for _, pod := range pods {
		if pod.UID != "" && pod.SandboxID != "" {
			// Not confirmed: the runtime may have restarted since the
			// sandbox ran, and would then never report its removal.
			nm.setSandbox(pod.SandboxID, Sandbox{PodUID: pod.UID})
		}
		if m.Ending[pod.UID] {
			nm.Ending[pod.UID] = true
		}
	}

	live, dropped := liveContainers(containers)
	notes = append(notes, dropped...)
	byRef := map[state.ContainerRef]*Container{}
	for _, c := range live {
		if Untrackable(*c) != "" {
			continue // runs on the shared pool (the plugin warns once)
		}
		ref := state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name}
		if prev, dup := byRef[ref]; dup {
			// Twins: the one the checkpoint says holds the name's CPUs
			// keeps them (the newer one, when the plugin saw it created),
			// else the lowest id; the other runs on the shared pool.
			keep, other := prev, c
			if owner, ok := m.State.ContainerIDOf(ref); ok && owner == c.ID {
				keep, other = c, prev
			}
			byRef[ref] = keep
			notes = append(notes, fmt.Sprintf("%s: containers %s and %s share a name; %s is treated as shared",
				displayName(c.Pod, c.Name), keep.ID, other.ID, other.ID))
			continue
		}
		byRef[ref] = c
	}
	notes = append(notes, p.dropStaleEntries(nm, pods, containers)...)
	p.dropStalePods(nm, pods, live)
	for _, c := range exited(containers) {
		// Tracked stopped: the pod keeps its CPUs for their restart, and
		// their removal tells when the pod's last container is gone.
		nm.add(&Tracked{ID: c.ID, PodUID: c.Pod.UID, Name: c.Name, Display: displayName(c.Pod, c.Name), Stopped: true,
			Completed: c.Completed, SandboxID: c.Pod.SandboxID, Role: c.Pod.RoleOf(c.Name), CPULimitMilli: cpuLimitMilli(c.Resources), DeviceNodes: c.DeviceNodes,
			RanBeside: m.ranBesideOf(c.ID)})
	}
	// From here on the pool is kept in step with every assignment made:
	// the free CPUs are read off it (Policy.taken).
	p.recomputePool(nm)

	var adopt, resized []*Container
	for _, c := range live {
		display := displayName(c.Pod, c.Name)
		class := Classify(c.Pod.QoS(), c.Resources)
		t := &Tracked{ID: c.ID, PodUID: c.Pod.UID, Name: c.Name, Display: display, Exclusive: class.Exclusive,
			CPULimitMilli: cpuLimitMilli(c.Resources), SandboxID: c.Pod.SandboxID, Role: c.Pod.RoleOf(c.Name), DeviceNodes: c.DeviceNodes,
			RanBeside: m.ranBesideOf(c.ID)}
		nm.add(t)
		ref := state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name}
		if byRef[ref] != c {
			t.Exclusive = false
			continue
		}
		a, has := nm.State.Assignment(c.Pod.UID, c.Name)
		switch {
		case has:
			t.Exclusive = true
			nm.State.SetContainer(c.ID, ref)
			if rec := deviceRecord(c.DeviceNodes); a.DeviceNodes != rec {
				// This Synchronize's lookup replaces the recorded one.
				a.DeviceNodes = rec
				nm.State.SetAssignment(c.Pod.UID, c.Name, a)
			}
			if !class.Exclusive {
				notes = append(notes, fmt.Sprintf("%s: holds exclusive CPUs %s but %s; keeping them", display, a.Assigned(), class.Why))
			} else if class.CPUs != a.Assigned().Size() {
				resized = append(resized, c)
			}
		case class.Exclusive:
			adopt = append(adopt, c)
		}
	}
	nm.keepRemovedLimitsOf(m)
	notes = append(notes, p.adopt(nm, adopt)...)
	// Shrinks first, so that growths can use the CPUs they release.
	sort.SliceStable(resized, func(i, j int) bool { return p.missedShrink(nm, resized[i]) && !p.missedShrink(nm, resized[j]) })
	for _, c := range resized {
		notes = append(notes, p.resizeMissed(nm, c))
	}
	for _, uid := range slices.Sorted(maps.Keys(nm.Ending)) {
		if !nm.podRuns(uid) {
			notes = append(notes, p.endPod(nm, uid, "the Kubernetes API reported it ended and none of its containers runs")...)
		}
	}
	for _, uid := range nm.State.PodUIDs() {
		// (No sandbox is confirmed after a Synchronize; nm.Idle is its own.)
		if since, was := m.Idle[uid]; was && !nm.podRuns(uid) {
			nm.Idle[uid] = since
		} else if nm.idle(uid) {
			nm.Idle[uid] = p.opts.Now()
		}
	}
	// The pool was kept in step with every assignment above (no recompute
	// that would hide a step that was not: CheckInvariants checks it).

	current := map[string]cpuset.CPUSet{}
	for _, c := range live {
		current[c.ID] = c.CPUs
	}
	pool := nm.sharedMask()
	poolList := pool.String()
	// (shrinking, then moving, then growing: a first order that orderUpdates
	// keeps where it is safe.)
	var shrinking, moving, growing []Update
	for _, t := range nm.recs {
		id := t.ID
		want, list, mems := pool, poolList, cpuset.New()
		if a, ok := nm.ownAssignment(id); ok {
			want, list, mems = maskOf(a.Held()), "", p.mems(a.Held())
		}
		have := maskOf(current[id])
		if have.Equal(want) {
			continue
		}
		u := Update{ContainerID: id, Display: t.Display, CPUs: want, CPUList: list, Mems: mems}
		switch {
		case want.AndNot(have).IsEmpty():
			shrinking = append(shrinking, u)
		case have.AndNot(want).IsEmpty():
			growing = append(growing, u)
		default:
			moving = append(moving, u)
		}
	}
	ordered, stuck := orderUpdates(slices.Concat(shrinking, moving, growing), current, nm.Owns)
	if stuck > 0 {
		notes = append(notes, fmt.Sprintf("%d updates could not be ordered so that no container gains a CPU another still holds (the runtime's cpusets overlap, or containers trade CPUs); they come last", stuck))
	}
	return Decision{Model: nm, Others: ordered, Notes: notes}
}

// orderUpdates orders updates so that, applied one at a time to the
// containers' current cpusets, none gives a container a CPU it may not
// share with another that still holds it: an exclusive container (one
// exclusive(id) names) shares with nobody, a shared one with shared ones
// only. It keeps the given order where that is safe (the first update
// that is safe goes next); containers that would trade CPUs first shrink
// to what they keep, in an update of their own. Updates that still cannot
// be made safe (cpusets that overlap already, a container that keeps none
// of its CPUs and holds what another needs) come last, in the given order;
// stuck counts them.
func orderUpdates(updates []Update, current map[string]cpuset.CPUSet, exclusive func(id string) bool) (ordered []Update, stuck int) {
	var held holders
	masks := make(map[string]cpumask.Mask, len(current))
	for id, cpus := range current {
		m, _ := cpumask.Of(cpus) // runtime cpusets: no negative id
		masks[id] = m
		held.add(m, exclusive(id), 1)
	}
	// Each container is updated once: what it gains is known up front.
	type step struct {
		u           Update
		want, gains cpumask.Mask
		exclusive   bool
	}
	pending := make([]step, 0, len(updates))
	for _, u := range updates {
		want := u.CPUs
		pending = append(pending, step{u: u, want: want, gains: want.AndNot(masks[u.ContainerID]), exclusive: exclusive(u.ContainerID)})
	}
	for len(pending) > 0 {
		next := slices.IndexFunc(pending, func(s step) bool { return !held.conflicts(s.gains, s.exclusive) })
		if next < 0 {
			// Containers trade CPUs: one of them first gives up what it
			// will not keep (an extra update, shrinking it to what it
			// keeps; containerd applies a Synchronize's updates one by
			// one, in order), so that the others can take it.
			keepOf := func(s step) cpumask.Mask {
				cur := masks[s.u.ContainerID]
				if keep := cur.And(s.want); !keep.IsEmpty() {
					return keep
				}
				// It keeps none of them: it holds on to one, preferably
				// one nobody waits for, until its own CPUs are free.
				var needed cpumask.Mask
				for _, o := range pending {
					needed = needed.Or(o.gains)
				}
				for cpu := range cur.All() {
					if !needed.Has(cpu) {
						return single(cpu)
					}
				}
				for cpu := range cur.All() {
					return single(cpu)
				}
				return nil
			}
			i := slices.IndexFunc(pending, func(s step) bool {
				keep := keepOf(s)
				return !keep.IsEmpty() && !keep.Equal(masks[s.u.ContainerID])
			})
			if i < 0 {
				for _, s := range pending {
					ordered = append(ordered, s.u)
				}
				return ordered, len(pending)
			}
			s := pending[i]
			keep := keepOf(s)
			held.add(masks[s.u.ContainerID].AndNot(keep), s.exclusive, -1)
			masks[s.u.ContainerID] = keep
			step := s.u
			step.CPUs, step.CPUList = keep, ""
			ordered = append(ordered, step)
			continue
		}
		s := pending[next]
		pending = slices.Delete(pending, next, next+1)
		held.add(masks[s.u.ContainerID], s.exclusive, -1)
		held.add(s.want, s.exclusive, 1)
		ordered = append(ordered, s.u)
	}
	return ordered, 0
}

// single returns the mask of one CPU.
func single(cpu int) cpumask.Mask {
	var m cpumask.Mask
	m.Add(cpu)
	return m
}

// holders counts, per CPU, the exclusive and the shared containers whose
// cpuset holds it.
type holders struct{ exclusive, shared []int }

func (h *holders) add(m cpumask.Mask, exclusive bool, delta int) {
	for cpu := range m.All() {
		for cpu >= len(h.exclusive) {
			h.exclusive, h.shared = append(h.exclusive, 0), append(h.shared, 0)
		}
		if exclusive {
			h.exclusive[cpu] += delta
		} else {
			h.shared[cpu] += delta
		}
	}
}

// conflicts tells whether giving gains to a container (exclusive or not)
// that does not hold them would share a CPU it may not share.
func (h *holders) conflicts(gains cpumask.Mask, exclusive bool) bool {
	for cpu := range gains.All() {
		if cpu >= len(h.exclusive) {
			continue
		}
		if h.exclusive[cpu] > 0 || (exclusive && h.shared[cpu] > 0) {
			return true
		}
	}
	return false
}

// liveContainers returns the containers whose process may run, by id.
// Containers the plugin cannot address are left out with a note: those
// without an id, and every one but the first of those sharing an id (a
// runtime never reports two; the first one is kept so that one bad entry
// changes nothing else).
func liveContainers(containers []Container) ([]*Container, []string) {
	var live []*Container
	var notes []string
	seen := make(map[string]bool, len(containers))
	for i := range containers {
		c := &containers[i]
		switch {
		case c.Exited:
		case c.ID == "":
			notes = append(notes, fmt.Sprintf("%s: the runtime reports it without a container id; it is not tracked", displayName(c.Pod, c.Name)))
		case seen[c.ID]:
			notes = append(notes, fmt.Sprintf("%s: the runtime reports container id %s twice; this one is not tracked", displayName(c.Pod, c.Name), c.ID))
		default:
			seen[c.ID] = true
			live = append(live, c)
		}
	}
	sort.SliceStable(live, func(i, j int) bool { return live[i].ID < live[j].ID })
	return live, notes
}

// dropStaleEntries drops the assignments of pods that no longer exist:
// neither a sandbox nor a container (running or exited) of the pod is
// known to the runtime. An assignment whose container exited stays with
// its pod for the container's restart.
func (p *Policy) dropStaleEntries(m *Model, pods []Pod, containers []Container) []string {
	exists := map[string]bool{}
	for _, pod := range pods {
		exists[pod.UID] = true
	}
	for _, c := range containers {
		exists[c.Pod.UID] = true
	}
	var notes []string
	for _, uid := range m.State.PodUIDs() {
		if exists[uid] {
			continue
		}
		for _, name := range m.State.ContainersOfPod(uid) {
			a, _ := m.State.Assignment(uid, name)
			notes = append(notes, fmt.Sprintf("pod %s container %s: the pod is gone, releases %s", uid, name, a.Assigned()))
		}
		m.State.DeletePod(uid)
		m.forgetRemovedLimits(uid)
	}
	return notes
}

// exited returns the containers the runtime reports as exited, with an id,
// in id order.
func exited(containers []Container) []*Container {
	var out []*Container
	for i := range containers {
		if c := &containers[i]; c.Exited && c.ID != "" {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// dropStalePods forgets pod-level resources of pods that no longer exist.
func (p *Policy) dropStalePods(m *Model, pods []Pod, live []*Container) {
	exists := map[string]bool{}
	for _, pod := range pods {
		exists[pod.UID] = true
	}
	for _, c := range live {
		exists[c.Pod.UID] = true
	}
	for uid := range m.State.AllPodResources() {
		if !exists[uid] {
			m.State.DeletePodResources(uid)
		}
	}
}

// adopt gives assignments to running exclusive containers that have none:
// those whose current cpuset is valid keep it (oldest ids first, so a clash
// is resolved deterministically), the others get fresh CPUs when there are
// any, else stay on the shared pool without known baseline CPUs (a resize
// of such a container is refused with getBaselineCPUSetError).
func (p *Policy) adopt(m *Model, candidates []*Container) []string {
	var notes, retry []string
	var later []*Container
	// overLimit runs c on the shared pool when its pod's limit cannot hold
	// its n CPUs next to those of the containers adopted so far.
	overLimit := func(c *Container, n int) bool {
		note := beyondPodLimit(m, *c, n, nil)
		if note != "" {
			m.edit(c.ID).Exclusive = false
			notes = append(notes, note)
		}
		return note != ""
	}
	pin := func(c *Container, cpus cpuset.CPUSet) {
		m.State.SetAssignment(c.Pod.UID, c.Name, state.Assignment{Baseline: cpus, DeviceNodes: deviceRecord(c.DeviceNodes)})
		m.State.SetContainer(c.ID, state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name})
		p.takeFromPool(m, cpus)
	}
	for _, c := range candidates {
		n := Classify(c.Pod.QoS(), c.Resources).CPUs
		if overLimit(c, n) {
			continue
		}
		if !p.adoptable(m, c.CPUs, n) {
			later = append(later, c)
			continue
		}
		pin(c, c.CPUs)
		notes = append(notes, fmt.Sprintf("%s: adopted with its current CPUs %s as its baseline", displayName(c.Pod, c.Name), c.CPUs))
	}
	for _, c := range later {
		display := displayName(c.Pod, c.Name)
		n := Classify(c.Pod.QoS(), c.Resources).CPUs
		if overLimit(c, n) { // (earlier adoptions may fill the pod)
			continue
		}
		cpus, err := p.allocateNew(m, display, n)
		if err != nil {
			retry = append(retry, fmt.Sprintf("%s: current CPUs %s cannot be adopted and none can be allocated (%v); it runs on the shared pool",
				display, describe(c.CPUs), err))
			continue
		}
		pin(c, cpus)
		notes = append(notes, fmt.Sprintf("%s: current CPUs %s cannot be adopted; pinned to %s", display, describe(c.CPUs), cpus))
	}
	return append(notes, retry...)
}

// adoptable tells whether a running container's cpuset can become its
// baseline exclusive CPUs: allocatable, nobody else's, and not lent to an
// unsolicited update still in flight.
func (p *Policy) adoptable(m *Model, cpus cpuset.CPUSet, n int) bool {
	exclusive := m.State.ExclusiveCPUs().Union(m.heldCPUs())
	return cpus.Size() == n &&
		cpus.IsSubsetOf(p.allocatable) &&
		cpus.Intersection(exclusive).IsEmpty() &&
		cpus.Intersection(m.Lending).IsEmpty() &&
		p.smtAligned(n) &&
		!p.poolWithout(exclusive.Union(cpus)).IsEmpty()
}

// missedShrink tells whether a pinned container now asks for fewer CPUs
// than it holds.
func (p *Policy) missedShrink(m *Model, c *Container) bool {
	a, _ := m.State.Assignment(c.Pod.UID, c.Name)
	return Classify(c.Pod.QoS(), c.Resources).CPUs < a.Assigned().Size()
}

// resizeMissed brings a pinned container to the CPU count it now asks for,
// a resize the plugin missed while it was not connected. The updates of
// Synchronize come shrinks first, so a shrink's released CPUs can go to the
// shared containers in the same reply. It returns a note for the log.
func (p *Policy) resizeMissed(m *Model, c *Container) string {
	display := displayName(c.Pod, c.Name)
	a, _ := m.State.Assignment(c.Pod.UID, c.Name)
	assigned, n := a.Assigned(), Classify(c.Pod.QoS(), c.Resources).CPUs
	keep := func(why string) string {
		return fmt.Sprintf("%s: was resized to %d CPUs while the plugin was away; keeps %s: %s", display, n, assigned, why)
	}
	if err := p.admitResize(display, a, n); err != nil {
		// The refusal the kubelet would have shown, which says what it keeps.
		return fmt.Sprintf("%s: was resized to %d CPUs while the plugin was away: %v", display, n, err)
	}
	var cpus cpuset.CPUSet
	var err error
	if n < assigned.Size() {
		// A shrink chosen as a resize's is (shrinkTo: inside the NUMA
		// affinity the topology manager policy admits, or refused, and
		// then it keeps its CPUs, as the kubelet keeps its entry). Keep
		// what it runs on when that is enough (a growth the runtime
		// never applied, say): moving it would need more ordering than
		// one update per container gives.
		if on := assigned.Intersection(c.CPUs); on.Size() >= n && a.Baseline.IsSubsetOf(on) && !on.Equals(assigned) {
			narrowed := a
			narrowed.Resized = on
			cpus, err = p.shrinkTo(m, c.Pod.UID, c.Name, display, narrowed, n)
		}
		if cpus.IsEmpty() {
			cpus, err = p.shrinkTo(m, c.Pod.UID, c.Name, display, a, n)
		}
	} else {
		free, poolLeft := p.availability(m)
		// Take the free CPUs it already runs on first (a shrink the
		// runtime never applied, say), for the same reason.
		placed := false
		if on, _ := cpumask.Of(c.CPUs.Difference(assigned)); !on.IsEmpty() {
			if extra := on.And(free).CPUSet(); assigned.Size()+extra.Size() <= n {
				keepAlso := assigned.Union(extra)
				cpus, err = p.place(placement{keep: keepAlso, n: n, devices: p.devicesOf(m, c.Pod.UID, c.Name, 0)}, free.AndNot(on), poolLeft-p.inPoolBase(extra))
				placed = err == nil
			}
		}
		if !placed {
			cpus, err = p.placeGrowth(p.growth(m, c.Pod, c.Name, assigned, n), free, poolLeft)
		}
	}
	if err != nil {
		return keep(err.Error())
	}
	m.State.SetAssignment(c.Pod.UID, c.Name, state.Assignment{Baseline: a.Baseline, Resized: cpus, DeviceNodes: a.DeviceNodes})
	p.returnToPool(m, assigned.Difference(cpus))
	p.tookGrowth(m, c.Pod.UID, c.Name, assigned, cpus)
	return fmt.Sprintf("%s: was resized to %d CPUs while the plugin was away; now runs on %s", display, n, cpus)
}
