package policy

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/utils/cpuset"
)

// This file follows a pod through its life as the kubelet lives it
// (docs/design.md, "A pod's life"): its CPUs belong to the pod, keyed by
// container name, from its first exclusive container to the end of the
// pod — its last sandbox removed, the Kubernetes API reporting it
// terminal or deleted, or the runtime no longer knowing it — whatever the
// order in which its containers stop, restart and are removed.

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
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm)}
}

// ConfirmWithSpec is Confirm when the pod's spec is known (the resize the
// confirmed update was part of was decided with it): once the decrease's
// release is confirmed, the members of the pod that do not run take the
// counts the spec asks that the free CPUs could not hold before it
// (resizeStopped; UpdatePodSandboxWithSpec left them to their
// re-creation), as the KEP-5554 kubelet allocates a whole resize when it
// admits it. A member that still cannot be placed is left to its
// re-creation.
func (p *Policy) ConfirmWithSpec(m *Model, id string, pod Pod, spec PodSpec) Decision {
	d := p.Confirm(m, id)
	if spec == nil || pod.UID == "" {
		return d
	}
	pm := d.Model.podMembers(pod.UID)
	asked, ok := pm.asked(spec)
	if !ok {
		return d
	}
	next, notes := p.resizeStopped(d.Model, pod, pm, asked, spec)
	if next == d.Model {
		return d
	}
	if note := p.settleHold(next, pod); note != "" {
		notes = append(notes, note)
	}
	return Decision{Model: next, PoolChanged: poolChanged(m, next), Notes: notes}
}

// SettleWithSpec is the maintenance loop's catch-up for a pod that holds
// CPUs for its resize when the pod's spec (the Kubernetes API's, at the
// pod's recorded total) is known: its members that do not run take what
// the spec asks (resizeStopped, as UpdatePodSandboxWithSpec would have
// done), and the held CPUs return to the shared pool once the pod adds
// up. It catches up a resize decided while the API's view lagged behind
// the runtime (UpdatePodSandbox decided on the totals alone), which the
// kubelet's reconcile would finish: without it a stopped member keeps the
// larger limit it was re-created with, and the CPUs stay held until its
// next restart or the hold timeout. Nothing changes for a pod that holds
// nothing.
func (p *Policy) SettleWithSpec(m *Model, pod Pod, spec PodSpec) Decision {
	if _, held := m.State.Hold(pod.UID); !held || spec == nil || pod.UID == "" {
		return Decision{Model: m}
	}
	pm := m.podMembers(pod.UID)
	asked, ok := pm.asked(spec)
	if !ok {
		return Decision{Model: m}
	}
	next, notes := p.resizeStopped(m, pod, pm, asked, spec)
	if next == m {
		if m.resizeInFlight(pod) {
			return Decision{Model: m}
		}
		next = m.Clone() // the pod adds up already: settle below
	}
	if note := p.settleHold(next, pod); note != "" {
		notes = append(notes, note)
	}
	return Decision{Model: next, PoolChanged: poolChanged(m, next), Notes: notes}
}

// RunPodSandbox records a pod's new sandbox. The kubelet runs one sandbox
// of a pod at a time: a new one (the pause container died, or the node
// rebooted) replaces the pod's others, whose removal later, relayed by
// the runtime or not, changes nothing. No CPU changes hands: the pod's
// containers get their CPUs back as they are re-created.
func (p *Policy) RunPodSandbox(m *Model, pod Pod) Decision {
	if pod.UID == "" || pod.SandboxID == "" {
		return Decision{Model: m}
	}
	if sb, ok := m.Sandboxes.Lookup(pod.SandboxID); ok && sb.Confirmed && sb.PodUID == pod.UID && len(m.sandboxesOf(pod.UID)) == 1 {
		return Decision{Model: m}
	}
	nm := m.shallow()
	var notes []string
	for _, id := range m.sandboxesOf(pod.UID) {
		if id != pod.SandboxID {
			nm.deleteSandbox(id)
			notes = append(notes, fmt.Sprintf("pod %s: sandbox %s replaces sandbox %s; the pod keeps its CPUs", podDisplay(pod), pod.SandboxID, id))
		}
	}
	nm.setSandbox(pod.SandboxID, Sandbox{PodUID: pod.UID, Confirmed: true})
	// A sandbox of a pod the API called ended: the runtime's word wins.
	nm.clearEnding(pod.UID)
	return Decision{Model: nm, Notes: notes}
}

