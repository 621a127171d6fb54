package kubeapi

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Feature is a part of the plugin's work that needs the API server; it
// labels the availability metrics.
type Feature string

// The features.
const (
	// FeaturePods is the watch of this node's pods (exact pod-level
	// admission of a resize).
	FeaturePods Feature = "pods"
	// FeatureEvents is the events on pods.
	FeatureEvents Feature = "events"
	// FeatureTopology is the NodeResourceTopology export.
	FeatureTopology Feature = "noderesourcetopology"
	// FeatureNode is the watch of this node's labels: its configuration
	// group.
	FeatureNode Feature = "node"
)

// lost says what the plugin does without a feature, for the log.
var lost = map[Feature]string{
	FeaturePods:     "resizes of pods with several exclusive containers are admitted from the pod totals of NRI alone (docs/operations.md)",
	FeatureEvents:   "refusals and resizes show only in the pods' conditions, the log and the metrics, not as events",
	FeatureTopology: "the NodeResourceTopology object of this node is not updated; the scheduler sees stale exclusive CPUs",
	FeatureNode:     "a change of this node's configuration group label is not seen; the plugin keeps the group it runs",
}

// Metric name prefix, as the plugin's.
const namespace = "nri_cpumanager"

// metrics are the API's collectors. A nil *metrics records nothing.
type metrics struct {
	features   []Feature
	available  *prometheus.GaugeVec
	failures   *prometheus.CounterVec
	events     *prometheus.CounterVec
	podSpecs   *prometheus.CounterVec
	nrtUpdates *prometheus.CounterVec
	nrtForeign prometheus.Gauge
}

// Outcomes of a PodSpec call (label "outcome").
const (
	specMatched  = "matched"
	specTimeout  = "timeout"
	specNoWatch  = "no_watch"
	eventSent    = "sent"
	eventDropped = "dropped"
	// eventRejectedOutcome: the API server refused the event itself (its
	// namespace being deleted, say), not the plugin.
	eventRejectedOutcome = "rejected"
)

func newMetrics(reg prometheus.Registerer, features []Feature) (*metrics, error) {
	m := &metrics{
		features: features,
		available: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "kubernetes_api_available",
			Help: "1 while the Kubernetes API server answers the plugin's requests of a feature, 0 after a failure (down, slow, forbidden) until one succeeds; only the features the configuration enables."},
			[]string{"feature"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "kubernetes_api_failures_total",
			Help: "Failed requests to the Kubernetes API server, by feature."}, []string{"feature"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "kubernetes_events_total",
			Help: "Events on pods handed to the API's event recorder (sent), dropped by the rate limit (dropped), or refused one by one by the API server (rejected: the pod's namespace being deleted, say), by reason."},
			[]string{"reason", "outcome"}),
		podSpecs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "kubernetes_pod_specs_total",
			Help: "Pod-level admissions that asked the watch for the pod's spec: matched (decided from the spec), timeout (the watch did not show the runtime's totals in time), no_watch (the watch is not synced or not available)."},
			[]string{"outcome"}),
		nrtUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "noderesourcetopology_writes_total",
			Help: "Writes of this node's NodeResourceTopology object, by result."}, []string{"result"}),
		nrtForeign: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "noderesourcetopology_foreign",
			Help: "1 while this node's NodeResourceTopology object belongs to another tool (its app.kubernetes.io/managed-by label is not nri-cpumanager): the plugin leaves it alone and exports nothing."}),
	}
	for _, c := range []prometheus.Collector{m.available, m.failures, m.events, m.podSpecs, m.nrtUpdates, m.nrtForeign} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, f := range features {
		m.available.WithLabelValues(string(f)).Set(1)
		m.failures.WithLabelValues(string(f))
	}
	for _, r := range []string{ReasonResizeRefused, ReasonCreationRefused, ReasonAdmissionRefused, ReasonResized, ReasonNodeCheckFailed} {
		m.events.WithLabelValues(r, eventSent)
		m.events.WithLabelValues(r, eventDropped)
		m.events.WithLabelValues(r, eventRejectedOutcome)
	}
	for _, o := range []string{specMatched, specTimeout, specNoWatch} {
		m.podSpecs.WithLabelValues(o)
	}
	for _, r := range []string{"ok", "error"} {
		m.nrtUpdates.WithLabelValues(r)
	}
	return m, nil
}

// health tracks whether each feature's requests succeed, and says so once
// per change: a warning naming what the plugin loses when a feature's
// requests start failing, a note when they succeed again.
type health struct {
	log     *logrus.Entry
	metrics *metrics
	mu      sync.Mutex
	down    map[Feature]bool
}

func newHealth(log *logrus.Entry, m *metrics) *health {
	return &health{log: log, metrics: m, down: map[Feature]bool{}}
}

// failed records a failed request of feature f.
func (h *health) failed(f Feature, err error) {
	if h.metrics != nil {
		h.metrics.failures.WithLabelValues(string(f)).Inc()
		h.metrics.available.WithLabelValues(string(f)).Set(0)
	}
	h.mu.Lock()
	was := h.down[f]
	h.down[f] = true
	h.mu.Unlock()
	if !was {
		h.log.WithError(err).WithField("feature", f).Warnf("Kubernetes API unavailable: %s; retrying", lost[f])
	} else {
		h.log.WithError(err).WithField("feature", f).Debug("Kubernetes API still unavailable")
	}
}

// succeeded records a successful request of feature f.
func (h *health) succeeded(f Feature) {
	if h.metrics != nil {
		h.metrics.available.WithLabelValues(string(f)).Set(1)
	}
	h.mu.Lock()
	was := h.down[f]
	h.down[f] = false
	h.mu.Unlock()
	if was {
		h.log.WithField("feature", f).Info("Kubernetes API available again")
	}
}

// ok reports whether f's last request succeeded (or none failed yet).
func (h *health) ok(f Feature) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down[f]
}
