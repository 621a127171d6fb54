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

// StopContainer is called once a container's process is gone (an exit,
// a crash, a kill, or a creation that failed). Its assignment stays with
// its pod and name: the kubelet re-creates a container that exited under
// the same name, and it gets exactly those CPUs back (recreate). CPUs an
// unconfirmed shrink released go to the shared pool now. c is the
// container as the event names it (id, pod, name): a creation refused for
// reusing a running container's id is stopped and removed under its own
// pod (containerd undoes a failed creation so), which changes nothing of
// the container that runs under that id.
func (p *Policy) StopContainer(m *Model, c Container) Decision {
	id := c.ID
	t := m.Containers[id]
	if t == nil || t.Stopped || !t.is(c) {
		return Decision{Model: m}
	}
	nm := m.Clone()
	nm.edit(id).Stopped = true
	delete(nm.Releasing, id)
	nm.State.DeleteContainer(id)
	var notes []string
	if a, ok := nm.State.Assignment(t.PodUID, t.Name); ok && t.Exclusive {
		notes = append(notes, fmt.Sprintf("%s: stopped; its pod keeps its exclusive CPUs %s for its restart", t.Display, a.Assigned()))
	}
	return Decision{Model: nm, Others: p.syncShared(m, nm), Notes: notes}
}

// RemoveContainer forgets a container (c as the event names it: see
// StopContainer).
// Its pod keeps its assignment while any container of the pod is known:
// the kubelet removes an exited container after it re-created it. Once
// none is (a pod's last container removed: after a runtime restart pods
// never get RemovePodSandbox, and this is where their state ends), the
// pod's CPUs return to the shared pool; the caller sends Decision.Others
// as an unsolicited update (RemoveContainer replies carry none).
func (p *Policy) RemoveContainer(m *Model, c Container) Decision {
	id, podUID := c.ID, c.Pod.UID
	t := m.Containers[id]
	if t != nil && !t.is(c) {
		return Decision{Model: m}
	}
	_, owns := m.State.Container(id)
	if t == nil && !owns {
		return Decision{Model: m}
	}
	nm := m.Clone()
	delete(nm.Releasing, id)
	nm.State.DeleteContainer(id)
	nm.remove(id)
	var notes []string
	if !nm.podHasContainers(podUID) {
		notes = p.releasePod(nm, podUID)
	}
	return Decision{Model: nm, Others: p.syncShared(m, nm), Notes: notes}
}

// is reports whether the event's container c is the tracked one: the same
// pod, and the same name when the event gives one.
func (t *Tracked) is(c Container) bool {
	return t.PodUID == c.Pod.UID && (c.Name == "" || t.Name == c.Name)
}

// podHasContainers reports whether any container of a pod is tracked,
// running or stopped.
func (m *Model) podHasContainers(podUID string) bool {
	for _, t := range m.Containers {
		if t.PodUID == podUID {
			return true
		}
	}
	return false
}

// releasePod forgets a pod's assignments, CPUs held for it and pod-level
// resources; its CPUs return to the shared pool.
func (p *Policy) releasePod(m *Model, podUID string) []string {
	var notes []string
	for _, name := range m.State.ContainersOfPod(podUID) {
		a, _ := m.State.Assignment(podUID, name)
		notes = append(notes, fmt.Sprintf("pod %s container %s: releases exclusive CPUs %s", podUID, name, a.Assigned()))
	}
	m.State.DeletePod(podUID)
	p.recomputePool(m)
	return notes
}

// RemovePodSandbox forgets a pod and whatever of it is still known.
func (p *Policy) RemovePodSandbox(m *Model, podUID string) Decision {
	nm := m.Clone()
	for _, id := range nm.sortedIDs() {
		if nm.Containers[id].PodUID == podUID {
			delete(nm.Releasing, id)
			nm.remove(id)
		}
	}
	notes := p.releasePod(nm, podUID)
	return Decision{Model: nm, Others: p.syncShared(m, nm), Notes: notes}
}

// Rebase recomputes the shared pool of m under this policy's configuration
// (after a configuration change) and points the shared containers at it.
func (p *Policy) Rebase(m *Model) Decision {
	nm := m.Clone()
	p.recomputePool(nm)
	return Decision{Model: nm, Others: p.syncShared(m, nm)}
}
