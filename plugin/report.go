package plugin

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The log lines an operator follows (docs/troubleshooting.md): one info
// line per applied creation, resize and pod update, with what was asked
// and the cpuset before → after; the raw NRI resources of every request at
// debug.

// requestFields are the CPU and memory a container or pod asks for, as the
// kubelet wrote them in its spec: CPU request (from the shares), limit
// (from quota and period) and memory limit.
func requestFields(r policy.Resources) logrus.Fields {
	return logrus.Fields{
		"cpuRequest":  formatMilli(policy.MilliCPUFromShares(r.CPUShares)),
		"cpuLimit":    formatMilli(policy.MilliCPUFromQuota(r.CPUQuota, r.CPUPeriod)),
		"memoryLimit": formatBytes(r.MemoryLimit),
	}
}

// change formats a value before → after, or the value when it stayed.
func change(before, after string) string {
	if before == after {
		return after
	}
	return before + " → " + after
}

// cpusText formats a cpuset for logs, naming the empty set.
func cpusText(cpus cpuset.CPUSet) string {
	if cpus.IsEmpty() {
		return "none"
	}
	return cpumask.Format(cpus)
}

// maskText is cpusText for a bitmap.
func maskText(cpus cpumask.Mask) string {
	if cpus.IsEmpty() {
		return "none"
	}
	return cpus.String()
}

// formatMilli formats milli-CPU as Kubernetes does: "2", "1500m"; "none"
// for 0.
func formatMilli(milli int64) string {
	switch {
	case milli == 0:
		return "none"
	case milli%1000 == 0:
		return fmt.Sprint(milli / 1000)
	}
	return fmt.Sprintf("%dm", milli)
}

// formatBytes formats a memory size as Kubernetes does: "1Gi", "1536Mi",
// or bytes; "none" for 0.
func formatBytes(b int64) string {
	if b <= 0 {
		return "none"
	}
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b%u.size == 0 {
			return fmt.Sprintf("%d%s", b/u.size, u.suffix)
		}
	}
	return fmt.Sprint(b)
}