// StopPodSandbox records that a pod's sandbox stopped. When nothing of
// the pod runs any more and no new sandbox follows — a pod that completed
// (a Job), whose end only the Kubernetes API tells — the pod is idle, and
// gives its CPUs back after the orphan timeout (ExpireOrphans).
func (p *Policy) StopPodSandbox(m *Model, pod Pod) Decision {
	sb, ok := m.Sandboxes.Lookup(pod.SandboxID)
	if !ok || sb.Stopped || sb.PodUID != pod.UID {
		return Decision{Model: m}
	}
	nm := m.shallow()
	sb.Stopped = true
	nm.setSandbox(pod.SandboxID, sb)
	p.markIdle(nm, pod.UID)
	return Decision{Model: nm}
}

// StopContainer is called once a container's process is gone (an exit,
// a crash, a kill, or a creation that failed). Its assignment stays with
// its pod and name: the kubelet re-creates a container that exited under
// the same name, and it gets exactly those CPUs back (recreate). CPUs an
// unconfirmed shrink released go to the shared pool now. c is the
// container as the event names it (id, pod, name, exit): a creation
// refused for reusing a running container's id is stopped and removed
// under its own pod (containerd undoes a failed creation so), which
// changes nothing of the container that runs under that id. The last
// container of a pod the API reported ended takes the pod's CPUs back
// with it.
func (p *Policy) StopContainer(m *Model, c Container) Decision {
	id := c.ID
	t := m.Containers.Get(id)
	if t == nil || t.Stopped || !t.is(c) {
		return Decision{Model: m}
	}
	nm := m.Clone()
	stopped := nm.edit(id)
	stopped.Stopped, stopped.Completed = true, c.Completed
	delete(nm.Releasing, id)
	var notes []string
	if a, ok := nm.State.Assignment(t.PodUID, t.Name); ok && !a.Delayed.IsEmpty() {
		// CPUs kept past a decrease go at once: nothing runs on them any
		// more, and its restart runs on its assigned CPUs.
		delayed := a.Delayed
		a.Delayed, a.ReleaseAt = cpuset.New(), time.Time{}
		nm.State.SetAssignment(t.PodUID, t.Name, a)
		p.giveBack(nm, t.PodUID, delayed)
	}
	nm.State.DeleteContainer(id)
	if a, ok := nm.State.Assignment(t.PodUID, t.Name); ok && t.Exclusive {
		notes = append(notes, fmt.Sprintf("%s: stopped; its pod keeps its exclusive CPUs %s for its restart", t.Display, a.Assigned()))
	}
	if nm.Ending[t.PodUID] && !nm.podRuns(t.PodUID) {
		notes = append(notes, p.endPod(nm, t.PodUID, "the Kubernetes API reports it ended and its last container stopped")...)
	}
	p.markIdle(nm, t.PodUID)
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm), Notes: notes}
}

// RemoveContainer forgets a container (c as the event names it: see
// StopContainer). Its pod keeps its assignments: the kubelet's garbage
// collection removes a dead container before or after it re-created it,
// and either order gives the same outcome; the pod's end is its
// sandbox's removal (RemovePodSandbox), the API's word (EndPod), or, for
// a pod whose removal the runtime may never report, ExpireOrphans.
func (p *Policy) RemoveContainer(m *Model, c Container) Decision {
	id, podUID := c.ID, c.Pod.UID
	t := m.Containers.Get(id)
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
	p.markIdle(nm, podUID)
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm)}
}

// markIdle records when a pod that holds CPUs became idle: none of its
// containers runs and none of its sandboxes runs and is one the runtime
// would report removed (see ExpireOrphans).
func (p *Policy) markIdle(m *Model, podUID string) {
	if !m.idle(podUID) {
		return
	}
	m.Idle = maps.Clone(m.Idle) // (shared with the model's clones)
	if m.Idle == nil {
		m.Idle = map[string]time.Time{}
	}
	m.Idle[podUID] = p.opts.Now()
}

