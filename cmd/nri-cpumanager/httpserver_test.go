package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// TestHTTPServerBoundsClients: a connection is never kept alive past its
// request (the server closes it after the answer), at most maxConns
// requests are served at once while the others wait in the kernel's
// queue, and every one is answered in the end.
func TestHTTPServerBoundsClients(t *testing.T) {
	var open, most atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write([]byte("ok\n"))
	})
	limits := httpLimits{maxConns: 4, readHeader: time.Second, read: time.Second, write: time.Second, idle: time.Minute}
	address := startTestServer(t, countConns(handler, &open, &most), limits)

	var answered, closed atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			c, err := net.Dial("tcp", address)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
			// Read to the end: the server closes the connection after the
			// answer, although the request asked to keep it alive.
			data, err := io.ReadAll(c)
			if strings.HasPrefix(string(data), "HTTP/1.1 200") {
				answered.Add(1)
			}
			if err == nil {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	if answered.Load() != 20 || closed.Load() != 20 {
		t.Errorf("%d of 20 clients answered, %d connections closed by the server after the answer; want all", answered.Load(), closed.Load())
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
// (clients that never finish their request's header, until the header
// timeout) has the next ones closed at once, while another source is still
// served, and gets a slot back once it closes one.
func TestHTTPServerCapsEachSource(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	limits := httpLimits{maxConns: 8, perSource: 2, readHeader: 30 * time.Second, read: time.Minute, write: time.Second, idle: time.Minute}
	address := startTestServer(t, handler, limits)

	dial := func(source string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
		c, err := d.Dial("tcp", address)
		if err != nil {
			t.Fatalf("dialing from %s: %v", source, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// hold opens a connection from source that sends half a header, and
	// says whether the server kept it (false: closed at once).
	hold := func(source string) (net.Conn, bool) {
		t.Helper()
		c := dial(source)
		_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\n"))
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return c, errors.As(err, &ne) && ne.Timeout()
	}
	// request sends a whole request from source and says whether it was
	// answered.
	request := func(source string) bool {
		t.Helper()
		c := dial(source)
		_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		data, _ := io.ReadAll(c)
		return strings.HasPrefix(string(data), "HTTP/1.1 200")
	}
	var held []net.Conn
	for i := range 4 {
		c, kept := hold("127.0.0.1")
		if want := i < limits.perSource; kept != want {
			t.Errorf("connection %d of one source kept %t, want %t", i+1, kept, want)
		}
		if kept {
			held = append(held, c)
		}
	}
	if request("127.0.0.1") {
		t.Error("a source holding its share is answered on another connection")
	}
	if !request("127.0.0.2") {
		t.Error("another source is not answered while the first holds its share")
	}
	held[0].Close()
	answered := false
	for deadline := time.Now().Add(5 * time.Second); !answered && time.Now().Before(deadline); {
		answered = request("127.0.0.1")
	}
	if !answered {
		t.Error("the source is not answered again after closing a connection")
	}
}

// TestEndpointThatCannotBindIsRetried: an address another process holds
// is not a reason not to run: the endpoint says so (its gauge at 0, the
// log once) and binds once the address is free.
func TestEndpointThatCannotBindIsRetried(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := taken.Addr().String()
	var gauge atomic.Int32
	gauge.Store(-1)
	log, hook := logrus.New(), &countingHook{}
	log.SetOutput(io.Discard)
	log.AddHook(hook)
	ep := endpoint{key: "metricsAddress", network: "tcp", address: address, paths: "/metrics",
		handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }), limits: probeLimits}
	shutdown := serveEndpointEvery(context.Background(), ep, 50*time.Millisecond, gaugeFunc(func(v float64) { gauge.Store(int32(v)) }), logrus.NewEntry(log))
	defer shutdown()
	waitUntil(t, "the endpoint to say it cannot listen", func() bool { return gauge.Load() == 0 })
	time.Sleep(200 * time.Millisecond) // several retries
	if n := hook.errors.Load(); n != 1 {
		t.Errorf("%d error lines for one address that cannot be bound, want 1", n)
	}
	taken.Close()
	waitUntil(t, "the endpoint to listen once the address is free", func() bool { return gauge.Load() == 1 })
	resp, err := http.Get("http://" + address + "/metrics")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET once bound: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestProbeCommandAsksTheProbeSocket: the kubelet's exec probe, the probe
// command, asks the plugin's probe socket and exits 0 on yes, 1 on no or
// on no answer.
func TestProbeCommandAsksTheProbeSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "run", "probe.sock")
	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not synchronized with NRI", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	log := logrus.New()
	log.SetOutput(io.Discard)
	var listening atomic.Int32
	shutdown := serveEndpointEvery(context.Background(), endpoint{key: "probeSocket", network: "unix", address: socket, paths: "/healthz, /readyz", handler: mux, limits: socketLimits},
		time.Second, gaugeFunc(func(v float64) { listening.Store(int32(v)) }), logrus.NewEntry(log))
	waitUntil(t, "the probe socket", func() bool { return listening.Load() == 1 })
	fi, err := os.Stat(socket)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("probe socket %v (%v), want mode 0600", fi, err)
	}
	for _, tc := range []struct {
		kind   string
		ready  bool
		status int
		out    string
	}{
		{"live", false, exitOK, "ok\n"},
		{"ready", false, exitFailure, "not synchronized with NRI\n"},
		{"ready", true, exitOK, "ok\n"},
	} {
		ready.Store(tc.ready)
		var stdout, stderr strings.Builder
		if got := run([]string{"probe", tc.kind, "--probe-socket", socket}, &stdout, &stderr); got != tc.status || stdout.String() != tc.out {
			t.Errorf("probe %s (ready %v): exit %d, output %q (stderr %q); want %d, %q", tc.kind, tc.ready, got, stdout.String(), stderr.String(), tc.status, tc.out)
		}
	}
	shutdown()
	var stderr strings.Builder
	if got := run([]string{"probe", "live", "--probe-socket", socket}, io.Discard, &stderr); got != exitFailure || !strings.Contains(stderr.String(), "no answer from the plugin") {
		t.Errorf("probe without the plugin: exit %d, %q; want 1, no answer", got, stderr.String())
	}
	if got := run([]string{"probe", "alive"}, io.Discard, io.Discard); got != exitUsage {
		t.Errorf("probe alive: exit %d, want %d", got, exitUsage)
	}
}

// gaugeFunc is a gauge that calls a function.
type gaugeFunc func(float64)

func (f gaugeFunc) Set(v float64) { f(v) }

// countingHook counts the error lines of a logger.
type countingHook struct{ errors atomic.Int32 }

func (h *countingHook) Levels() []logrus.Level { return []logrus.Level{logrus.ErrorLevel} }
func (h *countingHook) Fire(*logrus.Entry) error {
	h.errors.Add(1)
	return nil
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
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
	var listening atomic.Int32
	shutdown := serveEndpoint(context.Background(), endpoint{key: "test", network: "tcp", address: address, handler: handler, limits: limits},
		gaugeFunc(func(v float64) { listening.Store(int32(v)) }), logrus.NewEntry(log))
	t.Cleanup(shutdown)
	waitUntil(t, "the test server", func() bool { return listening.Load() == 1 })
	return address
}
