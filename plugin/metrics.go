package plugin

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Metric name prefix.
const namespace = "nri_cpumanager"

// BuildInfo describes the running binary, for the build_info metric.
type BuildInfo struct {
	Version, Revision, GoVersion string
}

// Results of an operation (label "result"), one word set for every metric.
const (
	resultOK    = "ok"
	resultError = "error"
)

// Resize outcomes.
const (
	outcomeApplied    = "applied"
	outcomeInfeasible = "infeasible"
	outcomeDeferred   = "deferred"
	outcomeError      = "error"
)

// Metrics are the plugin's Prometheus collectors. A nil *Metrics records
// nothing.
type Metrics struct {
	resizes          *prometheus.CounterVec
	refusals         *prometheus.CounterVec
	model            *modelCollector
	eventDuration    *prometheus.HistogramVec
	checkpointWrites *prometheus.CounterVec
	checkpointTime   prometheus.Histogram
	checkpointBad    prometheus.Counter
	reconnects       prometheus.Counter
	abandoned        prometheus.Counter
	ready            prometheus.GaugeFunc
	// link is what ready and checkpoint_write_in_progress_seconds read,
	// without the plugin's lock (linkFrom).
	link            atomic.Pointer[linkReader]
	configPending   prometheus.Gauge
	configRejected  prometheus.Gauge
	observeOnly     prometheus.Gauge
	unsolicitedSent *prometheus.CounterVec
	drifts          prometheus.Counter
	podUpdates      *prometheus.CounterVec
	runtime         *prometheus.GaugeVec
	// refused is the plugin's memory of refusals, which
	// refused_since_seconds reads (refusals.go).
	refused *refusalMemory
}

// The label values initialised at 0 when the metrics are created, so that
// a first increment is an increase (a series born at 1 is not one for
// increase() and rate()); refusals_total gets each reason of policy's
// table with each verdict it comes with.
var (
	resizeOps = []policy.Operation{policy.OpIncrease, policy.OpDecrease, policy.OpUnchanged}
	outcomes  = []string{outcomeApplied, outcomeInfeasible, outcomeDeferred, outcomeError}
)

