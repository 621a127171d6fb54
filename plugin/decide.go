package plugin

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// rememberPod records a sandbox and returns the policy's view of it.
func (p *Plugin) rememberPod(pod *api.PodSandbox) policy.Pod {
	pp := podFromNRI(pod)
	if id := bounded(pod.GetId(), maxIDLen); id != "" {
		p.pods[id] = pp
	}
	return pp
}

// decide runs a decision. When it is refused for lack of CPUs while an
// unsolicited update in flight holds CPUs on loan, it waits (bounded, with
// the lock released: the update needs the plugin's lock to return) for that
// update to come back and decides once more.
func (p *Plugin) decide(fn func(*policy.Model) (policy.Decision, error)) (policy.Decision, error) {
	d, err := fn(p.model)
	if err == nil || p.model.Lending.IsEmpty() || p.sendDone == nil || !needsCPUs(err) {
		return d, err
	}
	done := p.sendDone
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(p.opts.LendWait):
	}
	p.mu.Lock()
	return fn(p.model)
}

// needsCPUs tells whether a refusal is about CPUs that are not free.
func needsCPUs(err error) bool {
	r, ok := policy.AsRefusal(err)
	return ok && (r.Reason == policy.ReasonAllocateCPUs || r.Reason == policy.ReasonResizeAllocateCPUs ||
		r.Reason == policy.ReasonTopologyAffinity)
}

// commit makes a new model current once its state is on disk. On a write
// failure nothing changes and the error says so. (A decision that changes
// nothing keeps the state it was given and writes nothing.)
func (p *Plugin) commit(m *policy.Model) error {
	if p.dirty || m.State != p.model.State {
		start := time.Now()
		err := p.store.Save(m.State)
		p.metrics.checkpointWrite(start, err)
		if err != nil {
			p.log.WithError(err).Error("checkpoint write failed")
			return fmt.Errorf("nri-cpumanager: cannot persist the CPU assignment (%s): %w", p.store.Path(), err)
		}
		p.dirty = false
	}
	p.model = m
	p.observeModel()
	return nil
}

// commitOrKeep commits a model for an event that cannot be refused (the
// runtime has already acted): on a write failure the model still becomes
// current, and the next commit writes the checkpoint again. A model whose
// state fails validation (a bug) never becomes current: every later commit
// would fail with it, refusing every request of the node.
func (p *Plugin) commitOrKeep(m *policy.Model) {
	err := p.commit(m)
	var inconsistent *state.InconsistentError
	switch {
	case err == nil:
	case errors.As(err, &inconsistent):
		p.log.WithError(err).Error("a decision made an inconsistent state; keeping the previous one")
	default:
		p.dirty = true
		p.model = m
		p.observeModel()
	}
}

// observeModel points the CPU gauges at the current model.
func (p *Plugin) observeModel() {
	p.metrics.setModel(p.model)
}

// confirm releases the CPUs of a confirmed shrink to the shared pool; the
// sender grows the shared containers.
func (p *Plugin) confirm(id string) {
	d := p.policy.Confirm(p.model, id)
	if d.Model == p.model {
		return
	}
	p.commitOrKeep(d.Model)
	p.markPending(d.Others)
}

// replyUpdates returns the updates to put in an event's reply: the
// decision's own, then those still pending (a failed unsolicited update
// rides on the next reply) that the decision does not already update,
// except the event's target, which the runtime handles separately. Each
// container appears once. They are recorded as handed to the runtime.
func (p *Plugin) replyUpdates(own []policy.Update, target string) []*api.ContainerUpdate {
	if len(p.pending) == 0 {
		for _, u := range own {
			p.handed(u, handedInReply)
		}
		return updatesToNRI(own)
	}
	all := own[:len(own):len(own)] // appending copies: the decision keeps its slice
	inReply := map[string]bool{target: true}
	for _, u := range own {
		inReply[u.ContainerID] = true
	}
	for _, u := range p.pendingUpdates() {
		if !inReply[u.ContainerID] {
			all = append(all, u)
		}
	}
	for _, u := range all {
		p.handed(u, handedInReply)
	}
	return updatesToNRI(all)
}

