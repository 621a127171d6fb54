package policy

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// This file holds what the policy knows of a pod as a whole: the
// assignments of its containers that do not run (kept for their restart),
// and the pod-wide view topologyManagerScope: pod takes.

// reusable returns the CPUs of a pod that its new container name takes
// before any other, as the kubelet's static policy does (cpusToReuse): the
// CPUs of the pod's ordinary init containers, less those its other
// entries hold (a sidecar or an app container keeps its CPUs, even those
// it took from an init container) and those a running container holds.
// lenders names the entries they come from. Without the pod's spec, an
// entry counts as an init container's when its container completed (exit
// code 0) and none of the name runs: the kubelet starts a pod's next
// container only once its init container completed. An init container
// lends nothing to a container that runs beside it: a sidecar declared
// before it (the spec says so), or one that ran when it was created (the
// plugin saw it): when the pod runs again, the sidecar starts first and
// runs on while the init container takes its CPUs back.
func (m *Model) reusable(pod Pod, name string) (cpus cpumask.Mask, lenders []string) {
	podUID := pod.UID
	var keep cpumask.Mask
	for _, other := range m.State.ContainersOfPod(podUID) {
		if other == name {
			continue
		}
		a, _ := m.State.Assignment(podUID, other)
		lends := a.Init || pod.RoleOf(other) == RoleInit || pod.Roles == nil && m.completedUnknown(podUID, other)
		if lends && !pod.runsBeside(name, other) && !m.ranBeside(podUID, other, name) {
			cpus.AddSet(a.Held())
			lenders = append(lenders, other)
			continue
		}
		keep.AddSet(a.Held())
	}
	if cpus.IsEmpty() {
		return nil, nil
	}
	keep.AddSet(m.runningCPUs(podUID, name))
	return cpus.AndNot(keep), lenders
}

// growthReusable is reusable for a growth of container name, which has
// run for a while: without the pod's spec, an init container lends it
// only what the plugin saw of the two tells that it started after the
// init container (a tracked instance of the init container, none of
// which it ran beside). After a restart of the plugin nothing tells a
// sidecar from an app container: the growth takes free CPUs only.
func (m *Model) growthReusable(pod Pod, name string) cpumask.Mask {
	reuse, lenders := m.reusable(pod, name)
	if pod.Roles != nil || len(lenders) == 0 {
		return reuse
	}
	after := slices.DeleteFunc(slices.Clone(lenders), func(init string) bool { return !m.startedAfter(pod.UID, init, name) })
	if len(after) == len(lenders) {
		return reuse
	}
	return m.reuseOf(pod.UID, name, after)
}

// startedAfter reports whether the plugin saw container name of a pod
// start after init container init: it tracks an instance of init, and
// name ran beside none.
func (m *Model) startedAfter(podUID, init, name string) bool {
	seen := false
	for _, t := range m.podContainers(podUID) {
		if t.PodUID == podUID && t.Name == init {
			if slices.Contains(t.RanBeside, name) {
				return false
			}
			seen = true
		}
	}
	return seen
}

// runsBeside reports whether the pod's spec declares container name a
// sidecar before init container init: the kubelet starts it first and it
// runs on while init runs.
func (pod Pod) runsBeside(name, init string) bool {
	for _, sc := range pod.Containers {
		switch sc.Name {
		case init:
			return false
		case name:
			return sc.Role == RoleSidecar
		}
	}
	return false
}

// ranBeside reports whether a container of the pod named name ran when
// one named init was created.
func (m *Model) ranBeside(podUID, init, name string) bool {
	for _, t := range m.podContainers(podUID) {
		if t.PodUID == podUID && t.Name == init && slices.Contains(t.RanBeside, name) {
			return true
		}
	}
	return false
}

