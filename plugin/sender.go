package plugin

import (
	"context"
	"errors"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"
)

// The sender delivers the pending updates that no reply carried (the
// shared containers' growth after a confirmed shrink or a removal, updates
// that failed, drift the verifier found) as unsolicited UpdateContainers
// calls, outside of any handler, once the runtime is quiet (ledger.go
// says why and when), retrying failures with backoff. While the plugin is
// not connected nothing is pending: the next Synchronize sends every
// container what it should run on.

// sendLoop runs the sender until ctx is cancelled.
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
		due, any := p.nextSend()
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

// nextSend returns when the pending updates should go out, if any are
// pending. Without a synchronized connection it drops them: the next
// Synchronize sends every container what it should run on, and a sender
// waiting for a runtime that is away would spin.
func (p *Plugin) nextSend() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn.stub == nil || !p.link.isSynchronized() || !p.handing() {
		p.ledger.clearPending()
		return time.Time{}, false
	}
	return p.ledger.sendDue(p.opts.SendDelay, p.opts.SendMaxDelay)
}

// sendPending sends what is pending as one unsolicited update, if it is
// still due (an event may come between the sender's wait and its lock).
// It returns false when something is left to retry.
func (p *Plugin) sendPending() bool {
	batch, s, updates, lent := p.collectPending()
	if batch == nil {
		return true
	}
	failed, err := p.updateWithin(s, updates)
	return p.settleSend(batch, lent, failed, err)
}

// errUnsolicitedTimeout says that the runtime did not answer an
// unsolicited update within UnsolicitedTimeout.
var errUnsolicitedTimeout = errors.New("the runtime did not answer the unsolicited update in time; its connection is closed and the plugin synchronizes again")

// updateWithin sends an unsolicited update on stub s and waits at most
// UnsolicitedTimeout for the answer (the stub's call has no deadline of
// its own). Past it the connection is closed: its call then returns, the
// CPUs it lent come back only then (the runtime may have applied it
// meanwhile), and the next Synchronize sends every container what it
// should run on.
func (p *Plugin) updateWithin(s stub.Stub, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	type result struct {
		failed []*api.ContainerUpdate
		err    error
	}
	done := make(chan result, 1)
	go func() {
		failed, err := s.UpdateContainers(updates)
		done <- result{failed, err}
	}()
	timer := time.NewTimer(p.opts.UnsolicitedTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.failed, r.err
	case <-timer.C:
	}
	p.log.WithField("timeout", p.opts.UnsolicitedTimeout).Error("the runtime did not answer an unsolicited update in time; closing the connection to synchronize again")
	p.dropConnection(s)
	r := <-done // (a closed connection fails the call)
	return r.failed, errors.Join(errUnsolicitedTimeout, r.err)
}

// dropConnection closes the connection of stub s, if it is still the
// current one: the runtime sees the plugin gone, and Run dials again.
func (p *Plugin) dropConnection(s stub.Stub) {
	p.mu.Lock()
	drop := p.conn.drop
	current := p.conn.stub == s
	p.mu.Unlock()
	if current && drop != nil {
		drop()
	}
}

// collectPending takes the pending updates for an unsolicited update:
// they are recorded as handed, and the free CPUs they carry are lent
// (Model.Lending) until settleSend. It returns a nil batch when nothing is
// to be sent now.
func (p *Plugin) collectPending() ([]sent, stub.Stub, []*api.ContainerUpdate, cpuset.CPUSet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.conn.stub
	if s == nil || !p.link.isSynchronized() {
		return nil, nil, nil, cpuset.New()
	}
	if due, any := p.ledger.sendDue(p.opts.SendDelay, p.opts.SendMaxDelay); !any || time.Now().Before(due) {
		return nil, nil, nil, cpuset.New() // an event came meanwhile: the sender waits again
	}
	pending := p.ledger.pendingUpdates(p.desired)
	if len(pending) == 0 {
		return nil, nil, nil, cpuset.New()
	}
	updates, distinct := convertUpdates(pending)
	batch := p.ledger.startSend(pending)
	lent := p.policy.FreeAmong(p.model, distinct...)
	p.model = p.model.Lend(lent)
	return batch, s, updates, lent
}

// settleSend records the outcome of an unsolicited update: the lent CPUs
// come back, the updates that did not land are pending again. It returns
// false when something is left to retry.
func (p *Plugin) settleSend(batch []sent, lent cpuset.CPUSet, failed []*api.ContainerUpdate, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.model = p.model.Unlend(lent)
	failedIDs := make(map[string]bool, len(failed))
	for _, f := range failed {
		failedIDs[f.GetContainerId()] = true
	}
	for _, id := range p.ledger.finishSend(batch, failedIDs, err, p.tracked) {
		p.setPending(id)
	}
	if err == nil {
		// A shrink it delivered (a scale-down delay that is over) is
		// applied: the CPUs it gave up can go to the shared containers.
		for _, s := range batch {
			if id := s.u.ContainerID; !failedIDs[id] {
				p.confirm(id)
			}
		}
	}
	p.metrics.unsolicited(len(batch), len(failed), err)
	entry := p.log.WithFields(logrus.Fields{"updates": len(batch), "failed": len(failed)})
	if err != nil || len(failed) > 0 {
		entry.WithError(err).Warn("unsolicited cpuset update failed; will retry, or ride on the next reply")
		return false
	}
	entry.Debug("unsolicited cpuset updates delivered")
	return true
}