// refused logs a failed request. A refusal is a warning, and counted in
// refusals_total, the first time in refusalWindow; the kubelet's retries of
// it are logged at debug. A fault is always an error. key names the
// request; refused fills in the event and the refusal's reason.
func (p *Plugin) refused(event string, entry *logrus.Entry, key refusalKey, err error) {
	entry = entry.WithError(err)
	r, ok := policy.AsRefusal(err)
	if !ok {
		entry.Errorf("%s failed", event)
		return
	}
	key.event, key.reason, key.verdict = event, r.Reason, r.Verdict
	entry = entry.WithFields(logrus.Fields{"reason": r.Reason, "verdict": r.Verdict})
	if p.refusals.first(key) {
		p.metrics.refusal(r)
		entry.Warnf("%s refused", event)
		return
	}
	entry.Debugf("%s refused again (the kubelet retries; warned about once every %s)", event, refusalWindow)
}

func (p *Plugin) containerLog(c policy.Container) *logrus.Entry {
	return p.log.WithFields(logrus.Fields{"pod": c.Pod.Namespace + "/" + c.Pod.Name, "container": c.Name, "id": c.ID})
}

func (p *Plugin) logNotes(event string, notes []string) {
	for _, n := range notes {
		p.log.WithField("event", event).Info(n)
	}
}

// checkInvariants logs any violation of the policy's invariants: it would
// be a bug, and the log says exactly what.
func (p *Plugin) checkInvariants(event string) {
	if err := p.policy.CheckInvariants(p.model); err != nil {
		p.log.WithField("event", event).WithError(err).Error("invariant violated")
	}
}

// forgetContainersNotIn drops the plugin's per-container bookkeeping of
// containers the model no longer tracks.
func (p *Plugin) forgetContainersNotIn(m *policy.Model) {
	gone := func(id string) bool { return m.Containers[id] == nil }
	maps.DeleteFunc(p.ctrs, func(id string, _ *runtimeView) bool { return gone(id) })
	maps.DeleteFunc(p.pending, func(id string, _ bool) bool { return gone(id) })
	maps.DeleteFunc(p.warned, func(id string, _ bool) bool { return gone(id) })
}

// importFromKubelet builds the starting state from the kubelet's own
// checkpoint, resolving its container ids with the runtime's view. Any
// problem is logged and the given model kept: Synchronize then adopts the
// running containers' current cpusets instead.
func (p *Plugin) importFromKubelet(m *policy.Model, containers []policy.Container) *policy.Model {
	if fi, err := os.Stat(p.opts.KubeletCheckpoint); err != nil || fi.Size() == 0 {
		// No kubelet checkpoint (or the empty file a FileOrCreate mount
		// leaves): nothing to import.
		p.log.WithField("file", p.opts.KubeletCheckpoint).Info("no kubelet checkpoint to import")
		return m
	}
	byID := map[string]state.ContainerRef{}
	for _, c := range containers {
		byID[c.ID] = state.ContainerRef{PodUID: c.Pod.UID, Name: c.Name}
	}
	resolve := func(id string) (state.ContainerRef, bool) { ref, ok := byID[id]; return ref, ok }
	st, warnings, err := state.ImportKubelet(p.opts.KubeletCheckpoint, p.policy.Allocator().Topology().CPUs(), resolve)
	for _, w := range warnings {
		p.log.WithField("file", p.opts.KubeletCheckpoint).Warn(w)
	}
	if err != nil {
		p.log.WithError(err).WithField("file", p.opts.KubeletCheckpoint).Warn("kubelet checkpoint not imported")
		return m
	}
	p.log.WithFields(logrus.Fields{"file": p.opts.KubeletCheckpoint, "entries": st.NumAssignments()}).Info("imported the kubelet's CPU assignments")
	nm := policy.NewModel(st)
	nm.Lending = m.Lending
	return nm
}
