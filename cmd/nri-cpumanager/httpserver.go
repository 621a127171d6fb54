package main

import (
	"context"
	"errors"
	"net"
	"net/http"
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
// (every pod, where it is not enforced) may connect: an idle connection is
// closed after 5 s (a scraper dials again at its next scrape), and no
// source holds more than 4.
var metricsLimits = httpLimits{maxConns: 32, perSource: 4, readHeader: 5 * time.Second, read: 10 * time.Second,
	write: 30 * time.Second, idle: 5 * time.Second}

// probeLimits suit the kubelet's probes: one source (the node), a new
// connection per probe (its prober disables keep-alive), answers of a few
// bytes within the probe's timeout.
var probeLimits = httpLimits{maxConns: 16, perSource: 8, readHeader: 2 * time.Second, read: 2 * time.Second,
	write: 5 * time.Second, idle: 5 * time.Second}

// serveHTTP serves handler on address until the returned function shuts
// it down.
func serveHTTP(address string, handler http.Handler, limits httpLimits, log *logrus.Entry) (shutdown func(), err error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: limits.readHeader,
		ReadTimeout:       limits.read,
		WriteTimeout:      limits.write,
		IdleTimeout:       limits.idle,
		MaxHeaderBytes:    16 << 10,
	}
	go func() {
		if err := srv.Serve(limitListener(ln, limits)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("HTTP server stopped")
		}
	}()
	log.WithField("address", ln.Addr().String()).Info("serving")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
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