// runningNames returns the names of a pod's running containers but
// except, sorted.
func (m *Model) runningNames(podUID, except string) []string {
	var names []string
	for _, t := range m.podContainers(podUID) {
		if t.PodUID == podUID && t.Name != except && !t.Stopped && !slices.Contains(names, t.Name) {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	return names
}

// lendersFor is reusable for a new container of n CPUs, which for a pod
// whose spec is not known also counts as an init container's an entry
// none of whose containers the plugin has seen (its init container
// completed while the plugin was away: a Synchronize lists no exited
// container), when the pod's CPU limit (the kubelet's pod total: the
// largest of its init containers' needs and its other containers' sum)
// cannot hold the new container beside it and the other entries: the new
// container would otherwise run on the shared pool for exceeding its
// pod's total (beyondPodLimit). (The limit cannot tell more: it counts
// the pod's fractional containers too, which may not exist yet.)
func (m *Model) lendersFor(pod Pod, name string, n int) (cpumask.Mask, []string) {
	reuse, lenders := m.reusable(pod, name)
	res, known := m.PodResources(pod)
	limit := cpuLimitMilli(res)
	if pod.Roles != nil || !known || limit == 0 {
		return reuse, lenders
	}
	held := m.podHeld(pod.UID, name).Size()
	if int64(held+max(0, n-reuse.Count()))*milliCPUPerCPU <= limit {
		return reuse, lenders
	}
	more := slices.Clone(lenders)
	for _, other := range m.State.ContainersOfPod(pod.UID) {
		if other != name && !slices.Contains(lenders, other) && m.neverCreated(pod.UID, other) {
			more = append(more, other)
		}
	}
	if len(more) == len(lenders) {
		return reuse, lenders
	}
	return m.reuseOf(pod.UID, name, more), more
}

// reuseOf returns the CPUs of a pod's entries named lenders that its new
// container name may take: those no other entry of the pod holds and no
// running container of it runs on.
func (m *Model) reuseOf(podUID, name string, lenders []string) cpumask.Mask {
	if len(lenders) == 0 {
		return nil
	}
	var cpus, keep cpumask.Mask
	for _, other := range m.State.ContainersOfPod(podUID) {
		if other == name {
			continue
		}
		a, _ := m.State.Assignment(podUID, other)
		if slices.Contains(lenders, other) {
			cpus.AddSet(a.Held())
		} else {
			keep.AddSet(a.Held())
		}
	}
	keep.AddSet(m.runningCPUs(podUID, name))
	return cpus.AndNot(keep)
}

// completedUnknown reports whether the container of a pod's entry, whose
// role is not known, completed and none of its name runs.
func (m *Model) completedUnknown(podUID, name string) bool {
	completed := false
	for _, t := range m.podContainers(podUID) {
		if t.PodUID != podUID || t.Name != name {
			continue
		}
		if !t.Stopped || t.Role != RoleUnknown {
			return false
		}
		completed = completed || t.Completed
	}
	return completed
}

// roleOf returns the role a pod's container name was created with
// (RoleUnknown when no container of the name is tracked or none knew it).
func (m *Model) roleOf(podUID, name string) Role {
	for _, t := range m.podContainers(podUID) {
		if t.PodUID == podUID && t.Name == name && t.Role != RoleUnknown {
			return t.Role
		}
	}
	return RoleUnknown
}

// runningCPUs returns the CPUs the running containers of a pod, but those
// named except, run on exclusively.
func (m *Model) runningCPUs(podUID, except string) cpuset.CPUSet {
	var cpus cpumask.Mask
	for id, t := range m.podContainers(podUID) {
		if t.PodUID == podUID && t.Name != except && !t.Stopped {
			if a, owns := m.ownAssignment(id); owns {
				cpus.AddSet(a.Held())
			}
		}
	}
	return cpus.CPUSet()
}

// runningNamesOn returns the names of a pod's running containers that run
// exclusively on some of cpus, sorted.
func (m *Model) runningNamesOn(podUID string, cpus cpuset.CPUSet) []string {
	var names []string
	for id, t := range m.podContainers(podUID) {
		if t.PodUID != podUID || t.Stopped {
			continue
		}
		if a, owns := m.ownAssignment(id); owns && !a.Held().Intersection(cpus).IsEmpty() && !slices.Contains(names, t.Name) {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	return names
}

// clearEnding forgets that the API reported a pod ended, and that it was
// idle: the runtime creates a container of it (the runtime's word wins).
func (m *Model) clearEnding(podUID string) {
	if m.Ending[podUID] {
		m.Ending = maps.Clone(m.Ending)
		delete(m.Ending, podUID)
	}
	m.forgetIdle(podUID)
}

// forgetIdle forgets when a pod became idle.
func (m *Model) forgetIdle(podUID string) {
	if _, idle := m.Idle[podUID]; idle {
		m.Idle = maps.Clone(m.Idle)
		delete(m.Idle, podUID)
	}
}

// podScope returns what topologyManagerScope: pod admits with a placement
// of n CPUs for container name of pod, which takes reuse first: the CPUs
// the pod's other entries hold, and the pod's whole exclusive need — the
// kubelet's, from the pod's spec, when it is known; else the larger of
// what the pod holds with this placement and its pod-level CPU limit in
// whole CPUs (a Guaranteed pod's total, in which a fractional container's
// share rounds down; an overestimate when it has several). Nothing under
// the container scope.
func (p *Policy) podScope(m *Model, pod Pod, name string, n int, reuse cpumask.Mask) (cpuset.CPUSet, int) {
	if p.opts.TopologyScope != cpuallocator.ScopePod {
		return cpuset.New(), 0
	}
	others := m.podHeld(pod.UID, name)
	need := others.Size() + max(0, n-reuse.Count())
	if pod.GuaranteedCPUs > 0 {
		return others, max(need, pod.GuaranteedCPUs)
	}
	if res, ok := m.PodResources(pod); ok {
		need = max(need, int(min(cpuLimitMilli(res)/milliCPUPerCPU, int64(p.allocatable.Size()))))
	}
	return others, need
}

// growth is the placement growing container name of a pod from assigned to
// n CPUs: the CPUs held for the pod and its reusable ones are borrowed
// first.
func (p *Policy) growth(m *Model, pod Pod, name string, assigned cpuset.CPUSet, n int) placement {
	podUID := pod.UID
	reuse := m.growthReusable(pod, name)
	pl := placement{keep: assigned, n: n, borrowed: m.heldFor(podUID).Or(reuse.AndNot(maskOf(assigned))), devices: p.devicesOf(m, podUID, name, 0)}
	if p.opts.TopologyScope == cpuallocator.ScopePod {
		pl.pod = m.podHeld(podUID, name)
	}
	return pl
}

// heldFor returns the CPUs held for a pod while its resize is in flight
// that its containers may take: those whose release the runtime confirmed.
func (m *Model) heldFor(podUID string) cpumask.Mask {
	h, ok := m.State.Hold(podUID)
	if !ok {
		return nil
	}
	held := maskOf(h.CPUs)
	for id, cpus := range m.Releasing {
		if t := m.Containers.Get(id); t != nil && t.PodUID == podUID {
			held = held.AndNot(maskOf(cpus))
		}
	}
	return held
}

// heldCPUs returns every CPU held for a pod.
func (m *Model) heldCPUs() cpuset.CPUSet {
	var all cpumask.Mask
	for _, h := range m.State.Holds() {
		all.AddSet(h.CPUs)
	}
	return all.CPUSet()
}

// reusedBy records that container name of a pod took cpus: the pod's other
// entries it took some of lent them as init containers (without the pod's
// spec, a completed container is taken for one; the kubelet's reuse never
// takes a sidecar's or an app container's CPUs) and are init containers'
// from now on, as after a creation that reused them: a CPU is in two of a
// pod's entries only when one is an init container's, and the lender's
// restart moves it (relocate).
func reusedBy(m *Model, podUID, name string, cpus cpuset.CPUSet) {
	for _, other := range m.State.ContainersOfPod(podUID) {
		a, _ := m.State.Assignment(podUID, other)
		if other != name && !a.Init && !a.Held().Intersection(cpus).IsEmpty() {
			a.Init = true
			m.State.SetAssignment(podUID, other, a)
		}
	}
}

// tookGrowth records that container name of a pod grew from assigned to
// cpus: what it gained leaves the shared pool and its pod's hold (a growth
// borrows the held CPUs first), and the pod's entries it took CPUs from
// lend them as init containers (reusedBy). Every growth of an entry goes
// through it, so none leaves a CPU both held and assigned.
func (p *Policy) tookGrowth(m *Model, podUID, name string, assigned, cpus cpuset.CPUSet) {
	gained := cpus.Difference(assigned)
	p.takeFromPool(m, gained)
	p.takeHeld(m, podUID, gained)
	reusedBy(m, podUID, name, gained)
}

// takeHeld records that cpus were taken by a container of a pod: they are
// no longer held for it.
func (p *Policy) takeHeld(m *Model, podUID string, cpus cpuset.CPUSet) {
	h, ok := m.State.Hold(podUID)
	if !ok || h.CPUs.Intersection(cpus).IsEmpty() {
		return
	}
	if h.CPUs = h.CPUs.Difference(cpus); h.CPUs.IsEmpty() {
		m.State.DeleteHold(podUID)
		return
	}
	m.State.SetHold(podUID, h)
}

// resizeInFlight reports whether a pod's resize is in flight: what its
// containers' CPU limits add up to (podLimitMilli) is not its pod-level
// CPU limit (the last UpdatePodSandbox's, or the sandbox's). False when
// the pod's total is not known.
func (m *Model) resizeInFlight(pod Pod) bool {
	res, ok := m.PodResources(pod)
	total := cpuLimitMilli(res)
	if !ok || total == 0 {
		return false
	}
	return m.podLimitMilli(pod.UID) != total
}

// podLimitMilli returns the CPU limit a pod's containers add up to, in
// milli-CPU, as the kubelet totals a pod: its sidecars' and app
// containers' limits, or an init container's (with the sidecars') when
// that is more. Each name counts once, stopped or running — a container
// that exited keeps its place in the pod, and the kubelet restarts it with
// the same limit — by its running container, else its latest stopped one
// (the kubelet's last start of it: an older dead instance may have had
// another limit, and the runtime's ids do not say which is older). A name
// whose role is not known counts as an app container's, but one whose
// CPUs its pod reused (taken for an init container), as an init
// container's.
func (m *Model) podLimitMilli(podUID string) int64 {
	type member struct {
		limit   int64
		role    Role
		running bool
		seq     uint64
	}
	members := map[string]member{}
	for _, t := range m.podContainers(podUID) {
		if t.PodUID != podUID {
			continue
		}
		if have, ok := members[t.Name]; ok && (have.running || t.Stopped && t.Seq < have.seq) {
			continue
		}
		role := t.Role
		if role == RoleUnknown {
			role = RoleApp
			if a, ok := m.State.Assignment(podUID, t.Name); ok && a.Init {
				role = RoleInit // taken for one when its pod reused its CPUs
			}
		}
		members[t.Name] = member{limit: t.CPULimitMilli, role: role, running: !t.Stopped, seq: t.Seq}
	}
	var long, sidecars, init int64
	for _, mb := range members {
		switch mb.role {
		case RoleInit:
			init = max(init, mb.limit)
		case RoleSidecar:
			sidecars += mb.limit
			long += mb.limit
		default:
			long += mb.limit
		}
	}
	if init > 0 {
		return max(long, init+sidecars)
	}
	return long
}

// hold keeps the CPUs a decrease released for its pod while the pod's
// resize is in flight, instead of the shared pool: a sibling's growth
// takes them first, an undo of the decrease takes them back, and no other
// pod can. It reports whether it held them.
func (p *Policy) hold(m *Model, pod Pod, released cpuset.CPUSet) bool {
	if released.IsEmpty() || !m.resizeInFlight(pod) {
		return false
	}
	h, ok := m.State.Hold(pod.UID)
	if !ok {
		h.Since = p.opts.Now()
	}
	h.CPUs = h.CPUs.Union(released)
	m.State.SetHold(pod.UID, h)
	m.State.TakeShared(released)
	return true
}

// settleHold returns a pod's held CPUs to the shared pool once its resize
// is no longer in flight (its containers add up to its total: the resize
// completed, or the spec went back). It returns a note when it did.
func (p *Policy) settleHold(m *Model, pod Pod) string {
	h, ok := m.State.Hold(pod.UID)
	if !ok || m.resizeInFlight(pod) {
		return ""
	}
	m.State.DeleteHold(pod.UID)
	p.returnToPool(m, h.CPUs)
	return fmt.Sprintf("pod %s: its resize is complete; the CPUs %s held for it return to the shared pool", podDisplay(pod), h.CPUs)
}

// ExpireHolds returns the CPUs held for pods longer than the hold timeout
// to the shared pool (a runtime or kubelet that never completes a resize
// must not keep them from other pods for good). Decision.Others grows the
// shared containers into them.
func (p *Policy) ExpireHolds(m *Model) Decision {
	now := p.opts.Now()
	var expired []string
	for uid, h := range m.State.Holds() {
		if now.Sub(h.Since) >= p.opts.HoldTimeout {
			expired = append(expired, uid)
		}
	}
	if len(expired) == 0 {
		return Decision{Model: m}
	}
	slices.Sort(expired)
	nm := m.Clone()
	var notes []string
	for _, uid := range expired {
		h, _ := nm.State.Hold(uid)
		nm.State.DeleteHold(uid)
		p.returnToPool(nm, h.CPUs)
		notes = append(notes, fmt.Sprintf("pod %s: the CPUs %s held for its resize since %s return to the shared pool: the resize did not complete within %s",
			uid, h.CPUs, h.Since.UTC().Format(time.RFC3339), p.opts.HoldTimeout))
	}
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm), Notes: notes}
}

// podHeld returns the CPUs a pod's entries hold (their Held sets), but
// the one of container except.
func (m *Model) podHeld(podUID, except string) cpuset.CPUSet {
	var cpus cpumask.Mask
	for _, name := range m.State.ContainersOfPod(podUID) {
		if name == except {
			continue
		}
		a, _ := m.State.Assignment(podUID, name)
		cpus.AddSet(a.Held())
	}
	return cpus.CPUSet()
}

// giveBack returns to the shared pool the CPUs an entry of a pod gave up,
// but those another entry of the pod still holds (an ordinary init
// container's CPUs are also its pod's later containers': see reusable).
// The caller has updated the entry already.
func (p *Policy) giveBack(m *Model, podUID string, cpus cpuset.CPUSet) {
	if cpus.IsEmpty() {
		return
	}
	p.returnToPool(m, cpus.Difference(m.podHeld(podUID, "")))
}
