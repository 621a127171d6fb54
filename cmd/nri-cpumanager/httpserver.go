package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// httpLimits bound what a client of the plugin's endpoints can hold: the
// plugin's memory limit is small, and the kubelet restarts it when its
// probes go unanswered.
type httpLimits struct {
	// maxConns is the most connections served at once; more wait in the
	// kernel's accept queue.
	maxConns int
	// perSource is the most connections one source address may hold at
	// once; more are closed as soon as they are accepted, so that one
	// client cannot take every slot.
	perSource int
	// readHeader, read, write and idle time out a slow or idle client.
	readHeader, read, write, idle time.Duration
}

// metricsLimits suit scrapes: a few clients (Prometheus, one per replica),
// small requests, responses of some KiB. Any pod the NetworkPolicy admits
// (every pod, where it is not enforced) may connect: no connection is kept
// alive past its request, and no source holds more than 4. (The handler
// itself serves 4 scrapes at once at most: plugin.MetricsHandler.)
var metricsLimits = httpLimits{maxConns: 32, perSource: 4, readHeader: 5 * time.Second, read: 10 * time.Second,
	write: 30 * time.Second, idle: 5 * time.Second}

// probeLimits suit probes over HTTP (healthAddress): one source (the
// node), one request per connection, a header within a second, answers of
// a few bytes within the probe's timeout.
var probeLimits = httpLimits{maxConns: 16, perSource: 8, readHeader: time.Second, read: 2 * time.Second,
	write: 5 * time.Second, idle: time.Second}

// socketLimits suit the probe socket: only processes in the plugin's
// container reach it (the kubelet's exec probes), each asking once.
var socketLimits = httpLimits{maxConns: 16, readHeader: time.Second, read: 2 * time.Second, write: 5 * time.Second, idle: time.Second}

// bindRetry is how often an endpoint that cannot bind its address tries
// again.
const bindRetry = 10 * time.Second

// serveEndpoint serves ep until the returned function shuts it down. An
// address it cannot bind (taken by another process, a socket directory
// that cannot be made) is logged once, shown in listening (0) and tried
// again every bindRetry until ctx ends: no endpoint is a reason not to
// pin CPUs. Connections are never kept alive past their request.
func serveEndpoint(ctx context.Context, ep endpoint, listening interface{ Set(float64) }, log *logrus.Entry) (shutdown func()) {
	return serveEndpointEvery(ctx, ep, bindRetry, listening, log)
}

// serveEndpointEvery is serveEndpoint trying to bind every retry.
func serveEndpointEvery(ctx context.Context, ep endpoint, retry time.Duration, listening interface{ Set(float64) }, log *logrus.Entry) (shutdown func()) {
	srv := &http.Server{
		Handler:           ep.handler,
		ReadHeaderTimeout: ep.limits.readHeader,
		ReadTimeout:       ep.limits.read,
		WriteTimeout:      ep.limits.write,
		IdleTimeout:       ep.limits.idle,
		MaxHeaderBytes:    16 << 10,
	}
	srv.SetKeepAlivesEnabled(false)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var lastErr string
		for {
			ln, err := listen(ep.network, ep.address)
			if err == nil {
				listening.Set(1)
				log.WithField("address", ln.Addr().String()).Info("serving")
				if err := srv.Serve(limitListener(ln, ep.limits)); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.WithError(err).Error("HTTP server stopped")
				}
				listening.Set(0)
				return
			}
			listening.Set(0)
			if err.Error() != lastErr {
				lastErr = err.Error()
				log.WithError(err).WithField("retryEvery", retry).Error("cannot listen; pinning goes on without this endpoint")
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
	}()
	return func() {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
}

// listen listens on a TCP address, or on a Unix socket path: its
// directory made if missing, a socket file left by an earlier process
// removed, the socket for its owner only (the probes run as the plugin's
// user, in its container).
func listen(network, address string) (net.Listener, error) {
	if network != "unix" {
		return net.Listen(network, address)
	}
	if err := os.MkdirAll(filepath.Dir(address), 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(address); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(address)
	}
	ln, err := net.Listen("unix", address)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(address, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// limitListener accepts at most limits.maxConns connections at once
// (Accept waits until one of them is closed), and at most
// limits.perSource from one address (Accept closes the others at once).
func limitListener(l net.Listener, limits httpLimits) net.Listener {
	return &limited{Listener: l, slots: make(chan struct{}, limits.maxConns), perSource: limits.perSource, bySource: map[string]int{}}
}

type limited struct {
	net.Listener
	slots     chan struct{}
	perSource int
	mu        sync.Mutex
	bySource  map[string]int
}

func (l *limited) Accept() (net.Conn, error) {
	for {
		l.slots <- struct{}{}
		conn, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		source := sourceOf(conn.RemoteAddr())
		if !l.enter(source) {
			_ = conn.Close()
			<-l.slots
			continue
		}
		return &slotConn{Conn: conn, release: func() { l.leave(source); <-l.slots }}, nil
	}
}

// enter counts a connection of source, unless source holds its share.
func (l *limited) enter(source string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perSource > 0 && l.bySource[source] >= l.perSource {
		return false
	}
	l.bySource[source]++
	return true
}

func (l *limited) leave(source string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySource[source]--; l.bySource[source] <= 0 {
		delete(l.bySource, source)
	}
}

// sourceOf is the host of a remote address (the address itself when it
// has no port).
func sourceOf(addr net.Addr) string {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// slotConn gives its listener's slot back when closed, once.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