// NewMetrics creates the collectors and registers them with reg.
// Empty fields of info are reported as "unknown" (a label is never empty).
func NewMetrics(reg prometheus.Registerer, info BuildInfo) (*Metrics, error) {
	orUnknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "Always 1; the labels say which build of the plugin runs.",
		ConstLabels: prometheus.Labels{"version": orUnknown(info.Version), "revision": orUnknown(info.Revision),
			"goversion": orUnknown(info.GoVersion)},
	})
	buildInfo.Set(1)
	m := &Metrics{
		resizes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "resize_requests_total",
			Help: "Container resize requests (NRI UpdateContainer), by requested operation (increase, decrease, unchanged) and outcome (applied, infeasible, deferred, error); every request, the kubelet's retries included.",
		}, []string{"operation", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "refusals_total",
			Help: "Distinct refusals, by reason (" + policy.ReasonNames() + ") and verdict: a request refused again for the same reason within 5 minutes (the kubelet retries about once a second) is not counted again; resize_requests_total and pod_resource_updates_total count every request.",
		}, []string{"reason", "verdict"}),
		model: newModelCollector(),
		eventDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "event_duration_seconds",
			Help:    "Time to handle an NRI event, checkpoint write included.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2},
		}, []string{"event"}),
		checkpointWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "checkpoint_writes_total", Help: "Checkpoint writes, by result (ok, error).",
		}, []string{"result"}),
		checkpointTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "checkpoint_write_duration_seconds",
			Help:    "Time to write and sync the checkpoint.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1},
		}),
		checkpointBad: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "checkpoint_corrupt_total", Help: "Checkpoints found untrusted at start and moved aside.",
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "reconnects_total", Help: "Times the NRI connection was lost or failed and re-dialled (a run of failed dials counts once).",
		}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "abandoned_connections_total",
			Help: "Connections the watchdog gave up on, the runtime not having configured them in time (each leaves an NRI stub's goroutines behind; past 64 the process exits and the kubelet starts a fresh one).",
		}),

		configPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "config_pending",
			Help: "1 while a configuration waits because pinned containers hold CPUs it reserves or cannot allocate; the plugin runs on the previous one and applies it once they are free.",
		}),
		configRejected: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "config_rejected",
			Help: "1 while the configuration file is rejected (invalid, or the plugin could not start with it); the running configuration stays.",
		}),
		observeOnly: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "observe_only",
			Help: "1 while the plugin only observes (observeOnly): it decides and records as usual and hands the runtime nothing.",
		}),
		unsolicitedSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "unsolicited_updates_total",
			Help: "Container updates sent outside of event replies (shared pool growth after a confirmed shrink, repairs), by result (ok, error).",
		}, []string{"result"}),
		drifts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "cpuset_drift_total",
			Help: "Containers whose cgroup cpuset was found to differ from what the runtime had applied (then re-sent).",
		}),
		podUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "pod_resource_updates_total",
			Help: "Pod-level resource updates (NRI UpdatePodSandbox, from CRI UpdatePodSandboxResources), by outcome (applied, infeasible, deferred, error); every request, the kubelet's retries included.",
		}, []string{"outcome"}),
		runtime: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "runtime_info",
			Help: "1 for the runtime that configured the plugin's latest NRI connection, by its name and version as NRI's Configure gives them (none before the first connection).",
		}, []string{"name", "version"}),
		refused: newRefusalMemory(time.Now),
	}
	m.ready = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "ready",
		Help: "1 when registered with NRI and synchronized; 0 from the moment the connection ends, a stalled request's included.",
	}, func() float64 {
		if l := m.link.Load(); l != nil && l.ready() {
			return 1
		}
		return 0
	})
	writing := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "checkpoint_write_in_progress_seconds",
		Help: "Age of the checkpoint write in progress (0 when none): a write that takes seconds stalls the NRI request waiting for it, and the runtime drops the plugin past its request timeout (2 s).",
	}, func() float64 {
		if l := m.link.Load(); l != nil {
			return l.writing().Seconds()
		}
		return 0
	})
	// Every series an alert or a dashboard panel reads exists from the
	// start, at 0: Prometheus's increase() and rate() see no increase in
	// a series that appears at 1.
	for _, result := range []string{resultOK, resultError} {
		m.checkpointWrites.WithLabelValues(result)
		m.unsolicitedSent.WithLabelValues(result)
	}
	for _, outcome := range outcomes {
		m.podUpdates.WithLabelValues(outcome)
		for _, op := range resizeOps {
			m.resizes.WithLabelValues(string(op), outcome)
		}
	}
	for _, r := range policy.Reasons() {
		for _, verdict := range r.Verdicts {
			m.refusals.WithLabelValues(string(r.Reason), string(verdict))
		}
	}
	for _, c := range []prometheus.Collector{buildInfo, m.resizes, m.refusals, m.model,
		m.eventDuration, m.checkpointWrites, m.checkpointTime, m.checkpointBad, m.reconnects, m.abandoned, m.ready, m.configPending, m.configRejected, m.observeOnly,
		m.unsolicitedSent, m.drifts, m.podUpdates, m.runtime, newRefusedSince(m.refused), writing} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observeEvent(event string, start time.Time) {
	if m != nil {
		m.eventDuration.WithLabelValues(event).Observe(time.Since(start).Seconds())
	}
}

func (m *Metrics) resize(op policy.Operation, outcome string) {
	if m != nil {
		m.resizes.WithLabelValues(string(op), outcome).Inc()
	}
}

func (m *Metrics) refusal(r *policy.Refusal) {
	if m != nil {
		m.refusals.WithLabelValues(string(r.Reason), string(r.Verdict)).Inc()
	}
}

// setConfigPending says whether a configuration waits for pinned
// containers.
func (m *Metrics) setConfigPending(pending bool) {
	if m != nil {
		setBool(m.configPending, pending)
	}
}

// setRuntime records the runtime of the latest connection: one series,
// the previous runtime's gone (containerd upgraded under the plugin).
func (m *Metrics) setRuntime(name, version string) {
	if m == nil {
		return
	}
	if name == "" {
		name = "unknown"
	}
	if version == "" {
		version = "unknown"
	}
	m.runtime.Reset()
	m.runtime.WithLabelValues(name, version).Set(1)
}

// ConfigRejected says whether the configuration file is rejected.
func (m *Metrics) ConfigRejected(rejected bool) {
	if m != nil {
		setBool(m.configRejected, rejected)
	}
}

// setObserveOnly says whether the plugin only observes.
func (m *Metrics) setObserveOnly(on bool) {
	if m != nil {
		setBool(m.observeOnly, on)
	}
}

// setBool sets a gauge that says yes (1) or no (0).
func setBool(g prometheus.Gauge, b bool) {
	v := 0.0
	if b {
		v = 1
	}
	g.Set(v)
}

