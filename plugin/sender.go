package plugin

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// An unsolicited update lends the free CPUs it carries (Model.Lending):
// containerd applies it when it gets its NRI lock, which may be after an
// event it delivers meanwhile, so a CPU it gives a shared container cannot
// be handed out exclusively until it returns — not even one the container
// runs on already: the event's reply would take it away and the update,
// landing later, give it back. A handler cannot wait for such an update
// either: containerd holds the lock while the handler runs. So the plugin
// sends as few as it can, when the runtime is quiet: pending updates ride
// on the replies of the events that keep coming, and go out on their own
// only after SendDelay without an event and once the runtime has applied
// the last reply (SendMaxDelay at the latest), one update at a time, each
// container once.

// pendingUpdates returns the updates of the pending containers that still
// run: those that only lose CPUs first, then the others, each in id order.
func (p *Plugin) pendingUpdates() []policy.Update {
	var shrinking, other []policy.Update
	desired, none := p.policy.DesiredUpdates(p.model, slices.Sorted(maps.Keys(p.pending)))
	for _, id := range none {
		delete(p.pending, id)
	}
	for _, u := range desired {
		// (Sizes first: most pending updates grow, and the sets are maps.)
		if v := p.ctrs[u.ContainerID]; v != nil && v.known && u.CPUs.Size() <= v.applied.Size() && u.CPUs.IsSubsetOf(v.applied) {
			shrinking = append(shrinking, u)
		} else {
			other = append(other, u)
		}
	}
	return append(shrinking, other...)
}

// markPending records that the given updates must still reach the runtime.
func (p *Plugin) markPending(updates []policy.Update) {
	for _, u := range updates {
		p.setPending(u.ContainerID)
	}
}

// setPending records that container id's cpuset must still be sent.
func (p *Plugin) setPending(id string) {
	if len(p.pending) == 0 {
		p.pendingSince = time.Now()
	}
	p.pending[id] = true
	p.kickSender()
}

// event records that the runtime delivered an event: the replies of the
// earlier ones are applied (containerd applies a reply's updates of other
// containers before it delivers the next event), and the runtime is busy.
// Called with mu held by every handler but StopPodSandbox's, which does
// nothing.
func (p *Plugin) event() {
	p.seq++
	p.lastEvent = time.Now()
	p.replying = false
}

// kickSender wakes the sender without blocking.
func (p *Plugin) kickSender() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// sendDue returns when the pending updates should go out, if any are
// pending. Called with mu held.
func (p *Plugin) sendDue() (time.Time, bool) {
	if len(p.pending) == 0 {
		return time.Time{}, false
	}
	if p.replying {
		// containerd applies the last reply under its NRI lock (a runc
		// update per container) and delivers the events queued meanwhile
		// before an unsolicited update would get the lock.
		return p.lastEvent.Add(p.opts.SendMaxDelay), true
	}
	quiet := p.lastEvent.Add(p.opts.SendDelay)
	latest := p.pendingSince.Add(p.opts.SendMaxDelay)
	if latest.Before(quiet) {
		return latest, true
	}
	return quiet, true
}

// sendLoop delivers pending updates as unsolicited UpdateContainers calls,
// outside of any handler, once the runtime is quiet, retrying failures with
// backoff.
func (p *Plugin) sendLoop(ctx context.Context) {
	backoff := p.opts.ReconnectMin
	var notBefore time.Time
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-timer:
		}
		p.mu.Lock()
		due, any := p.sendDue()
		p.mu.Unlock()
		if !any {
			timer = nil
			continue
		}
		if notBefore.After(due) {
			due = notBefore
		}
		if wait := time.Until(due); wait > 0 {
			timer = time.After(wait)
			continue
		}
		if p.sendPending() {
			backoff, notBefore = p.opts.ReconnectMin, time.Time{}
		} else {
			notBefore = time.Now().Add(backoff)
			backoff = min(2*backoff, p.opts.ReconnectMax)
		}
		timer = time.After(time.Until(notBefore))
	}
}

// sendPending sends what is pending as one unsolicited update, if no
// event came for SendDelay (an event may come between the sender's wait
// and its lock). It returns false when something is left to retry.
func (p *Plugin) sendPending() bool {
	p.mu.Lock()
	s := p.stub
	if s == nil || !p.synchronized {
		// Without a connection the next Synchronize reconciles everything.
		p.mu.Unlock()
		return true
	}
	if due, any := p.sendDue(); !any || time.Now().Before(due) {
		p.mu.Unlock() // an event came meanwhile: the sender waits again
		return true
	}
	pending := p.pendingUpdates()
	if len(pending) == 0 {
		p.mu.Unlock()
		return true
	}
	updates, distinct := convertUpdates(pending)
	type sent struct {
		generation uint64
		before     cpuset.CPUSet
		known      bool
	}
	was := make(map[string]sent, len(pending))
	for _, u := range pending {
		v := p.view(u.ContainerID)
		before, known := v.applied, v.known
		v.hand(u.CPUs, handedUnsolicited, p.seq)
		was[u.ContainerID] = sent{generation: v.generation, before: before, known: known}
		delete(p.pending, u.ContainerID) // marked again if it changes meanwhile
	}
	lend := p.policy.FreeAmong(p.model, distinct...)
	p.model = p.model.Lend(lend)
	done := make(chan struct{})
	p.sendDone = done
	p.mu.Unlock()

	failed, err := s.UpdateContainers(updates)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.model = p.model.Unlend(lend)
	p.sendDone = nil
	close(done)
	failedIDs := map[string]bool{}
	for _, f := range failed {
		failedIDs[f.GetContainerId()] = true
	}
	for _, u := range pending {
		v := p.ctrs[u.ContainerID]
		if v == nil || p.model.Containers[u.ContainerID] == nil {
			continue // removed meanwhile
		}
		v.inFlight = false
		w := was[u.ContainerID]
		switch {
		case err != nil || failedIDs[u.ContainerID]:
			// Not applied: it runs on what it ran on, and the update is
			// due again.
			if v.generation == w.generation {
				v.unhand(w.before, w.known)
			}
			p.setPending(u.ContainerID)
		case v.generation == w.generation:
			v.confirm()
		case !cpumask.Equal(v.applied, u.CPUs):
			// A reply changed the container while the update was in
			// flight, and which landed last is unknown: send what the
			// model wants once more. (Both are safe: the lent CPUs were
			// handed to nobody.)
			p.setPending(u.ContainerID)
		}
	}
	p.metrics.unsolicited(len(pending), len(failed), err)
	entry := p.log.WithFields(logrus.Fields{"updates": len(pending), "failed": len(failed)})
	if err != nil || len(failed) > 0 {
		entry.WithError(err).Warn("unsolicited cpuset update failed; will retry, or ride on the next reply")
		return false
	}
	entry.Debug("unsolicited cpuset updates delivered")
	return true
}

// appliedTo returns what the plugin believes container id runs on (empty
// when unknown).
func (p *Plugin) appliedTo(id string) cpuset.CPUSet {
	if v := p.ctrs[id]; v != nil && v.known {
		return v.applied
	}
	return cpuset.New()
}

// handed records an update handed to the runtime in an event's reply (or
// as its target): no longer pending.
func (p *Plugin) handed(u policy.Update, kind handKind) {
	p.view(u.ContainerID).hand(u.CPUs, kind, p.seq)
	delete(p.pending, u.ContainerID)
	p.replying = true
}
