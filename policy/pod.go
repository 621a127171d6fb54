package policy

import (
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

// heldFor returns the CPUs held for a pod while its resize is in flight.
func (m *Model) heldFor(podUID string) cpumask.Mask {
	return nil
}

// takeHeld records that cpus were taken by a container of a pod: they are
// no longer held for it.
func (p *Policy) takeHeld(m *Model, podUID string, cpus cpuset.CPUSet) {}
