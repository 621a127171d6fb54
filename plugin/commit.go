package plugin

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// decide runs a decision. When it is refused for lack of CPUs while an
// unsolicited update in flight holds CPUs on loan, it waits (bounded, with
// the lock released: the update needs the plugin's lock to return) for that
// update to come back and decides once more.
func (p *Plugin) decide(fn func(*policy.Model) (policy.Decision, error)) (policy.Decision, error) {
	d, err := fn(p.model)
	done := p.ledger.sendInFlight()
	if err == nil || p.model.Lending.IsEmpty() || done == nil || !needsCPUs(err) {
		return d, err
	}
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
// failure the model stays as it was and the error says so; the file may
// hold the refused state all the same (a write fails after its rename when
// the directory's fsync does), so the next commit writes the checkpoint
// again, whether or not its decision changes anything. Otherwise a
// decision that changes nothing writes nothing, whether it kept the state
// it was given or copied it and changed nothing (a confirmation with
// nothing to confirm: a third of the commits of a load run): the state
// on disk is already that one.
func (p *Plugin) commit(m *policy.Model) error {
	if p.dirty || m.State != p.model.State && !m.State.Equal(p.model.State) {
		start := time.Now()
		p.writes.begin()
		err := p.save(m.State)
		p.writes.end()
		p.metrics.checkpointWrite(start, err)
		if err != nil {
			p.dirty = true
			// Once per distinct error per minute: a failing disk makes every
			// request fail (checkpoint_writes_total counts them all), and
			// the log may be on the same disk.
			entry := p.log.WithError(err)
			if p.writeErrors.first(err.Error()) {
				entry.Error("checkpoint write failed (the same failure is logged again at most once a minute; checkpoint_writes_total counts each)")
			} else {
				entry.Debug("checkpoint write failed")
			}
			return fmt.Errorf("nri-cpumanager: cannot persist the CPU assignment (%s): %w", p.store.Path(), err)
		}
		p.dirty = false
	}
	p.setModel(m)
	return nil
}

// commitOrKeep commits a model for an event that cannot be refused (the
// runtime has already acted): on a write failure the model still becomes
// current, and the next commit writes the checkpoint again. A model whose
// state fails validation (a bug) never becomes current: every later commit
// would fail with it, refusing every request of the node. It reports
// whether m became current.
func (p *Plugin) commitOrKeep(m *policy.Model) bool {
	err := p.commit(m)
	var inconsistent *state.InconsistentError
	switch {
	case err == nil:
	case errors.As(err, &inconsistent):
		p.log.WithError(err).Error("a decision made an inconsistent state; keeping the previous one")
		return false
	default:
		p.dirty = true
		p.setModel(m)
	}
	return true
}

// setModel makes m current, and the model the CPU gauges describe.
func (p *Plugin) setModel(m *policy.Model) {
	if m.State != p.model.State {
		p.cpusetChanged()
	}
	p.model = m
	p.metrics.setModel(m)
}

// apply commits the decision of an event that cannot be refused, logs its
// notes, forgets the containers it no longer tracks, and makes its updates
// of other containers pending (for events whose reply carries none).
func (p *Plugin) apply(event string, d policy.Decision) {
	p.reporter.notes(event, d.Notes)
	p.commitOrKeep(d.Model)
	p.forgetGone()
	p.markPending(d.Updates())
	p.applyPendingLocked() // CPUs may have been freed
}

// forgetGone drops what the plugin keeps of containers the model no
// longer tracks.
func (p *Plugin) forgetGone() {
	p.ledger.forgetNotIn(p.tracked)
	maps.DeleteFunc(p.warned, func(id string, _ bool) bool { return !p.tracked(id) })
	maps.DeleteFunc(p.resized, func(id string, _ resizedWith) bool { return !p.tracked(id) })
}

// tracked reports whether the model tracks container id.
func (p *Plugin) tracked(id string) bool { return p.model.Containers.Get(id) != nil }

// resizedWith is the pod and spec a container's update was decided with.
type resizedWith struct {
	pod  policy.Pod
	spec policy.PodSpec
}

// confirm releases the CPUs of a confirmed shrink to the shared pool (or
// to its pod's members that do not run, when the update was decided with
// the pod's spec); the sender grows the shared containers.
func (p *Plugin) confirm(id string) {
	with := p.resized[id]
	delete(p.resized, id)
	if d := p.policy.ConfirmWithSpec(p.model, id, with.pod, with.spec); d.Model != p.model {
		p.apply("PostUpdateContainer", d)
	}
}

// markPending records that the given updates must still reach the runtime,
// and wakes the sender.
func (p *Plugin) markPending(updates []policy.Update) {
	for _, u := range updates {
		p.setPending(u.ContainerID)
	}
}

// setPending records that container id's cpuset must still be sent, and
// wakes the sender.
func (p *Plugin) setPending(id string) {
	p.ledger.setPending(id)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// desired is the ledger's desiredFunc: what the policy wants of the
// given containers on the current model.
func (p *Plugin) desired(ids []string) ([]policy.Update, []string) {
	return p.policy.DesiredUpdates(p.model, ids)
}

// decideAndCommit runs a decision (decide) and commits it: the outcome
// of a request the plugin may refuse, which changes nothing then.
func (p *Plugin) decideAndCommit(o outcome, fn func(*policy.Model) (policy.Decision, error)) outcome {
	o.decision, o.err = p.decide(fn)
	if o.err == nil {
		o.err = p.commit(o.decision.Model)
	}
	return o
}

// checkInvariants logs any violation of the policy's invariants: it would
// be a bug, and the log says exactly what.
func (p *Plugin) checkInvariants(event string) {
	if err := p.policy.CheckInvariants(p.model); err != nil {
		p.log.WithField("event", event).WithError(err).Error("invariant violated")
	}
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

// writeClock times the checkpoint write in progress on the monotonic
// clock, for readers that must not wait for the plugin's lock (the
// metrics): a stalled disk holds the lock for as long as the write takes.
type writeClock struct {
	base time.Time
	// since is when the write in progress began, in nanoseconds after
	// base plus one; 0 when none is.
	since atomic.Int64
}

func newWriteClock() *writeClock { return &writeClock{base: time.Now()} }

func (c *writeClock) begin() { c.since.Store(int64(time.Since(c.base)) + 1) }

func (c *writeClock) end() { c.since.Store(0) }

// age returns how long the write in progress has taken (0 when none is).
func (c *writeClock) age() time.Duration {
	since := c.since.Load()
	if since == 0 {
		return 0
	}
	return max(0, time.Since(c.base)-time.Duration(since-1))
}

// onceAMinute tells whether a message is to be logged: the first time
// it is seen, then once a minute at most, each distinct message apart.
type onceAMinute struct {
	now  func() time.Time
	last map[string]time.Time
}

func newOnceAMinute(now func() time.Time) *onceAMinute {
	return &onceAMinute{now: now, last: map[string]time.Time{}}
}

// first reports whether msg is due to be logged now, and records it.
func (o *onceAMinute) first(msg string) bool {
	now := o.now()
	if last, seen := o.last[msg]; seen && now.Sub(last) < time.Minute {
		return false
	}
	if len(o.last) >= 64 {
		clear(o.last) // (bounded: distinct errors of a failing disk are few)
	}
	o.last[msg] = now
	return true
}
