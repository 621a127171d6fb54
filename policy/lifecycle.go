package policy

import "fmt"

// Confirm is called when the runtime confirmed that a container's last
// update was applied (PostUpdateContainer). CPUs its shrink released join
// the shared pool now: Decision.Others grows the shared containers into
// them. The caller sends those as an unsolicited update.
func (p *Policy) Confirm(m *Model, id string) Decision {
	if _, pending := m.Releasing[id]; !pending {
		return Decision{Model: m}
	}
	nm := m.Clone()
	delete(nm.Releasing, id)
	return Decision{Model: nm, Others: p.syncShared(m, nm)}
}

// StopContainer is called once a container's process is gone. Its
// exclusive CPUs return to the shared pool and the shared containers grow
// into them (Decision.Others: safe to apply at once, nobody runs on them).
func (p *Policy) StopContainer(m *Model, id string) Decision {
	t := m.Containers[id]
	if t == nil || t.Stopped {
		return Decision{Model: m}
	}
	nm := m.Clone()
	nm.edit(id).Stopped = true
	notes := p.release(nm, id)
	return Decision{Model: nm, Others: p.syncShared(m, nm), Notes: notes}
}

// RemoveContainer forgets a container. If its stop was never seen, its
// CPUs are released as in StopContainer; the caller sends Decision.Others
// as an unsolicited update (RemoveContainer replies carry none).
func (p *Policy) RemoveContainer(m *Model, id string) Decision {
	t := m.Containers[id]
	_, owns := m.State.Container(id)
	if t == nil && !owns {
		return Decision{Model: m}
	}
	nm := m.Clone()
	notes := p.release(nm, id)
	nm.remove(id)
	if t != nil {
		p.forgetPodIfGone(nm, t.PodUID)
	}
	return Decision{Model: nm, Others: p.syncShared(m, nm), Notes: notes}
}

// release drops the assignment a container owns, if any.
func (p *Policy) release(m *Model, id string) []string {
	delete(m.Releasing, id)
	ref, owns := m.State.Container(id)
	if !owns {
		return nil
	}
	m.State.DeleteContainer(id)
	a, ok := m.State.Assignment(ref.PodUID, ref.Name)
	if !ok {
		return nil
	}
	m.State.DeleteAssignment(ref.PodUID, ref.Name)
	p.returnToPool(m, a.Assigned())
	who := fmt.Sprintf("pod %s container %s", ref.PodUID, ref.Name)
	if t := m.Containers[id]; t != nil {
		who = t.Display
	}
	return []string{fmt.Sprintf("%s: releases exclusive CPUs %s", who, a.Assigned())}
}

// forgetPodIfGone drops the pod-level record of a pod none of whose
// containers is known any more (after a runtime restart pods never get
// StopPodSandbox/RemovePodSandbox, so this is where their state ends).
func (p *Policy) forgetPodIfGone(m *Model, podUID string) {
	for _, t := range m.Containers {
		if t.PodUID == podUID {
			return
		}
	}
	if len(m.State.ContainersOfPod(podUID)) == 0 {
		m.State.DeletePod(podUID)
	}
}

// RemovePodSandbox forgets a pod and whatever of it is still known.
func (p *Policy) RemovePodSandbox(m *Model, podUID string) Decision {
	nm := m.Clone()
	var notes []string
	for _, id := range nm.sortedIDs() {
		if nm.Containers[id].PodUID == podUID {
			notes = append(notes, p.release(nm, id)...)
			nm.remove(id)
		}
	}
	for _, name := range nm.State.ContainersOfPod(podUID) {
		notes = append(notes, fmt.Sprintf("pod %s container %s: drops an assignment without a known container", podUID, name))
	}
	nm.State.DeletePod(podUID)
	p.recomputePool(nm)
	return Decision{Model: nm, Others: p.syncShared(m, nm), Notes: notes}
}

// Rebase recomputes the shared pool of m under this policy's configuration
// (after a configuration change) and points the shared containers at it.
func (p *Policy) Rebase(m *Model) Decision {
	nm := m.Clone()
	p.recomputePool(nm)
	return Decision{Model: nm, Others: p.syncShared(m, nm)}
}
