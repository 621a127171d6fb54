package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// defaultConfigureTimeout bounds a connection from the dial to the
// runtime's Configure: containerd's registration timeout (5 s) and its
// request timeout (2 s), with a margin.
const defaultConfigureTimeout = 10 * time.Second

// defaultDialInterval is how often the plugin dials the NRI socket while
// nothing accepts there (containerd stopped or restarting): a dial of a
// local socket costs nothing, and every second the plugin is away a
// container may start unpinned.
const defaultDialInterval = 500 * time.Millisecond

// defaultWatchdogTrips bounds the connections in a row the plugin gives
// up on without their stub returning (see serve): past it the process
// exits, and the kubelet starts a fresh one. A synchronized connection
// resets the count.
const defaultWatchdogTrips = 16

// defaultMaxAbandoned bounds the stubs the watchdog gives up on over the
// process's life: each leaves its goroutines blocked for good.
const defaultMaxAbandoned = 64

// defaultUnsolicitedTimeout bounds an unsolicited update (twice
// containerd's request timeout, with a margin).
const defaultUnsolicitedTimeout = 5 * time.Second

// errWedged is Run's error when the NRI stub keeps hanging.
var errWedged = errors.New("the NRI stub hung on too many connections in a row; exiting so that a fresh process connects")

// errTooManyAbandoned is Run's error when the stubs the watchdog gave up
// on, over the process's life, reach MaxAbandoned.
var errTooManyAbandoned = errors.New("the watchdog gave up on too many NRI stubs over the plugin's life (each leaves goroutines behind); exiting so that a fresh process connects")

