package plugin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestEndpoints checks which handler serves what: /debug/state, which names
// pods, is never served with the metrics.
func TestEndpoints(t *testing.T) {
	p, _ := newTestPlugin(t)
	reg := prometheus.NewRegistry()
	metrics := p.MetricsHandler(reg)
	probes := p.ProbeHandler()
	debug := p.DebugHandler()
	tests := []struct {
		name    string
		handler http.Handler
		path    string
		status  int
	}{
		{"metrics", metrics, "/metrics", http.StatusOK},
		{"no probes with the metrics", metrics, "/healthz", http.StatusNotFound},
		{"liveness", probes, "/healthz", http.StatusOK},
		{"readiness before Synchronize", probes, "/readyz", http.StatusServiceUnavailable},
		{"no state with the metrics", metrics, "/debug/state", http.StatusNotFound},
		{"no metrics with the probes", probes, "/metrics", http.StatusNotFound},
		{"state on the debug endpoint", debug, "/debug/state", http.StatusOK},
		{"no metrics on the debug endpoint", debug, "/metrics", http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("GET %s = %d, want %d", tc.path, rec.Code, tc.status)
			}
			if tc.path == "/debug/state" && tc.status == http.StatusOK {
				var snap Snapshot
				if err := json.Unmarshal(rec.Body.Bytes(), &snap); err != nil || snap.Invariants == "" {
					t.Errorf("/debug/state = %q (%v), want a snapshot with the invariant check", rec.Body.String(), err)
				}
			}
		})
	}
}

// blockingGatherer gathers nothing until released, and says when a
// gather began.
type blockingGatherer struct{ entered, release chan struct{} }

func (g blockingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.entered <- struct{}{}
	<-g.release
	return nil, nil
}

// TestMetricsHandlerBoundsScrapes: at most metricsInFlight scrapes are
// gathered at once; more are answered 503 at once instead of each costing
// a gather (a scrape flood took the plugin from 0.24 to 1.17 cores).
func TestMetricsHandlerBoundsScrapes(t *testing.T) {
	p, _ := newTestPlugin(t)
	g := blockingGatherer{entered: make(chan struct{}, metricsInFlight+1), release: make(chan struct{})}
	h := p.MetricsHandler(g)
	codes := make(chan int, metricsInFlight)
	var wg sync.WaitGroup
	for range metricsInFlight {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			codes <- rec.Code
		})
	}
	for range metricsInFlight {
		<-g.entered
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusServiceUnavailable || len(g.entered) != 0 {
		t.Errorf("a scrape beyond the %d in flight answered %d, and started a gather: %v; want 503 without one", metricsInFlight, rec.Code, len(g.entered) != 0)
	}
	close(g.release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a scrape in flight answered %d, want 200", code)
		}
	}
}
