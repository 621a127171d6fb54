package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// defaultSyncTimeout bounds a connection from the dial to Synchronize:
// containerd's registration timeout (5 s) and its request timeout (2 s),
// with a margin.
const defaultSyncTimeout = 10 * time.Second

// Run connects to NRI and serves events until ctx is cancelled. When
// containerd goes away it keeps running and re-dials with exponential
// backoff; every (re)connection starts with a Synchronize.
func (p *Plugin) Run(ctx context.Context) error {
	go p.sendLoop(ctx)
	go p.maintainLoop(ctx)
	backoff := p.opts.ReconnectMin
	for {
		started := time.Now()
		err := p.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		p.metrics.reconnect()
		if time.Since(started) > p.opts.ReconnectMax {
			backoff = p.opts.ReconnectMin
		}
		p.log.WithError(err).WithField("retryIn", backoff).Warn("NRI connection lost or failed; reconnecting")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.opts.ReconnectMax)
	}
}

// failurePolicy returns the NRI failure policy the plugin registers. It
// asks a runtime that honours failure policies (NRI v0.12.5 and later) to
// fail a request the plugin cannot answer (it died, or hung past the
// request timeout) instead of going on without it: a container created
// then would run unpinned over pinned CPUs until the plugin's next
// Synchronize. The kubelet retries the failed call. A plugin that timed out
// is still disconnected (KeepConnected unset), so one hang costs one
// request. Runtimes with an older NRI (containerd 2.4.2 carries v0.12.3)
// do not know the field and ignore it.
func failurePolicy() *api.FailurePolicy { return &api.FailurePolicy{FailRequest: true} }

// serve runs one NRI connection until it ends.
func (p *Plugin) serve(ctx context.Context) error {
	s, err := stub.New(p,
		stub.WithPluginName(p.opts.Name),
		stub.WithPluginIdx(p.opts.Index),
		stub.WithSocketPath(p.opts.Socket),
		stub.WithLogger(nriLogger{p.log.WithField("component", "nri")}),
		stub.WithFailurePolicy(failurePolicy()),
	)
	if err != nil {
		return fmt.Errorf("creating NRI stub: %w", err)
	}
	p.mu.Lock()
	p.conn = connection{stub: s}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.conn = connection{}
		p.mu.Unlock()
		p.metrics.setReady(false)
	}()
	return s.Run(ctx)
}
