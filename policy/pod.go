package policy

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// This file holds what the policy knows of a pod as a whole: the
// assignments of its containers that do not run (kept for their restart),
// and the pod-wide view topologyManagerScope: pod takes.

// stoppedEntries returns the names of a pod's assignments that no running
// container owns (their container exited and has not been re-created yet),
// sorted.
func (m *Model) stoppedEntries(podUID string) []string {
	var names []string
	for _, name := range m.State.ContainersOfPod(podUID) {
		if !m.runsEntry(podUID, name) {
			names = append(names, name)
		}
	}
	return names
}

// runsEntry reports whether a running container owns the assignment of a
// pod and name.
func (m *Model) runsEntry(podUID, name string) bool {
	for id, ref := range m.State.ContainerRefs() {
		if ref.PodUID == podUID && ref.Name == name {
			if t := m.Containers[id]; t != nil && !t.Stopped {
				return true
			}
		}
	}
	return false
}

// podCPUs returns the CPUs a pod's assignments hold, but the one of
// container name.
func (m *Model) podCPUs(podUID, except string) cpuset.CPUSet {
	var cpus cpumask.Mask
	for _, name := range m.State.ContainersOfPod(podUID) {
		if name == except {
			continue
		}
		a, _ := m.State.Assignment(podUID, name)
		cpus.AddSet(a.Assigned())
	}
	return cpus.CPUSet()
}

// podScope returns what topologyManagerScope: pod admits with a placement
// of n CPUs for container name of pod: the CPUs the pod's other containers
// hold, and the pod's whole exclusive need when it is more than theirs and
// n — its pod-level CPU limit in whole CPUs, the kubelet's pod total of a
// Guaranteed pod (a fractional container's share rounds down). Nothing
// under the container scope.
func (p *Policy) podScope(m *Model, pod Pod, name string, n int) (cpuset.CPUSet, int) {
	if p.opts.TopologyScope != cpuallocator.ScopePod {
		return cpuset.New(), 0
	}
	others := m.podCPUs(pod.UID, name)
	need := others.Size() + n
	if res, ok := m.PodResources(pod); ok {
		need = max(need, int(min(cpuLimitMilli(res)/milliCPUPerCPU, int64(p.allocatable.Size()))))
	}
	return others, need
}

// growth is the placement growing container name of a pod from assigned to
// n CPUs: the CPUs held for the pod are borrowed first.
func (p *Policy) growth(m *Model, podUID, name string, assigned cpuset.CPUSet, n int) placement {
	pl := placement{keep: assigned, n: n, borrowed: m.heldFor(podUID)}
	if p.opts.TopologyScope == cpuallocator.ScopePod {
		pl.pod = m.podCPUs(podUID, name)
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
		if t := m.Containers[id]; t != nil && t.PodUID == podUID {
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

// resizeInFlight reports whether a pod's resize is in flight: the CPU
// limits of its running containers do not add up to its pod-level CPU
// limit (the last UpdatePodSandbox's, or the sandbox's). False when the
// pod's total is not known.
func (m *Model) resizeInFlight(pod Pod) bool {
	res, ok := m.PodResources(pod)
	total := cpuLimitMilli(res)
	if !ok || total == 0 {
		return false
	}
	var sum int64
	for _, t := range m.Containers {
		if t.PodUID == pod.UID && !t.Stopped {
			sum += t.CPULimitMilli
		}
	}
	return sum != total
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
	m.State.SetDefaultCPUSet(m.State.DefaultCPUSet().Difference(released))
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
	return Decision{Model: nm, Others: p.syncShared(m, nm), Notes: notes}
}