// describeNRI formats NRI resources as sent, every field that is set, in
// cgroup terms: "cpu.shares=1024 cpu.quota=100000 cpu.period=100000
// memory.limit=1073741824". Empty resources are "none".
func describeNRI(r *api.LinuxResources) string {
	var parts []string
	add := func(name string, v any) { parts = append(parts, fmt.Sprintf("%s=%v", name, v)) }
	if cpu := r.GetCpu(); cpu != nil {
		if v := cpu.GetShares(); v != nil {
			add("cpu.shares", v.GetValue())
		}
		if v := cpu.GetQuota(); v != nil {
			add("cpu.quota", v.GetValue())
		}
		if v := cpu.GetPeriod(); v != nil {
			add("cpu.period", v.GetValue())
		}
		if v := cpu.GetRealtimeRuntime(); v != nil {
			add("cpu.rt_runtime", v.GetValue())
		}
		if v := cpu.GetRealtimePeriod(); v != nil {
			add("cpu.rt_period", v.GetValue())
		}
		if cpu.GetCpus() != "" {
			add("cpuset.cpus", cpu.GetCpus())
		}
		if cpu.GetMems() != "" {
			add("cpuset.mems", cpu.GetMems())
		}
	}
	if mem := r.GetMemory(); mem != nil {
		for _, f := range []struct {
			name string
			v    *api.OptionalInt64
		}{{"memory.limit", mem.GetLimit()}, {"memory.reservation", mem.GetReservation()}, {"memory.swap", mem.GetSwap()},
			{"memory.kernel", mem.GetKernel()}, {"memory.kernel_tcp", mem.GetKernelTcp()}} {
			if f.v != nil {
				add(f.name, f.v.GetValue())
			}
		}
		if v := mem.GetSwappiness(); v != nil {
			add("memory.swappiness", v.GetValue())
		}
		if v := mem.GetDisableOomKiller(); v != nil {
			add("memory.disable_oom_killer", v.GetValue())
		}
	}
	for _, h := range r.GetHugepageLimits() {
		add("hugetlb."+h.GetPageSize(), h.GetLimit())
	}
	if v := r.GetPids(); v != nil {
		add("pids.max", v.GetLimit())
	}
	if v := r.GetBlockioClass(); v != nil {
		add("blockio.class", v.GetValue())
	}
	if v := r.GetRdtClass(); v != nil {
		add("rdt.class", v.GetValue())
	}
	for _, k := range slices.Sorted(maps.Keys(r.GetUnified())) {
		add("unified."+k, r.GetUnified()[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// debugging reports whether debug lines are logged: the raw resources of
// a request are formatted only then.
func (p *Plugin) debugging() bool {
	return p.log.Logger.IsLevelEnabled(logrus.DebugLevel)
}

// podLog returns the log entry of a pod-level event.
func (p *Plugin) podLog(pod policy.Pod) *logrus.Entry {
	return p.log.WithFields(logrus.Fields{"pod": pod.Namespace + "/" + pod.Name, "podUID": pod.UID})
}

// withNotes adds a decision's notes to a log line.
func withNotes(e *logrus.Entry, notes []string) *logrus.Entry {
	if len(notes) == 0 {
		return e
	}
	return e.WithField("notes", strings.Join(notes, "; "))
}

// reporter turns the outcome of a request into what an operator sees:
// the log line, the metrics, the memory of refusals and the Kubernetes
// API's event. It decides nothing.
type reporter struct {
	log      *logrus.Entry
	metrics  *Metrics
	api      API // nil without the Kubernetes API, and when observing
	refusals *refusalMemory
}

// report tells the outcome of a request: a creation, a resize or a pod
// update, applied or refused. The other events say what they did in
// notes, logged as they apply their decisions (notes).
func (r *reporter) report(o outcome) {
	switch o.event {
	case "CreateContainer":
		r.creation(o)
	case "UpdateContainer":
		r.resize(o)
	case "UpdatePodSandbox":
		r.podUpdate(o)
	case "RunPodSandbox":
		r.admission(o)
	}
}

// admission tells a pod's admission at its sandbox (policy.AdmitPod): a
// refusal as any other (its containers' creations are refused with it
// until the pod fits), an admission with the CPUs of each container.
func (r *reporter) admission(o outcome) {
	if o.err != nil {
		r.refused(o)
		return
	}
	if len(o.decision.Notes) > 0 {
		withNotes(o.log, o.decision.Notes).Info("pod admitted")
	}
}

// notes logs a decision's notes, one line each.
func (r *reporter) notes(event string, notes []string) {
	for _, n := range notes {
		r.log.WithField("event", event).Info(n)
	}
}

// refused tells a failed request. A refusal is a warning, counted in
// refusals_total and reported to the API, the first time in
// refusalWindow; the kubelet's retries of it are logged at debug. A fault
// is always an error.
func (r *reporter) refused(o outcome) {
	entry := o.log.WithError(o.err)
	ref, ok := policy.AsRefusal(o.err)
	if !ok {
		entry.Errorf("%s failed", o.event)
		return
	}
	entry = entry.WithFields(logrus.Fields{"reason": ref.Reason, "verdict": ref.Verdict})
	if !r.refusals.refused(o.pod, o.container.Name, refusalKey{event: o.event, requested: o.requested, reason: ref.Reason, verdict: ref.Verdict}) {
		entry.Debugf("%s refused again (the kubelet retries; warned about once every %s)", o.event, refusalWindow)
		return
	}
	r.metrics.refusal(ref)
	entry.Warnf("%s refused", o.event)
	if r.api != nil {
		r.api.Refused(o.pod, o.container.Name, o.event, ref)
	}
}

// creation tells a creation, applied or refused.
func (r *reporter) creation(o outcome) {
	if o.err != nil {
		r.refused(o)
		return
	}
	r.refusals.accepted(o.pod.UID, o.container.Name)
	d := o.decision
	fields := requestFields(o.container.Resources)
	fields["cpuset"] = maskText(d.After)
	fields["exclusive"] = d.Exclusive
	fields["shared"] = maskText(d.SharedAfter)
	if !d.SharedBefore.Equal(d.SharedAfter) {
		fields["shared"] = change(maskText(d.SharedBefore), maskText(d.SharedAfter))
	}
	fields["others"] = o.others
	withNotes(o.log.WithFields(fields), d.Notes).Info("container created")
	for _, w := range d.Warnings {
		o.log.Warn(w)
	}
	if ref := d.Unapplied; ref != nil {
		// The kubelet took a resize of the container for done while it was
		// down (it sends the runtime nothing for a container that does not
		// run): the pod says what was not applied, as for a refused resize.
		key := refusalKey{event: "UpdateContainer", requested: o.requested, reason: ref.Reason, verdict: ref.Verdict}
		if r.refusals.refused(o.pod, o.container.Name, key) {
			r.metrics.refusal(ref)
			if r.api != nil {
				r.api.Refused(o.pod, o.container.Name, "UpdateContainer", ref)
			}
		}
	}
}

// resize tells and counts a resize, applied or not.
func (r *reporter) resize(o outcome) {
	d := o.decision
	if o.err != nil {
		r.refused(o)
		r.metrics.resize(d.Operation, outcomeOf(o.err))
		return
	}
	r.metrics.resize(d.Operation, outcomeApplied)
	r.refusals.accepted(o.pod.UID, o.container.Name)
	fields := requestFields(policy.MergeResources(o.container.Resources, o.requested.Resources))
	fields["operation"] = d.Operation
	fields["cpuset"] = change(maskText(d.Before), maskText(d.After))
	withNotes(o.log.WithFields(fields), d.Notes).Info("container resized")
	if r.api != nil && !d.Before.Equal(d.After) {
		r.api.Resized(o.pod, o.container.Name, d.Before.CPUSet(), d.After.CPUSet())
	}
}

// podUpdate tells and counts a pod-level update, applied or not.
func (r *reporter) podUpdate(o outcome) {
	d := o.decision
	if o.err != nil {
		r.refused(o)
		r.metrics.podUpdate(outcomeOf(o.err))
		return
	}
	r.metrics.podUpdate(outcomeApplied)
	r.refusals.accepted(o.pod.UID, "")
	cpusets := make([]string, 0, len(d.PodCPUs))
	for _, c := range d.PodCPUs {
		cpusets = append(cpusets, c.Name+"="+cpusText(c.CPUs))
	}
	before, now := d.PodBefore, o.requested.Resources
	withNotes(o.log.WithFields(logrus.Fields{
		"cpuRequest":  change(formatMilli(policy.MilliCPUFromShares(before.CPUShares)), formatMilli(policy.MilliCPUFromShares(now.CPUShares))),
		"cpuLimit":    change(formatMilli(policy.MilliCPUFromQuota(before.CPUQuota, before.CPUPeriod)), formatMilli(policy.MilliCPUFromQuota(now.CPUQuota, now.CPUPeriod))),
		"memoryLimit": change(formatBytes(before.MemoryLimit), formatBytes(now.MemoryLimit)),
		"operation":   d.Operation,
		"cpusets":     strings.Join(cpusets, " "),
	}), d.Notes).Info("pod resources updated")
}

// containerLog returns the log entry of a container's event.
func (p *Plugin) containerLog(c policy.Container) *logrus.Entry {
	return p.log.WithFields(logrus.Fields{"pod": c.Pod.Namespace + "/" + c.Pod.Name, "container": c.Name, "id": c.ID})
}

// The plugin's one memory of refusals. The kubelet retries a refused
// resize about once a second for as long as the pod's spec asks for it
// (and a refused creation with a backoff): a refusal is warned about in
// the log, counted in refusals_total and reported to the API once per
// refusalWindow, its repeats in between are logged at debug; and
// refused_since_seconds names the containers refused now, since when.
// Both read the same record, cleared when a request of the container is
// accepted or its pod removed.
const (
	refusalWindow = 5 * time.Minute
	// maxRefused bounds the containers remembered (a node runs a few
	// hundred containers at most): past it the expired are forgotten,
	// then the one refused least recently.
	maxRefused = 1024
	// maxWarned bounds the distinct refusals remembered per container:
	// past it the one warned about longest ago is forgotten.
	maxWarned = 16
	// refusedExpiry forgets a container not refused again for that long:
	// a pod removed while the plugin was away is never cleared, and the
	// kubelet retries a refused request at least every 5 minutes (its
	// creation backoff) for as long as it wants it.
	refusedExpiry = 30 * time.Minute
)

// refusedKey is a refused container (container "" for a pod-level
// request).
type refusedKey struct{ podUID, container string }

// refusalKey identifies a refusal as the kubelet repeats it: the same
// request (event, requested resources) refused for the same reason and
// verdict.
type refusalKey struct {
	event     string
	requested policy.PodResources
	reason    policy.Reason
	verdict   policy.Verdict
}

// refusedEntry is what is remembered of a refused container.
type refusedEntry struct {
	// namespace, pod and the latest refusal label its series.
	namespace, pod, request, reason, verdict string
	// since is when its requests started being refused, last when one
	// was refused last.
	since, last time.Time
	// warned is when each distinct refusal was last warned about.
	warned map[refusalKey]time.Time
}

// refusalMemory is the memory of refusals. Safe for concurrent use: the
// handlers record, metric scrapes read.
type refusalMemory struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[refusedKey]*refusedEntry
}

func newRefusalMemory(now func() time.Time) *refusalMemory {
	return &refusalMemory{now: now, entries: map[refusedKey]*refusedEntry{}}
}

// refused records a refusal of a pod's container (container "" for the
// pod's own) and reports whether it deserves a warning: this refusal was
// not warned about in the last refusalWindow. It then counts as warned
// about now.
func (m *refusalMemory) refused(pod policy.Pod, container string, k refusalKey) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	key := refusedKey{pod.UID, container}
	e := m.entries[key]
	if e == nil {
		if len(m.entries) >= maxRefused {
			m.evict(now)
		}
		// A pod re-created under its name has a new UID: its old series
		// would collide with the new one's labels.
		for old, oe := range m.entries {
			if old.container == container && old.podUID != pod.UID && oe.namespace == pod.Namespace && oe.pod == pod.Name {
				delete(m.entries, old)
			}
		}
		e = &refusedEntry{since: now, warned: map[refusalKey]time.Time{}}
		m.entries[key] = e
	}
	e.namespace, e.pod, e.request, e.reason, e.verdict = pod.Namespace, pod.Name, k.event, string(k.reason), string(k.verdict)
	e.last = now
	if at, ok := e.warned[k]; ok && now.Sub(at) < refusalWindow {
		return false
	}
	if _, ok := e.warned[k]; !ok && len(e.warned) >= maxWarned {
		var oldest refusalKey
		var oldestAt time.Time
		for wk, at := range e.warned {
			if oldestAt.IsZero() || at.Before(oldestAt) {
				oldest, oldestAt = wk, at
			}
		}
		delete(e.warned, oldest)
	}
	e.warned[k] = now
	return true
}

// evict forgets the expired containers, or the one refused least
// recently if none expired. mu must be held.
func (m *refusalMemory) evict(now time.Time) {
	m.expire(now)
	if len(m.entries) < maxRefused {
		return
	}
	var oldest refusedKey
	var oldestAt time.Time
	for k, e := range m.entries {
		if oldestAt.IsZero() || e.last.Before(oldestAt) {
			oldest, oldestAt = k, e.last
		}
	}
	delete(m.entries, oldest)
}

// expire forgets the containers not refused again within refusedExpiry.
// mu must be held.
func (m *refusalMemory) expire(now time.Time) {
	for k, e := range m.entries {
		if now.Sub(e.last) >= refusedExpiry {
			delete(m.entries, k)
		}
	}
}

// accepted forgets the refusals of a pod's container (container "" for
// the pod's own) once a request for it was accepted: it is no longer
// refused, and a later refusal is news again.
func (m *refusalMemory) accepted(podUID, container string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, refusedKey{podUID, container})
}

// podRemoved forgets the refusals of a removed pod.
func (m *refusalMemory) podRemoved(podUID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.entries {
		if k.podUID == podUID {
			delete(m.entries, k)
		}
	}
}

// refusedSince is refused_since_seconds: the memory seen as a gauge per
// refused container.
type refusedSince struct {
	memory *refusalMemory
	desc   *prometheus.Desc
}

func newRefusedSince(memory *refusalMemory) *refusedSince {
	return &refusedSince{
		memory: memory,
		desc: prometheus.NewDesc(namespace+"_refused_since_seconds",
			"Unix time since when the requests of a pod's container (container_name "+podLevel+" for a pod-level resize) have been refused, "+
				"while its latest request is refused: request (CreateContainer, UpdateContainer, UpdatePodSandbox), reason and verdict of the latest refusal. "+
				"Removed when a request for it succeeds or the pod is removed.",
			[]string{"pod_namespace", "pod_name", "container_name", "request", "reason", "verdict"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *refusedSince) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *refusedSince) Collect(ch chan<- prometheus.Metric) {
	m := c.memory
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(m.now())
	for k, e := range m.entries {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(e.since.UnixNano())/1e9,
			e.namespace, e.pod, containerLabel(k.container), e.request, e.reason, e.verdict)
	}
}