// idle reports whether a pod that holds CPUs is idle and not marked so
// yet.
func (m *Model) idle(podUID string) bool {
	_, marked := m.Idle[podUID]
	return !marked && !m.podRuns(podUID) && !m.hasConfirmedSandbox(podUID) && m.KnowsPod(podUID)
}

// ExpireOrphans ends the idle pods (markIdle) whose end nothing else
// reports: a containerd that restarted never relays the removal of the
// sandboxes it had before, so a pod deleted since (or while the node was
// down) tells nothing more, and would keep its CPUs for good; and without
// the API nothing tells that a pod whose sandbox the kubelet stopped has
// completed. With the Kubernetes API (active non-nil), an idle pod ends at
// once when active says it is not active — the API's synced view lists
// it no more, or terminal — as the kubelet's removeStaleState drops a pod
// its sources no longer list once they are ready; a pod it lists, or any
// while it cannot say, keeps its CPUs. Without it, an idle pod ends after
// the orphan timeout: a pod the kubelet still runs gets a new sandbox or
// container well before (a crash loop backs off 5 minutes at most).
// Decision.Others grows the shared containers into their CPUs.
func (p *Policy) ExpireOrphans(m *Model, active func(podUID string) bool) Decision {
	now := p.opts.Now()
	var due []string
	for uid, since := range m.Idle {
		if active != nil && !active(uid) || active == nil && now.Sub(since) >= p.opts.OrphanTimeout {
			due = append(due, uid)
		}
	}
	if len(due) == 0 {
		return Decision{Model: m}
	}
	slices.Sort(due)
	nm := m.Clone()
	var notes []string
	for _, uid := range due {
		nm.forgetIdle(uid)
		if nm.podRuns(uid) || nm.hasConfirmedSandbox(uid) {
			continue
		}
		why := fmt.Sprintf("nothing of it has run for %s and the runtime would not report its removal", p.opts.OrphanTimeout)
		if active != nil {
			why = "nothing of it runs, the runtime would not report its removal, and the Kubernetes API no longer lists it active"
		}
		notes = append(notes, p.endPod(nm, uid, why)...)
	}
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm), Notes: notes}
}

// RemovePodSandbox forgets a removed sandbox and its containers. The pod
// ends, and its CPUs go back to the shared pool, when it has no other
// sandbox: the removal of a sandbox the kubelet replaced (a re-created
// sandbox, every pod after a node reboot) leaves the containers running
// in the new one as they are. When the other sandboxes are known only
// from a Synchronize (the plugin cannot tell which one is current) and
// nothing of the pod runs, the pod is idle: deleted, or crash-looping in
// its current sandbox, it ends after the orphan timeout unless a
// container or sandbox of it comes first.
func (p *Policy) RemovePodSandbox(m *Model, pod Pod) Decision {
	nm := m.Clone()
	if pod.SandboxID != "" {
		nm.deleteSandbox(pod.SandboxID)
		if len(nm.sandboxesOf(pod.UID)) > 0 {
			for _, id := range nm.podContainerIDs(pod.UID) {
				if t := nm.Containers.Get(id); t.PodUID == pod.UID && t.SandboxID == pod.SandboxID {
					delete(nm.Releasing, id)
					nm.State.DeleteContainer(id)
					nm.remove(id)
				}
			}
			p.markIdle(nm, pod.UID)
			return Decision{Model: nm, PoolChanged: poolChanged(m, nm)}
		}
	}
	notes := p.endPod(nm, pod.UID, "its last sandbox is removed")
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm), Notes: notes}
}

