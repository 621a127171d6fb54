package plugin

import (
	"context"
	"errors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/net/multiplex"
	"github.com/containerd/ttrpc"
)

// flakyRuntime is the runtime side of NRI that accepts a plugin's
// registration and then closes the connection before it configures the
// plugin: containerd restarting at that moment.
type flakyRuntime struct {
	socket        string
	registrations atomic.Int32
	// good is how many of the next connections are served well instead:
	// configured, synchronized, then closed; syncs counts them.
	good  atomic.Int32
	syncs atomic.Int32
	// afterSync counts the registrations dropped after the first good
	// connection.
	afterSync atomic.Int32
}

func startFlakyRuntime(t *testing.T) *flakyRuntime {
	t.Helper()
	rt := &flakyRuntime{socket: filepath.Join(t.TempDir(), "nri.sock")}
	l, err := net.Listen("unix", rt.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			if rt.good.Add(-1) >= 0 {
				go rt.serveWell(conn)
				continue
			}
			rt.good.Store(0)
			go rt.serve(conn)
		}
	}()
	return rt
}

// serve registers the plugin on conn and closes the connection 20 ms
// later.
func (rt *flakyRuntime) serve(conn net.Conn) {
	mux := multiplex.Multiplex(conn, multiplex.WithBlockedRead())
	l, err := mux.Listen(multiplex.RuntimeServiceConn)
	if err != nil {
		mux.Close()
		return
	}
	srv, err := ttrpc.NewServer()
	if err != nil {
		mux.Close()
		return
	}
	api.RegisterRuntimeService(srv, registerThenClose{rt: rt, close: func() {
		time.AfterFunc(20*time.Millisecond, func() { srv.Close(); mux.Close() })
	}})
	go func() { _ = srv.Serve(context.Background(), l) }()
	mux.Unblock()
}

// serveWell registers the plugin on conn, configures and synchronizes
// it, and closes the connection 20 ms later.
func (rt *flakyRuntime) serveWell(conn net.Conn) {
	mux := multiplex.Multiplex(conn, multiplex.WithBlockedRead())
	l, err := mux.Listen(multiplex.RuntimeServiceConn)
	if err != nil {
		mux.Close()
		return
	}
	pconn, err := mux.Open(multiplex.PluginServiceConn)
	if err != nil {
		mux.Close()
		return
	}
	plugin := api.NewPluginClient(ttrpc.NewClient(pconn))
	srv, err := ttrpc.NewServer()
	if err != nil {
		mux.Close()
		return
	}
	api.RegisterRuntimeService(srv, registerThen{then: func() {
		go func() {
			ctx := context.Background()
			if _, err := plugin.Configure(ctx, &api.ConfigureRequest{RuntimeName: "flaky", RuntimeVersion: "v2.4.2"}); err == nil {
				if _, err := plugin.Synchronize(ctx, &api.SynchronizeRequest{}); err == nil {
					rt.syncs.Add(1)
				}
			}
			time.AfterFunc(20*time.Millisecond, func() { srv.Close(); mux.Close() })
		}()
	}})
	go func() { _ = srv.Serve(context.Background(), l) }()
	mux.Unblock()
}

// registerThen accepts a registration and calls then.
type registerThen struct{ then func() }

func (r registerThen) RegisterPlugin(context.Context, *api.RegisterPluginRequest) (*api.Empty, error) {
	r.then()
	return &api.Empty{}, nil
}

func (registerThen) UpdateContainers(context.Context, *api.UpdateContainersRequest) (*api.UpdateContainersResponse, error) {
	return &api.UpdateContainersResponse{}, nil
}

type registerThenClose struct {
	rt    *flakyRuntime
	close func()
}

func (r registerThenClose) RegisterPlugin(context.Context, *api.RegisterPluginRequest) (*api.Empty, error) {
	r.rt.registrations.Add(1)
	if r.rt.syncs.Load() > 0 {
		r.rt.afterSync.Add(1)
	}
	r.close()
	return &api.Empty{}, nil
}

func (registerThenClose) UpdateContainers(context.Context, *api.UpdateContainersRequest) (*api.UpdateContainersResponse, error) {
	return &api.UpdateContainersResponse{}, nil
}