// Run connects to NRI and serves events until ctx is cancelled. When
// containerd goes away it keeps running: it dials the socket every
// DialInterval while nothing accepts there, and after a connection ends
// it dials again within DialInterval when the connection got as far as
// the runtime's Configure (containerd restarted, or dropped the plugin)
// or came from another socket than the one before (containerd dying
// during its start makes a new socket each time it starts again). It
// backs off exponentially (ReconnectMin to ReconnectMax) only while the
// same socket keeps failing connections before registering them; a
// synchronized connection resets the backoff. Every (re)connection starts
// with a Synchronize. Run returns promptly once ctx is cancelled, whatever
// the connection is doing.
func (p *Plugin) Run(ctx context.Context) error {
	go p.sendLoop(ctx)
	go p.maintainLoop(ctx)
	backoff := p.opts.ReconnectMin
	abandoned, lifetime := 0, 0
	dialFailures := 0
	var lastSocket socketID
	for {
		out := p.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if out.synchronized {
			abandoned, backoff = 0, p.opts.ReconnectMin
		}
		if errors.Is(out.err, errNoConfigure) {
			p.metrics.abandonedStub()
			if lifetime++; lifetime >= p.opts.MaxAbandoned {
				return errTooManyAbandoned
			}
			if abandoned++; abandoned >= p.opts.WatchdogTrips {
				return errWedged
			}
		}
		wait := p.opts.DialInterval
		if out.dialed {
			dialFailures = 0
			if out.configured || errors.Is(out.err, errNoConfigure) || out.socket != lastSocket {
				backoff = p.opts.ReconnectMin // (a new failure of this socket backs off from the start)
			} else {
				wait, backoff = backoff, min(2*backoff, p.opts.ReconnectMax)
			}
			lastSocket = out.socket
			p.metrics.reconnect()
			p.log.WithError(out.err).WithField("retryIn", wait).Warn("NRI connection lost or failed; reconnecting")
		} else {
			// The first failed dial of a run is worth a warning and a
			// count; the next ones, every DialInterval until the runtime
			// is back, are not.
			if dialFailures++; dialFailures == 1 {
				p.metrics.reconnect()
				p.log.WithError(out.err).WithField("retryEvery", wait).Warn("cannot reach the NRI socket; dialing until the runtime is back")
			} else {
				p.log.WithError(out.err).Debug("NRI socket still unreachable")
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
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

// errNoConfigure is serve's error when the runtime did not configure the
// connection in time.
var errNoConfigure = errors.New("no Configure from the runtime")

// connOutcome is how a connection ended.
type connOutcome struct {
	// dialed: the socket accepted the connection (else nothing listened).
	dialed bool
	// socket is the socket file it was dialed on (its identity), when
	// dialed.
	socket socketID
	// configured: the runtime configured the plugin on it (it got as far
	// as the registration); synchronized: and synchronized it.
	configured, synchronized bool
	err                      error
}

// socketID identifies a socket file: a runtime that starts again makes a
// new one at the same path. The inode number alone does not tell: a file
// system gives the number of a file just removed to the next one; its
// change time with it does.
type socketID struct {
	dev, ino uint64
	ctime    int64
}

// socketOf returns the identity of the socket file at path (zero when it
// cannot be read: then every connection looks like a new socket's).
func socketOf(path string) socketID {
	fi, err := os.Stat(path)
	if err != nil {
		return socketID{}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return socketID{dev: uint64(st.Dev), ino: st.Ino, ctime: st.Ctim.Nano()}
	}
	return socketID{}
}

// serve runs one NRI connection until it ends or ctx is cancelled.
//
// It is also the watchdog of one hang: when the runtime closes the
// connection after RegisterPlugin and before Configure (containerd
// restarting at that moment), the NRI stub (containerd/nri v0.12.5) waits
// for the configuration for ever, holding a lock its close handler needs,
// so its Run never returns. So a connection the runtime has not configured
// within ConfigureTimeout of the dial is closed by the plugin, which gives
// up on that stub (its goroutine stays blocked; after WatchdogTrips of
// them in a row the process exits instead). Once configured, a connection may
// wait for its Synchronize as long as the runtime takes: containerd holds
// it until the creations and removals in flight are done.
func (p *Plugin) serve(ctx context.Context) (out connOutcome) {
	var dialed connTracker
	configured := newSignal()
	s, err := stub.New(p,
		stub.WithPluginName(p.opts.Name),
		stub.WithPluginIdx(p.opts.Index),
		stub.WithSocketPath(p.opts.Socket),
		stub.WithDialer(dialed.dial),
		stub.WithLogger(nriLogger{p.log.WithField("component", "nri")}),
		stub.WithFailurePolicy(failurePolicy()),
	)
	if err != nil {
		return connOutcome{err: fmt.Errorf("creating NRI stub: %w", err)}
	}
	p.mu.Lock()
	p.conn = connection{stub: s, drop: dialed.close}
	p.mu.Unlock()
	p.configured.Store(configured)
	defer func() {
		out.dialed, out.socket = dialed.established()
		out.synchronized = p.link.isSynchronized()
		select {
		case <-configured.done():
			out.configured = true
		default:
		}
		p.disconnected()
	}()

	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var watchdog <-chan time.Time
	if p.opts.ConfigureTimeout > 0 {
		t := time.NewTimer(p.opts.ConfigureTimeout)
		defer t.Stop()
		watchdog = t.C
	}
	configuredC := configured.done()
	for {
		select {
		case err := <-done:
			return connOutcome{err: err}
		case <-ctx.Done():
			dialed.close()
			return connOutcome{err: ctx.Err()}
		case <-configuredC:
			watchdog, configuredC = nil, nil // past the hang the watchdog is for
		case <-watchdog:
			dialed.close()
			p.log.WithField("timeout", p.opts.ConfigureTimeout).Error("the runtime did not configure the connection in time; dropping it")
			return connOutcome{err: fmt.Errorf("%w within %s of the dial", errNoConfigure, p.opts.ConfigureTimeout)}
		}
	}
}

// disconnected records that the plugin has no connection: first what the
// probes and the ready gauge read, without the plugin's lock — a handler
// stalled in a checkpoint write holds it, and the runtime drops a plugin
// whose request timed out, so the link's end must show while the handler
// still waits.
func (p *Plugin) disconnected() {
	p.link.down()
	p.mu.Lock()
	p.conn = connection{}
	p.mu.Unlock()
}

// connTracker dials the NRI socket and remembers the connection, so that
// the watchdog can close it, and the socket it came from.
type connTracker struct {
	mu     sync.Mutex
	conn   net.Conn
	socket socketID
}

func (t *connTracker) dial(path string) (net.Conn, error) {
	socket := socketOf(path) // (before: a runtime that drops the connection may remove its socket at once)
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.conn, t.socket = conn, socket
	t.mu.Unlock()
	return conn, nil
}

// established reports whether a dial succeeded, and on which socket.
func (t *connTracker) established() (bool, socketID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conn != nil, t.socket
}

func (t *connTracker) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn != nil {
		_ = t.conn.Close()
	}
}

// signal is closed once, by whoever fires it first.
type signal struct {
	once sync.Once
	c    chan struct{}
}

func newSignal() *signal { return &signal{c: make(chan struct{})} }

func (s *signal) fire()                 { s.once.Do(func() { close(s.c) }) }
func (s *signal) done() <-chan struct{} { return s.c }

// linkState is what the probes read of the NRI connection. It is atomic,
// not under the plugin's lock: a handler holds that lock across a
// checkpoint write, and the probes must answer while a slow disk stalls
// the write.
type linkState struct {
	synchronized atomic.Bool
	// downSince is when the plugin last stopped being synchronized (its
	// start, or the end of its last synchronized connection), on the
	// monotonic clock (elapsed): a step of the wall clock neither fails
	// the liveness probe nor hides a wedge.
	downSince atomic.Int64
	// elapsed reads the monotonic clock: the time since a fixed instant.
	elapsed func() time.Duration
	// mu orders up and down (never the plugin's lock); epoch counts the
	// connections' ends, so that a Synchronize of a connection that ended
	// while it waited for the plugin's lock does not mark the next one
	// synchronized.
	mu    sync.Mutex
	epoch uint64
}

// newLinkState returns the link of a plugin that is not connected yet,
// on the monotonic clock elapsed (nil: the process's own).
func newLinkState(elapsed func() time.Duration) *linkState {
	if elapsed == nil {
		start := time.Now()
		elapsed = func() time.Duration { return time.Since(start) } // (monotonic: start carries its reading)
	}
	l := &linkState{elapsed: elapsed}
	l.downSince.Store(int64(elapsed()))
	return l
}

func (l *linkState) isSynchronized() bool { return l.synchronized.Load() }

// current returns the epoch of the connection being served: up with it
// marks that connection synchronized, and only while it lasts.
func (l *linkState) current() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// up records that the connection of epoch is synchronized, unless it has
// ended since.
func (l *linkState) up(epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if epoch == l.epoch {
		l.synchronized.Store(true)
	}
}

// down records the end of a connection.
func (l *linkState) down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	if l.synchronized.Swap(false) {
		l.downSince.Store(int64(l.elapsed()))
	}
}

// downFor returns how long the plugin has gone without a synchronized
// connection (0 while it has one).
func (l *linkState) downFor() time.Duration {
	if l.synchronized.Load() {
		return 0
	}
	return l.elapsed() - time.Duration(l.downSince.Load())
}