// EndPod is called when the Kubernetes API reports a pod terminal
// (Succeeded, Failed) or deleted: the kubelet's static policy then gives
// its CPUs back (removeStaleState), although its sandbox and dead
// containers may stay for long (a completed Job's pod). A pod some of
// whose containers still run (a forced deletion) gives them back once the
// last one stops: a CPU never has two owners.
func (p *Policy) EndPod(m *Model, podUID string) Decision {
	if podUID == "" || !m.KnowsPod(podUID) {
		return Decision{Model: m}
	}
	if m.podRuns(podUID) {
		if m.Ending[podUID] {
			return Decision{Model: m}
		}
		nm := m.shallow()
		nm.Ending = maps.Clone(m.Ending)
		if nm.Ending == nil {
			nm.Ending = map[string]bool{}
		}
		nm.Ending[podUID] = true
		return Decision{Model: nm, Notes: []string{fmt.Sprintf("pod %s: the Kubernetes API reports it ended; its CPUs go back once its running containers stop", podUID)}}
	}
	if len(m.State.ContainersOfPod(podUID)) == 0 && !m.hasHoldOrResources(podUID) {
		return Decision{Model: m}
	}
	nm := m.Clone()
	notes := p.endPod(nm, podUID, "the Kubernetes API reports it terminal or deleted")
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm), Notes: notes}
}

// endPod gives back everything a pod holds — its assignments, the CPUs
// held for it, its pod-level resources — and forgets its running
// containers' records (the runtime removes them with the sandbox); its
// CPUs return to the shared pool. why says what ended the pod.
func (p *Policy) endPod(m *Model, podUID, why string) []string {
	var notes []string
	for _, name := range m.State.ContainersOfPod(podUID) {
		a, _ := m.State.Assignment(podUID, name)
		notes = append(notes, fmt.Sprintf("pod %s container %s: releases exclusive CPUs %s: %s", podUID, name, a.Held(), why))
	}
	for _, id := range m.podContainerIDs(podUID) {
		if t := m.Containers.Get(id); t.PodUID == podUID && !t.Stopped {
			delete(m.Releasing, id)
			m.remove(id)
		}
	}
	// What the pod held joins the shared pool: the pool is kept in step
	// with every assignment (CheckInvariants checks it), so this is the
	// pool a recompute from all the assignments gives, at the cost of
	// this pod's CPUs instead of the node's.
	released := m.podHeld(podUID, "")
	if h, held := m.State.Hold(podUID); held {
		released = released.Union(h.CPUs)
	}
	m.clearEnding(podUID)
	m.State.DeletePod(podUID)
	m.forgetRemovedLimits(podUID)
	p.returnToPool(m, released)
	return notes
}

// is reports whether the event's container c is the tracked one: the same
// pod, and the same name when the event gives one.
func (t *Tracked) is(c Container) bool {
	return t.PodUID == c.Pod.UID && (c.Name == "" || t.Name == c.Name)
}

// podRuns reports whether a container of a pod is tracked running.
func (m *Model) podRuns(podUID string) bool {
	for _, t := range m.podContainers(podUID) {
		if t.PodUID == podUID && !t.Stopped {
			return true
		}
	}
	return false
}

// sandboxesOf returns the ids of a pod's known sandboxes, sorted (not
// to be changed).
func (m *Model) sandboxesOf(podUID string) []string {
	return m.byPod.Get(podUID).sandboxes
}

// hasConfirmedSandbox reports whether a pod has a sandbox that runs and
// whose removal the runtime will report.
func (m *Model) hasConfirmedSandbox(podUID string) bool {
	for _, id := range m.sandboxesOf(podUID) {
		if sb := m.Sandboxes.Get(id); sb.PodUID == podUID && sb.Confirmed && !sb.Stopped {
			return true
		}
	}
	return false
}

// hasHoldOrResources reports whether CPUs are held for a pod or its
// pod-level resources are recorded.
func (m *Model) hasHoldOrResources(podUID string) bool {
	_, held := m.State.Hold(podUID)
	_, recorded := m.State.PodResources(podUID)
	return held || recorded
}

// Rebase recomputes the shared pool of m under this policy's configuration
// (after a configuration change) and points the shared containers at it.
func (p *Policy) Rebase(m *Model) Decision {
	nm := m.Clone()
	p.recomputePool(nm)
	return Decision{Model: nm, PoolChanged: poolChanged(m, nm)}
}