// TestReconnectsWhenTheRuntimeClosesBeforeConfigure: a runtime that closes
// the connection between the plugin's registration and its configuration
// leaves the NRI stub waiting for ever; the watchdog drops such a
// connection and dials again, Run returns promptly once cancelled, and
// /healthz fails once the plugin has gone without a synchronized
// connection for DisconnectedTimeout.
func TestReconnectsWhenTheRuntimeClosesBeforeConfigure(t *testing.T) {
	rt := startFlakyRuntime(t)
	p, _ := newTestPluginWith(t, func(o *Options) {
		o.Socket = rt.socket
		o.ConfigureTimeout = 200 * time.Millisecond
		o.ReconnectMin, o.ReconnectMax, o.DialInterval = 10*time.Millisecond, 50*time.Millisecond, 10*time.Millisecond
		o.DisconnectedTimeout = 500 * time.Millisecond
	})
	health := p.ProbeHandler()
	healthz := func() int {
		rec := httptest.NewRecorder()
		health.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code
	}
	if code := healthz(); code != http.StatusOK {
		t.Errorf("/healthz at start = %d, want 200", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()

	waitUntil(t, "three registrations", 10*time.Second, func() bool { return rt.registrations.Load() >= 3 })
	waitUntil(t, "/healthz failing", 10*time.Second, func() bool { return healthz() == http.StatusServiceUnavailable })

	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run still running 2 s after its context was cancelled")
	}
}

// TestWatchdogCountsTripsInARow: the watchdog's trips end Run only when
// WatchdogTrips of them come in a row; a synchronized connection between
// them starts the count again, so trips spread over weeks never end a
// healthy process.
func TestWatchdogCountsTripsInARow(t *testing.T) {
	rt := startFlakyRuntime(t)
	p, _ := newTestPluginWith(t, func(o *Options) {
		o.Socket = rt.socket
		o.ConfigureTimeout = 100 * time.Millisecond
		o.WatchdogTrips = 3
		o.ReconnectMin, o.ReconnectMax, o.DialInterval = 10*time.Millisecond, 20*time.Millisecond, 10*time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()

	// Two trips, then one connection served well, then trips for ever.
	waitUntil(t, "two registrations dropped", 10*time.Second, func() bool { return rt.registrations.Load() >= 2 })
	rt.good.Store(1)
	waitUntil(t, "a synchronized connection", 10*time.Second, func() bool { return rt.syncs.Load() == 1 })
	select {
	case err := <-ran:
		if !errors.Is(err, errWedged) {
			t.Fatalf("Run = %v, want %v", err, errWedged)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run still running after 20 s of a runtime that never configures it")
	}
	if after := rt.afterSync.Load(); after != 3 {
		t.Errorf("Run gave up %d trips after the synchronized connection, want 3 (WatchdogTrips)", after)
	}
}

// waitUntil polls cond until it holds, failing the test after timeout.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchdogBoundsAbandonedStubsOverTheProcessLife: each connection the
// watchdog gives up on leaves its stub's goroutines behind; synchronized
// connections between them reset the count in a row, not the count over
// the process's life, which ends Run at MaxAbandoned (and counts each).
func TestWatchdogBoundsAbandonedStubsOverTheProcessLife(t *testing.T) {
	rt := startFlakyRuntime(t)
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, BuildInfo{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := newTestPluginWith(t, func(o *Options) {
		o.Socket = rt.socket
		o.ConfigureTimeout = 100 * time.Millisecond
		o.WatchdogTrips, o.MaxAbandoned = 3, 4
		o.ReconnectMin, o.ReconnectMax, o.DialInterval = 10*time.Millisecond, 20*time.Millisecond, 10*time.Millisecond
		o.Metrics = metrics
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()

	// Two trips, a synchronized connection, then trips for ever: the
	// fourth trip over the life ends Run, before three in a row would.
	waitUntil(t, "two registrations dropped", 10*time.Second, func() bool { return rt.registrations.Load() >= 2 })
	rt.good.Store(1)
	waitUntil(t, "a synchronized connection", 10*time.Second, func() bool { return rt.syncs.Load() == 1 })
	select {
	case err := <-ran:
		if !errors.Is(err, errTooManyAbandoned) {
			t.Fatalf("Run = %v, want %v", err, errTooManyAbandoned)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run still running after 20 s of a runtime that never configures it")
	}
	if got := testutil.ToFloat64(metrics.abandoned); got != 4 {
		t.Errorf("abandoned_connections_total = %v, want 4", got)
	}
}

// TestLivenessOnTheMonotonicClock: how long the plugin has gone without a
// synchronized connection is measured on the monotonic clock it is given,
// from the end of the last one; the wall clock has no part in it.
func TestLivenessOnTheMonotonicClock(t *testing.T) {
	var elapsed time.Duration
	l := newLinkState(func() time.Duration { return elapsed })
	elapsed = 30 * time.Second
	if got := l.downFor(); got != 30*time.Second {
		t.Errorf("down for %v since the start, want 30s", got)
	}
	l.up(l.current())
	elapsed = 2 * time.Hour
	if got := l.downFor(); got != 0 {
		t.Errorf("down for %v while synchronized", got)
	}
	l.down()
	elapsed += 10 * time.Second
	if got := l.downFor(); got != 10*time.Second {
		t.Errorf("down for %v, want 10s since the connection ended", got)
	}
	old := l.current() - 1
	l.up(old)
	if l.isSynchronized() {
		t.Error("a Synchronize of a connection that ended marked the link synchronized")
	}
}
