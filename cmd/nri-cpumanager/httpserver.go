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

// httpLimits bound what a client of the plugin's endpoints can hold: any
// pod of the cluster may reach the metrics port (unless the NetworkPolicy
// the chart ships is on), and the plugin's memory limit is small.
type httpLimits struct {
	// maxConns is the most connections served at once; more wait in the
	// kernel's accept queue.
	maxConns int
	// readHeader, read, write and idle time out a slow or idle client.
	readHeader, read, write, idle time.Duration
}

// defaultHTTPLimits suit scrapes and probes: a few clients, small requests,
// responses of some KiB.
var defaultHTTPLimits = httpLimits{maxConns: 32, readHeader: 5 * time.Second, read: 10 * time.Second,
	write: 30 * time.Second, idle: 60 * time.Second}

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
		if err := srv.Serve(limitListener(ln, limits.maxConns)); err != nil && !errors.Is(err, http.ErrServerClosed) {
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

// limitListener accepts at most n connections at once: Accept waits until
// one of them is closed.
func limitListener(l net.Listener, n int) net.Listener {
	return &limited{Listener: l, slots: make(chan struct{}, n)}
}

type limited struct {
	net.Listener
	slots chan struct{}
}

func (l *limited) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	conn, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: conn, release: func() { <-l.slots }}, nil
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
