package plugin

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves /metrics: the Prometheus metrics of gatherer, at
// most metricsInFlight scrapes at once (more are answered 503 at once)
// and each within metricsTimeout: a flood of scrapes, which any pod the
// NetworkPolicy admits may send, costs the plugin little CPU, and the
// NRI requests it answers meanwhile stay fast. /debug/state has a handler
// of its own (DebugHandler): it names pods and should not be served
// wherever metrics are; the probes have ProbeHandler.
func (p *Plugin) MetricsHandler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		MaxRequestsInFlight: metricsInFlight,
		Timeout:             metricsTimeout,
	}))
	return mux
}

// The bounds of /metrics: a scraper per Prometheus replica, and a
// scrape answered in milliseconds.
const (
	metricsInFlight = 4
	metricsTimeout  = 5 * time.Second
)

// ProbeHandler serves the kubelet's probes, without waiting for the
// plugin's lock (a slow disk holds it across a checkpoint write):
//
//	/healthz      200 while the plugin was synchronized with NRI within
//	              DisconnectedTimeout, else 503 (the liveness probe)
//	/readyz       200 once registered with NRI and synchronized, else 503
func (p *Plugin) ProbeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.Healthy() {
			http.Error(w, "no synchronized NRI connection for longer than the disconnectedTimeout\n", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.Ready() {
			http.Error(w, "not synchronized with NRI\n", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// DebugHandler serves /debug/state: the assignments, the shared pool, the
// tracked containers and the result of the invariant check, as JSON.
func (p *Plugin) DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p.Snapshot())
	})
	return mux
}

// Snapshot is a point-in-time view of the plugin for operators.
type Snapshot struct {
	Ready      bool                         `json:"ready"`
	SharedPool string                       `json:"sharedPool"`
	Exclusive  map[string]map[string]Assign `json:"exclusive"`
	Containers map[string]ContainerView     `json:"containers"`
	Releasing  map[string]string            `json:"releasing,omitempty"`
	// Held are the CPUs held for pods whose resize is in flight, by pod UID.
	Held    map[string]HeldView `json:"held,omitempty"`
	Lending string              `json:"lending,omitempty"`
	// Sandboxes are the pod sandboxes the plugin knows, by id.
	Sandboxes map[string]SandboxView `json:"sandboxes,omitempty"`
	// Idle are the pods nothing of which runs, whose removal the runtime
	// may never report, and since when (they give their CPUs back after
	// the orphan timeout), by pod UID.
	Idle map[string]string `json:"idle,omitempty"`
	// Ending are the pods the Kubernetes API reported ended while some of
	// their containers still run.
	Ending     []string `json:"ending,omitempty"`
	Invariants string   `json:"invariants"`
}

// Assign is one exclusive assignment.
type Assign struct {
	Baseline string `json:"baseline"`
	Resized  string `json:"resized,omitempty"`
	// Init is set for an ordinary init container's entry, whose CPUs its
	// pod's later containers reuse.
	Init bool `json:"init,omitempty"`
	// Delayed are CPUs a decrease released that the container keeps
	// until ReleaseAt (scaleDownDelay).
	Delayed   string `json:"delayed,omitempty"`
	ReleaseAt string `json:"releaseAt,omitempty"`
}

// SandboxView is one pod sandbox as the plugin knows it.
type SandboxView struct {
	PodUID string `json:"podUID"`
	// Confirmed: the plugin saw it run (else it knows it from a
	// Synchronize); Stopped: it saw it stop.
	Confirmed bool `json:"confirmed,omitempty"`
	Stopped   bool `json:"stopped,omitempty"`
}

// HeldView is the CPUs held for one pod's resize in flight.
type HeldView struct {
	CPUs  string `json:"cpus"`
	Since string `json:"since"`
}

// ContainerView is one tracked container.
type ContainerView struct {
	Name      string `json:"name"`
	Exclusive bool   `json:"exclusive"`
	CPUs      string `json:"cpus"`
	Applied   string `json:"applied"`
	Stopped   bool   `json:"stopped,omitempty"`
	// DeviceNodes are the NUMA nodes of its devices (none when empty).
	DeviceNodes string `json:"deviceNodes,omitempty"`
}

// Snapshot returns the plugin's current view.
func (p *Plugin) Snapshot() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Snapshot{
		Ready:      p.link.isSynchronized(),
		SharedPool: p.model.SharedPool().String(),
		Exclusive:  map[string]map[string]Assign{},
		Containers: map[string]ContainerView{},
		Releasing:  map[string]string{},
		Lending:    p.model.Lending.String(),
		Invariants: "ok",
	}
	for ref, a := range p.model.State.Assignments() {
		if s.Exclusive[ref.PodUID] == nil {
			s.Exclusive[ref.PodUID] = map[string]Assign{}
		}
		v := Assign{Baseline: a.Baseline.String(), Resized: a.Resized.String(), Init: a.Init, Delayed: a.Delayed.String()}
		if !a.ReleaseAt.IsZero() {
			v.ReleaseAt = a.ReleaseAt.UTC().Format(time.RFC3339Nano)
		}
		s.Exclusive[ref.PodUID][ref.Name] = v
	}
	for id, t := range p.model.Containers.All() {
		s.Containers[id] = ContainerView{Name: t.Display, Exclusive: t.Exclusive, CPUs: p.model.CPUMaskOf(id).String(),
			Applied: p.ledger.appliedTo(id).String(), Stopped: t.Stopped}
		if t.DeviceNodes != 0 {
			v := s.Containers[id]
			v.DeviceNodes = t.DeviceNodes.String()
			s.Containers[id] = v
		}
	}
	for id, sb := range p.model.Sandboxes.All() {
		if s.Sandboxes == nil {
			s.Sandboxes = map[string]SandboxView{}
		}
		s.Sandboxes[id] = SandboxView{PodUID: sb.PodUID, Confirmed: sb.Confirmed, Stopped: sb.Stopped}
	}
	for uid, since := range p.model.Idle {
		if s.Idle == nil {
			s.Idle = map[string]string{}
		}
		s.Idle[uid] = since.UTC().Format(time.RFC3339Nano)
	}
	s.Ending = slices.Sorted(maps.Keys(p.model.Ending))
	for id, cpus := range p.model.Releasing {
		s.Releasing[id] = cpus.String()
	}
	for uid, h := range p.model.State.Holds() {
		if s.Held == nil {
			s.Held = map[string]HeldView{}
		}
		s.Held[uid] = HeldView{CPUs: h.CPUs.String(), Since: h.Since.UTC().Format(time.RFC3339)}
	}
	if err := p.policy.CheckInvariants(p.model); err != nil {
		s.Invariants = err.Error()
	}
	return s
}
