package plugin

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

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
		p.pending[u.ContainerID] = true
	}
	if len(updates) > 0 {
		p.kickSender()
	}
}

// kickSender wakes the sender without blocking.
func (p *Plugin) kickSender() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// sendLoop delivers pending updates as unsolicited UpdateContainers calls,
// outside of any handler, retrying failures with backoff.
func (p *Plugin) sendLoop(ctx context.Context) {
	backoff := p.opts.ReconnectMin
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-retry:
		}
		retry = nil
		if p.sendPending() {
			backoff = p.opts.ReconnectMin
			continue
		}
		retry = time.After(backoff)
		backoff = min(2*backoff, p.opts.ReconnectMax)
	}
}

// sendPending sends what is pending once. It returns false when something
// is left to retry.
func (p *Plugin) sendPending() bool {
	p.mu.Lock()
	s := p.stub
	pending := p.pendingUpdates()
	if s == nil || !p.synchronized || len(pending) == 0 {
		p.mu.Unlock()
		// Without a connection the next Synchronize reconciles everything.
		return true
	}
	// Lend every free CPU the update carries: containerd may apply it after
	// an event the plugin decides meanwhile.
	updates, distinct := convertUpdates(pending)
	before := make(map[string]uint64, len(pending))
	for _, u := range pending {
		before[u.ContainerID] = p.view(u.ContainerID).generation
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
		// Record what was delivered unless a reply meanwhile set newer.
		if err == nil && !failedIDs[u.ContainerID] && p.model.Containers[u.ContainerID] != nil && // not removed meanwhile
			p.view(u.ContainerID).generation == before[u.ContainerID] {
			p.delivered(u)
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

// setApplied records what a container runs on (an update handed to the
// runtime, or what verification read) and bumps its generation.
func (p *Plugin) setApplied(id string, cpus cpuset.CPUSet) {
	v := p.view(id)
	v.applied, v.known = cpus, true
	v.generation++
}

// appliedTo returns what the plugin believes container id runs on (empty
// when unknown).
func (p *Plugin) appliedTo(id string) cpuset.CPUSet {
	if v := p.ctrs[id]; v != nil && v.known {
		return v.applied
	}
	return cpuset.New()
}

// delivered records an update handed to the runtime: no longer pending.
func (p *Plugin) delivered(u policy.Update) {
	p.setApplied(u.ContainerID, u.CPUs)
	delete(p.pending, u.ContainerID)
}
