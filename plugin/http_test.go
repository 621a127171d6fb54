package plugin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestEndpoints checks which handler serves what: /debug/state, which names
// pods, is never served with the metrics.
func TestEndpoints(t *testing.T) {
	p, _ := newTestPlugin(t)
	reg := prometheus.NewRegistry()
	metrics := p.Handler(reg)
	debug := p.DebugHandler()
	tests := []struct {
		name    string
		handler http.Handler
		path    string
		status  int
	}{
		{"metrics", metrics, "/metrics", http.StatusOK},
		{"liveness", metrics, "/healthz", http.StatusOK},
		{"readiness before Synchronize", metrics, "/readyz", http.StatusServiceUnavailable},
		{"no state with the metrics", metrics, "/debug/state", http.StatusNotFound},
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