// setPolicy makes pol the policy the free-CPU gauges ask.
func (m *Metrics) setPolicy(pol *policy.Policy) {
	if m != nil {
		m.model.policy.Store(pol)
	}
}

// setModel makes m the model the CPU gauges describe.
func (m *Metrics) setModel(model *policy.Model) {
	if m != nil {
		m.model.current.Store(model)
	}
}

func (m *Metrics) checkpointWrite(start time.Time, err error) {
	if m == nil {
		return
	}
	m.checkpointTime.Observe(time.Since(start).Seconds())
	result := resultOK
	if err != nil {
		result = resultError
	}
	m.checkpointWrites.WithLabelValues(result).Inc()
}

func (m *Metrics) checkpointCorrupt() {
	if m != nil {
		m.checkpointBad.Inc()
	}
}

func (m *Metrics) reconnect() {
	if m != nil {
		m.reconnects.Inc()
	}
}

func (m *Metrics) abandonedStub() {
	if m != nil {
		m.abandoned.Inc()
	}
}

// linkReader is what the metrics read of a plugin without its lock.
type linkReader struct {
	ready   func() bool
	writing func() time.Duration
}

// linkFrom has ready and checkpoint_write_in_progress_seconds read r.
func (m *Metrics) linkFrom(r linkReader) {
	if m != nil {
		m.link.Store(&r)
	}
}

func (m *Metrics) unsolicited(sent, failed int, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.unsolicitedSent.WithLabelValues(resultError).Add(float64(sent))
		return
	}
	m.unsolicitedSent.WithLabelValues(resultOK).Add(float64(sent - failed))
	m.unsolicitedSent.WithLabelValues(resultError).Add(float64(failed))
}

func (m *Metrics) drift() {
	if m != nil {
		m.drifts.Inc()
	}
}

func (m *Metrics) podUpdate(outcome string) {
	if m != nil {
		m.podUpdates.WithLabelValues(outcome).Inc()
	}
}

// outcomeOf maps a failed resize to its outcome: the refusal's verdict, or
// error for a fault.
func outcomeOf(err error) string {
	r, ok := policy.AsRefusal(err)
	switch {
	case !ok:
		return outcomeError
	case r.Verdict == policy.Deferred:
		return outcomeDeferred
	}
	return outcomeInfeasible
}

// setTopology names the NUMA node of every CPU for the per-node gauge.
func (m *Metrics) setTopology(t *cpuallocator.Topology) {
	if m == nil {
		return
	}
	nodeOf := map[int]string{}
	for _, cpu := range t.CPUs().UnsortedList() {
		if info, ok := t.CPU(cpu); ok {
			nodeOf[cpu] = strconv.Itoa(info.NUMANode)
		}
	}
	nodes := make([]string, 0, len(t.NUMANodes()))
	for _, n := range t.NUMANodes() {
		nodes = append(nodes, strconv.Itoa(n))
	}
	m.model.numa.Store(&numaNodes{nodeOf: nodeOf, nodes: nodes})
}

// numaNodes maps CPUs to their NUMA node's label value.
type numaNodes struct {
	nodeOf map[int]string
	nodes  []string
}

// modelCollector reports the CPU gauges (exclusive CPUs, in all and per
// NUMA node, shared CPUs, exclusive containers) from the current model when scraped, not at every
// commit: counting every assignment on the request path cost more than the
// rest of the metrics together. A committed model is never changed (each
// decision makes a new one), so a scrape reads it without the plugin's lock.
type modelCollector struct {
	current                                  atomic.Pointer[policy.Model]
	policy                                   atomic.Pointer[policy.Policy]
	numa                                     atomic.Pointer[numaNodes]
	exclusiveCPUs, perNode, shared, ctrCount *prometheus.Desc
	held, holdingPods, freePerNode           *prometheus.Desc
	delayed, offDevices                      *prometheus.Desc
}

