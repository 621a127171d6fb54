package plugin

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// gather returns the samples of the named metric as label sets (name=value,
// sorted, comma-separated) to values.
func gather(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(labels)
			out[strings.Join(labels, ",")] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

// TestMetricsStartAtZero checks that every labelled series an alert or a
// dashboard panel reads exists at 0 before anything happened: Prometheus's
// increase() misses the first increment of a series that appears at 1
// (a checkpoint write error right after a restart, say).
func TestMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg, BuildInfo{}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"nri_cpumanager_checkpoint_writes_total":    {"result=error", "result=ok"},
		"nri_cpumanager_unsolicited_updates_total":  {"result=error", "result=ok"},
		"nri_cpumanager_pod_resource_updates_total": {"outcome=applied", "outcome=deferred", "outcome=error", "outcome=infeasible"},
		"nri_cpumanager_resize_requests_total": {
			"operation=increase,outcome=error", "operation=decrease,outcome=deferred", "operation=unchanged,outcome=applied",
		},
		"nri_cpumanager_cpuset_drift_total":       {""},
		"nri_cpumanager_reconnects_total":         {""},
		"nri_cpumanager_checkpoint_corrupt_total": {""},
	}
	for name, series := range want {
		got := gather(t, reg, name)
		for _, s := range series {
			if v, ok := got[s]; !ok || v != 0 {
				t.Errorf("%s{%s} = %v (present %v), want 0 from the start", name, s, v, ok)
			}
		}
	}
	refusals := gather(t, reg, "nri_cpumanager_refusals_total")
	n := 0
	for _, r := range policy.Reasons() {
		for _, v := range r.Verdicts {
			n++
			if got, ok := refusals["reason="+string(r.Reason)+",verdict="+string(v)]; !ok || got != 0 {
				t.Errorf("refusals_total{reason=%q,verdict=%q} = %v (present %v), want 0 from the start", r.Reason, v, got, ok)
			}
		}
	}
	if len(refusals) != n || n < len(policy.Reasons()) {
		t.Errorf("refusals_total has %d series, want each reason with each of its verdicts: %d", len(refusals), n)
	}
}

// TestRefusedSince checks the gauge of refused pods: set at the first
// refusal of a container, its value kept through the kubelet's retries (the
// reason following the latest), gone when a request succeeds, when the
// pod is removed, or when nothing refreshed it for refusedExpiry; bounded.
func TestRefusedSince(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, BuildInfo{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	m.refused.now = func() time.Time { return now }
	const name = "nri_cpumanager_refused_since_seconds"
	db := policy.Pod{UID: "u1", Namespace: "default", Name: "db"}
	web := policy.Pod{UID: "u2", Namespace: "shop", Name: "web"}
	grow := &policy.Refusal{Verdict: policy.Deferred, Reason: policy.ReasonResizeAllocateCPUs}
	shrink := &policy.Refusal{Verdict: policy.Infeasible, Reason: policy.ReasonProhibitedCPUAllocation}
	series := func(pod, ctr, req string, r *policy.Refusal) string {
		ns := map[string]string{"db": "default", "web": "shop"}[pod]
		return "container_name=" + containerLabel(ctr) + ",pod_name=" + pod + ",pod_namespace=" + ns + ",reason=" + string(r.Reason) + ",request=" + req + ",verdict=" + string(r.Verdict)
	}
	check := func(want map[string]float64) {
		t.Helper()
		got := gather(t, reg, name)
		if len(got) != len(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
			return
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", name, got, want)
				return
			}
		}
	}

	mem := m.refusalMemory()
	refusing := func(pod policy.Pod, container, request string, r *policy.Refusal) {
		mem.refused(pod, container, refusalKey{event: request, reason: r.Reason, verdict: r.Verdict})
	}
	check(map[string]float64{})
	refusing(db, "main", "UpdateContainer", grow)
	refusing(web, "", "UpdatePodSandbox", grow)
	check(map[string]float64{series("db", "main", "UpdateContainer", grow): 1000, series("web", "", "UpdatePodSandbox", grow): 1000})

	now = now.Add(time.Minute) // the kubelet retries; now for another reason
	refusing(db, "main", "UpdateContainer", shrink)
	check(map[string]float64{series("db", "main", "UpdateContainer", shrink): 1000, series("web", "", "UpdatePodSandbox", grow): 1000})

	mem.accepted("u1", "main")
	check(map[string]float64{series("web", "", "UpdatePodSandbox", grow): 1000})
	refusing(db, "main", "UpdateContainer", shrink) // refused again: a new episode
	check(map[string]float64{series("db", "main", "UpdateContainer", shrink): 1060, series("web", "", "UpdatePodSandbox", grow): 1000})
	mem.podRemoved("u2")
	check(map[string]float64{series("db", "main", "UpdateContainer", shrink): 1060})

	// The pod re-created under its name: the old UID's series goes.
	refusing(policy.Pod{UID: "u3", Namespace: "default", Name: "db"}, "main", "CreateContainer", grow)
	check(map[string]float64{series("db", "main", "CreateContainer", grow): 1060})

	now = now.Add(refusedExpiry)
	check(map[string]float64{})

	for i := range maxRefused + 10 {
		refusing(policy.Pod{UID: strconv.Itoa(i), Namespace: "ns", Name: "p" + strconv.Itoa(i)}, "c", "CreateContainer", grow)
	}
	if n := len(gather(t, reg, name)); n != maxRefused {
		t.Errorf("%d series, want at most %d", n, maxRefused)
	}

	var none *Metrics // a nil *Metrics gives a memory of the plugin's own
	if !none.refusalMemory().refused(db, "main", refusalKey{event: "UpdateContainer"}) {
		t.Error("a first refusal in the memory of a nil *Metrics is not news")
	}
}

// TestConfigureRecordsTheRuntime: each connection's Configure names the
// runtime in runtime_info (one series: the latest connection's, so that a
// containerd upgraded under the plugin replaces the old version) and
// hands it to OnConfigure.
func TestConfigureRecordsTheRuntime(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, BuildInfo{})
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	p, _ := newTestPluginWith(t, func(o *Options) {
		o.Metrics = m
		o.OnConfigure = func(runtime, version string) { told = append(told, runtime+" "+version) }
	})
	if got := gather(t, reg, "nri_cpumanager_runtime_info"); len(got) != 0 {
		t.Errorf("runtime_info before any connection: %v, want no series", got)
	}
	for _, tc := range []struct {
		name, version string
		want          map[string]float64
	}{
		{"containerd", "v2.3.1", map[string]float64{"name=containerd,version=v2.3.1": 1}},
		{"containerd", "v2.4.2", map[string]float64{"name=containerd,version=v2.4.2": 1}},
		{"", "", map[string]float64{"name=unknown,version=unknown": 1}},
	} {
		if _, err := p.Configure(context.Background(), "", tc.name, tc.version); err != nil {
			t.Fatal(err)
		}
		if got := gather(t, reg, "nri_cpumanager_runtime_info"); !maps.Equal(got, tc.want) {
			t.Errorf("after Configure(%q, %q): runtime_info %v, want %v", tc.name, tc.version, got, tc.want)
		}
	}
	if want := []string{"containerd v2.3.1", "containerd v2.4.2", " "}; !slices.Equal(told, want) {
		t.Errorf("OnConfigure got %q, want %q", told, want)
	}
}
