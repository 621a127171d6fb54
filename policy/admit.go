package policy

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// This file admits a pod whole, as the kubelet does (docs/design.md,
// "Admission"): its topology manager admits a pod by allocating the CPUs
// of every container of its spec, init containers and sidecars first, in
// order, then the app containers (topologymanager scope_container.go and
// scope_pod.go, Admit → cpumanager Allocate), before any of them starts,
// and a pod it cannot place is refused and takes nothing. The plugin does
// the same at the pod's first NRI event when it knows the pod's spec.

// AdmitPod admits a pod whose spec is known (Pod.Containers): every
// container of the spec that needs exclusive CPUs and has no entry yet
// gets its CPUs, in the kubelet's order, under the topology manager's
// policy and scope, an ordinary init container's CPUs reused first by
// the containers after it (the kubelet's cpusToReuse), and the entries
// are recorded before any container runs. The shared containers shrink
// to the new shared pool (Decision.Others, an unsolicited update: the
// event that admits carries no updates). A container with an entry
// already keeps it (the kubelet's "already present in state": a sandbox
// re-created, the pod admitted before a restart). A pod that cannot be
// placed is refused and nothing changes; its containers' creations are
// refused with the same reason until it fits (CreateContainer admits it
// first). A pod whose spec is not known is left to its containers'
// creations.
func (p *Policy) AdmitPod(m *Model, pod Pod) (Decision, error) {
	nm, notes, err := p.admitPod(m, pod)
	if err != nil {
		return Decision{Model: m}, err
	}
	if nm == m {
		return Decision{Model: m}, nil
	}
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm), Notes: notes}, nil
}

// Admitted reports whether a pod's spec is known and every container of
// it that needs exclusive CPUs has its entry.
func (m *Model) Admitted(pod Pod) bool {
	if pod.Containers == nil {
		return false
	}
	for _, sc := range pod.Containers {
		if _, ok := m.State.Assignment(pod.UID, sc.Name); sc.CPUs > 0 && !ok {
			return false
		}
	}
	return true
}

// admitPod is AdmitPod returning the new model (m itself when nothing was
// to admit) and the notes of what it did.
func (p *Policy) admitPod(m *Model, pod Pod) (*Model, []string, error) {
	if pod.UID == "" || pod.Containers == nil || m.Admitted(pod) {
		return m, nil, nil
	}
	nm := m.Clone()
	var notes []string
	for _, sc := range pod.Containers {
		if sc.CPUs == 0 {
			continue
		}
		if _, ok := nm.State.Assignment(pod.UID, sc.Name); ok {
			continue
		}
		display := displayName(pod, sc.Name)
		reuse, lenders := nm.reusable(pod, sc.Name)
		cpus, err := p.allocateFor(nm, Container{Name: sc.Name, Pod: pod}, display, sc.CPUs, reuse)
		if err != nil {
			return m, nil, notAdmitted(pod, sc, err)
		}
		nm.State.SetAssignment(pod.UID, sc.Name, state.Assignment{Baseline: cpus, Init: sc.Role == RoleInit})
		p.takeFromPool(nm, cpus)
		note := fmt.Sprintf("%s (%s): admitted with exclusive CPUs %s", display, sc.Role, cpus)
		if reused := cpus.Intersection(reuse.CPUSet()); !reused.IsEmpty() {
			note += fmt.Sprintf(", reusing %s of its pod's init containers %v", reused, lenders)
		}
		notes = append(notes, note)
	}
	nm.clearEnding(pod.UID)
	return nm, notes, nil
}

// notAdmitted words the refusal of a pod's admission: the refusal of the
// first container that could not be placed, in the pod's words. Its
// verdict and reason stay the container's (TopologyAffinityError,
// allocateCPUsError, SMTAlignmentError: the kubelet's admission errors).
func notAdmitted(pod Pod, sc SpecContainer, err error) error {
	r, ok := AsRefusal(err)
	if !ok {
		return fmt.Errorf("admitting pod %s: container %s: %w", podDisplay(pod), sc.Name, err)
	}
	return refuse(r.Verdict, r.Reason, "pod %s is not admitted, as the kubelet's admission would not admit it, and none of its containers starts until it fits: its %s %s: %s",
		podDisplay(pod), sc.Role, sc.Name, r.Message)
}

// neverCreated reports whether no container of a pod's name is tracked,
// running or stopped: an entry admission made that no container has run
// on yet (as far as this process saw: a container that stopped before a
// restart of the plugin is not listed again).
func (m *Model) neverCreated(podUID, name string) bool {
	for _, t := range m.podContainers(podUID) {
		if t.PodUID == podUID && t.Name == name {
			return false
		}
	}
	return true
}

// onDeviceNodes reports whether cpus lie on the NUMA nodes of a
// container's devices (always, without devices or when the topology
// manager policy does not align them).
func (p *Policy) onDeviceNodes(cpus cpuset.CPUSet, devices cpuallocator.NodeMask) bool {
	return devices == 0 || !p.AlignsDevices() || p.topo.NUMANodesOf(cpus).IsSubsetOf(devices)
}