func newModelCollector() *modelCollector {
	return &modelCollector{
		exclusiveCPUs: prometheus.NewDesc(namespace+"_exclusive_cpus", "CPUs assigned exclusively to containers.", nil, nil),
		perNode: prometheus.NewDesc(namespace+"_numa_node_exclusive_cpus", "CPUs assigned exclusively to containers, by NUMA node.",
			[]string{"numa_node"}, nil),
		shared:   prometheus.NewDesc(namespace+"_shared_cpus", "CPUs in the shared pool that shared containers run on.", nil, nil),
		ctrCount: prometheus.NewDesc(namespace+"_exclusive_containers", "Containers holding exclusive CPUs.", nil, nil),
		held: prometheus.NewDesc(namespace+"_held_cpus",
			"CPUs released by a container's decrease and held for its pod while the pod's resize is in flight (until its containers add up to its total, or the hold times out).", nil, nil),
		holdingPods: prometheus.NewDesc(namespace+"_resizes_in_flight", "Pods holding CPUs for a resize in flight.", nil, nil),
		delayed: prometheus.NewDesc(namespace+"_delayed_cpus",
			"CPUs a container's decrease released that it keeps until its scale-down delay is over (scaleDownDelay).", nil, nil),
		offDevices: prometheus.NewDesc(namespace+"_containers_off_device_nodes",
			"Pinned containers some of whose exclusive CPUs are not on the NUMA nodes of their devices (topologyManagerPolicy best-effort when those nodes were full, or CPUs placed under another policy).", nil, nil),
		freePerNode: prometheus.NewDesc(namespace+"_numa_node_free_cpus",
			"CPUs free for an exclusive container now, by NUMA node (reserved CPUs and CPUs held for pods excluded).", []string{"numa_node"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *modelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.exclusiveCPUs
	ch <- c.perNode
	ch <- c.shared
	ch <- c.ctrCount
	ch <- c.held
	ch <- c.holdingPods
	ch <- c.freePerNode
	ch <- c.delayed
	ch <- c.offDevices
}

// Collect implements prometheus.Collector. A pod's entries may share CPUs
// (an init container's with the containers that reuse them): the
// exclusive CPUs are counted once.
func (c *modelCollector) Collect(ch chan<- prometheus.Metric) {
	model := c.current.Load()
	if model == nil {
		return
	}
	containers, delayed := 0, 0
	numa := c.numa.Load()
	perNode := map[string]int{}
	for _, a := range model.State.Assignments() {
		containers++
		delayed += a.Delayed.Size()
	}
	all := model.State.ExclusiveCPUs()
	exclusive := all.Size()
	if numa != nil {
		for _, cpu := range all.UnsortedList() {
			perNode[numa.nodeOf[cpu]]++
		}
	}
	if numa != nil {
		for _, node := range numa.nodes {
			ch <- prometheus.MustNewConstMetric(c.perNode, prometheus.GaugeValue, float64(perNode[node]), node)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.exclusiveCPUs, prometheus.GaugeValue, float64(exclusive))
	ch <- prometheus.MustNewConstMetric(c.shared, prometheus.GaugeValue, float64(model.SharedPoolSize()))
	ch <- prometheus.MustNewConstMetric(c.ctrCount, prometheus.GaugeValue, float64(containers))
	held, pods := 0, 0
	for _, h := range model.State.Holds() {
		held += h.CPUs.Size()
		pods++
	}
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(held))
	ch <- prometheus.MustNewConstMetric(c.holdingPods, prometheus.GaugeValue, float64(pods))
	ch <- prometheus.MustNewConstMetric(c.delayed, prometheus.GaugeValue, float64(delayed))
	if pol := c.policy.Load(); pol != nil {
		ch <- prometheus.MustNewConstMetric(c.offDevices, prometheus.GaugeValue, float64(pol.OffDeviceNodes(model)))
	}
	if pol := c.policy.Load(); pol != nil && numa != nil {
		freePerNode := map[string]int{}
		for _, cpu := range pol.Free(model).UnsortedList() {
			freePerNode[numa.nodeOf[cpu]]++
		}
		for _, node := range numa.nodes {
			ch <- prometheus.MustNewConstMetric(c.freePerNode, prometheus.GaugeValue, float64(freePerNode[node]), node)
		}
	}
}

// Refused pods. refusals_total counts distinct refusals by reason, which
// cannot name the pod (unbounded label values in a counter that lives
// forever), so an alert could only name the plugin's pod. The gauge
// refused_since_seconds (refusals.go) names the pods refused now: one
// series per container whose latest request was refused (per pod for a
// pod-level resize), removed when a request for it succeeds or the pod is
// removed. Its value is when that container's requests started being
// refused, so that an alert can wait for a stuck pod without a `for`
// clause that a Prometheus restart resets.

// refusalMemory returns the memory of refusals refused_since_seconds reads;
// a memory of its own for a nil *Metrics.
func (m *Metrics) refusalMemory() *refusalMemory {
	if m == nil {
		return newRefusalMemory(time.Now)
	}
	return m.refused
}

// podLevel is the container_name of a pod-level request's series: no
// label value is empty.
const podLevel = "(pod)"

// containerLabel is the container_name of a container ("" for the pod).
func containerLabel(container string) string {
	if container == "" {
		return podLevel
	}
	return container
}
