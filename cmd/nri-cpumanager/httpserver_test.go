package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// TestHTTPServerBoundsClients: idle connections beyond the cap wait in the
// kernel's queue instead of holding the plugin's memory, idle ones are
// closed after the idle timeout, and a request is served once a slot is
// free again.
func TestHTTPServerBoundsClients(t *testing.T) {
	var open, most atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	limits := httpLimits{maxConns: 4, readHeader: time.Second, read: time.Second, write: time.Second, idle: 300 * time.Millisecond}
	address := startTestServer(t, countConns(handler, &open, &most), limits)

	// 20 clients each send a request and keep the connection open.
	var conns []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", address)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
		conns = append(conns, c)
	}
	// The first maxConns are answered at once; the others wait for the
	// idle timeout to close those connections.
	// (All connections are read at once: read one after the other, the
	// later ones would be read after the idle timeout closed the first.)
	answered := func(within time.Duration) int {
		var n atomic.Int32
		var wg sync.WaitGroup
		deadline := time.Now().Add(within)
		for _, c := range conns {
			wg.Go(func() {
				_ = c.SetReadDeadline(deadline)
				buf := make([]byte, 256)
				if k, err := c.Read(buf); err == nil && k > 0 {
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return int(n.Load())
	}
	if got := answered(50 * time.Millisecond); got != limits.maxConns {
		t.Errorf("%d clients answered before the idle timeout, want %d", got, limits.maxConns)
	}
	total := limits.maxConns
	for deadline := time.Now().Add(20 * time.Second); total < len(conns) && time.Now().Before(deadline); {
		total += answered(100 * time.Millisecond)
	}
	if total != len(conns) {
		t.Errorf("%d of %d clients answered in the end", total, len(conns))
	}
	if got := most.Load(); got > int32(limits.maxConns) {
		t.Errorf("%d requests were served at once, want at most %d", got, limits.maxConns)
	}
}

// countConns counts the requests being served at once through handler.
func countConns(h http.Handler, open, most *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := open.Add(1)
		defer open.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TestHTTPServerCapsEachSource: a source holding its share of connections
// has the next ones closed at once, while another source is still served,
// and gets a slot back once it closes one.
func TestHTTPServerCapsEachSource(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	limits := httpLimits{maxConns: 8, perSource: 2, readHeader: time.Second, read: time.Second, write: time.Second, idle: time.Minute}
	address := startTestServer(t, handler, limits)

	// request sends a request from source on a new connection, kept open,
	// and says whether it was answered (false: closed unanswered).
	request := func(source string) (net.Conn, bool) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
		c, err := d.Dial("tcp", address)
		if err != nil {
			t.Fatalf("dialing from %s: %v", source, err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 256)
		k, err := c.Read(buf)
		return c, err == nil && strings.HasPrefix(string(buf[:k]), "HTTP/1.1 200")
	}
	var held []net.Conn
	for i := range 5 {
		c, ok := request("127.0.0.1")
		if want := i < limits.perSource; ok != want {
			t.Errorf("connection %d of one source answered %t, want %t", i+1, ok, want)
		}
		if ok {
			held = append(held, c)
		}
	}
	if _, ok := request("127.0.0.2"); !ok {
		t.Error("another source is not answered while the first holds its share")
	}
	held[0].Close()
	answered := false
	for deadline := time.Now().Add(5 * time.Second); !answered && time.Now().Before(deadline); {
		_, answered = request("127.0.0.1")
	}
	if !answered {
		t.Error("the source is not answered again after closing a connection")
	}
}

// startTestServer serves handler with limits on a free loopback port until
// the test ends, and returns its address.
func startTestServer(t *testing.T, handler http.Handler, limits httpLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := ln.Addr().String()
	ln.Close()
	log := logrus.New()
	log.SetOutput(io.Discard)
	shutdown, err := serveHTTP(address, handler, limits, logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shutdown)
	return address
}
