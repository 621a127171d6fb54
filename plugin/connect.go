package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// defaultSyncTimeout bounds a connection from the dial to Synchronize:
// containerd's registration timeout (5 s) and its request timeout (2 s),
// with a margin.
const defaultSyncTimeout = 10 * time.Second

// maxAbandoned bounds the connections the plugin gives up on without
// their stub returning (see serve): past it the process exits, and the
// kubelet starts a fresh one.
const maxAbandoned = 16

// errWedged is Run's error when the NRI stub keeps hanging.
var errWedged = errors.New("the NRI stub hung on too many connections; exiting so that a fresh process connects")

// Run connects to NRI and serves events until ctx is cancelled. When
// containerd goes away it keeps running and re-dials with exponential
// backoff; every (re)connection starts with a Synchronize. It returns
// promptly once ctx is cancelled, whatever the connection is doing.
func (p *Plugin) Run(ctx context.Context) error {
	go p.sendLoop(ctx)
	go p.maintainLoop(ctx)
	backoff := p.opts.ReconnectMin
	abandoned := 0
	for {
		started := time.Now()
		err := p.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errNoSync) {
			if abandoned++; abandoned >= maxAbandoned {
				return errWedged
			}
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

// errNoSync is serve's error when the runtime did not synchronize the
// connection in time.
var errNoSync = errors.New("no Synchronize from the runtime")

// serve runs one NRI connection until it ends, ctx is cancelled, or the
// runtime has not synchronized it within SyncTimeout of the dial. The
// last one is the watchdog: when the runtime closes the connection after
// RegisterPlugin and before Configure (containerd restarting at that
// moment), the NRI stub (containerd/nri v0.12.5) waits for the
// configuration for ever, holding a lock its close handler needs, so its
// Run never returns. The plugin then closes the connection itself and
// gives up on that stub (its goroutine stays blocked; after maxAbandoned
// of them the process exits instead).
func (p *Plugin) serve(ctx context.Context) error {
	var dialed connTracker
	s, err := stub.New(p,
		stub.WithPluginName(p.opts.Name),
		stub.WithPluginIdx(p.opts.Index),
		stub.WithSocketPath(p.opts.Socket),
		stub.WithDialer(dialed.dial),
		stub.WithLogger(nriLogger{p.log.WithField("component", "nri")}),
		stub.WithFailurePolicy(failurePolicy()),
	)
	if err != nil {
		return fmt.Errorf("creating NRI stub: %w", err)
	}
	p.mu.Lock()
	p.conn.stub = s
	p.mu.Unlock()
	defer p.disconnected()

	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	watchdog := time.NewTimer(p.opts.SyncTimeout)
	defer watchdog.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			dialed.close()
			return ctx.Err()
		case <-watchdog.C:
			if p.Ready() {
				continue // synchronized: the watchdog's job is done
			}
			dialed.close()
			p.log.WithField("timeout", p.opts.SyncTimeout).Error("the runtime did not synchronize the connection in time; dropping it")
			return fmt.Errorf("%w within %s of the dial", errNoSync, p.opts.SyncTimeout)
		}
	}
}

// disconnected records that the plugin has no connection.
func (p *Plugin) disconnected() {
	p.mu.Lock()
	p.conn = connection{down: p.conn.downSince(time.Now())}
	p.mu.Unlock()
	p.metrics.setReady(false)
}

// connTracker dials the NRI socket and remembers the connection, so that
// the watchdog can close it.
type connTracker struct {
	mu   sync.Mutex
	conn net.Conn
}

func (t *connTracker) dial(path string) (net.Conn, error) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.conn = conn
	t.mu.Unlock()
	return conn, nil
}

func (t *connTracker) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn != nil {
		_ = t.conn.Close()
	}
}
