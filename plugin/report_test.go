package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// loggedPlugin is newTestPlugin (4 CPUs, CPU 0 reserved) whose logs, at
// debug, go to a test hook, with metrics.
func loggedPlugin(t *testing.T) (*Plugin, *test.Hook, *Metrics) {
	t.Helper()
	p, _ := newTestPlugin(t)
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	p.log = log.WithField("component", "plugin")
	m, err := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
	if err != nil {
		t.Fatal(err)
	}
	p.metrics = m
	p.reporter = &reporter{log: p.log, metrics: m, api: p.opts.API, refusals: m.refusalMemory()}
	if _, err := p.Synchronize(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	hook.Reset()
	return p, hook, m
}

// nriResources are a Guaranteed container's or pod's resources as the
// kubelet sends them: n CPUs (shares, then quota and period as sent only
// when set), memory in GiB.
func nriResources(shares, quota int64, gib int64) *api.LinuxResources {
	return &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(uint64(shares)), Quota: api.Int64(quota), Period: api.UInt64(100000)},
		Memory: &api.LinuxMemory{Limit: api.Int64(gib << 30)},
	}
}

// entries returns the hook's entries with a message at a level.
func entries(hook *test.Hook, level logrus.Level, msg string) []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == level && e.Message == msg {
			out = append(out, e)
		}
	}
	return out
}

// oneEntry returns the only entry with a message at a level, checking its
// fields.
func oneEntry(t *testing.T, hook *test.Hook, level logrus.Level, msg string, want logrus.Fields) {
	t.Helper()
	got := entries(hook, level, msg)
	if len(got) != 1 {
		t.Fatalf("%d %s lines %q, want 1; all: %s", len(got), level, msg, dump(hook))
	}
	for k, v := range want {
		if fmt.Sprint(got[0].Data[k]) != fmt.Sprint(v) {
			t.Errorf("%q: %s = %q, want %q (line: %v)", msg, k, got[0].Data[k], v, got[0].Data)
		}
	}
}

func dump(hook *test.Hook) string {
	var b strings.Builder
	for _, e := range hook.AllEntries() {
		fmt.Fprintf(&b, "\n  %s %q %v", e.Level, e.Message, e.Data)
	}
	return b.String()
}

// TestOperatorLogLines: a creation, a pod update and a resize each log one
// info line with the pod, the container, the CPU and memory asked for and
// the cpuset before → after, and the raw NRI resources at debug.
func TestOperatorLogLines(t *testing.T) {
	p, hook, _ := loggedPlugin(t)
	ctx := context.Background()
	pod, ctr := guaranteedCtr("a", 1)
	pod.Linux.PodResources = nriResources(1024, 100000, 1)

	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	oneEntry(t, hook, logrus.InfoLevel, "container created", logrus.Fields{
		"pod": "ns/a", "container": "app", "id": "a", "cpuRequest": "1", "cpuLimit": "1", "memoryLimit": "1Gi",
		"cpuset": "1", "exclusive": true, "shared": "0-3 → 0,2-3",
	})
	oneEntry(t, hook, logrus.DebugLevel, "CreateContainer request", logrus.Fields{
		"resources": "cpu.shares=1024 cpu.quota=100000 cpu.period=100000 memory.limit=1073741824"})

	// The kubelet's first call of a growth: the new limit, the old shares.
	hook.Reset()
	if err := p.UpdatePodSandbox(ctx, pod, &api.LinuxResources{}, nriResources(1024, 200000, 1)); err != nil {
		t.Fatal(err)
	}
	oneEntry(t, hook, logrus.InfoLevel, "pod resources updated", logrus.Fields{
		"pod": "ns/a", "podUID": "uid-a", "cpuRequest": "1", "cpuLimit": "1 → 2", "memoryLimit": "1Gi",
		"operation": policy.OpIncrease, "cpusets": "app=1",
	})
	oneEntry(t, hook, logrus.DebugLevel, "UpdatePodSandbox request", logrus.Fields{
		"resources": "cpu.shares=1024 cpu.quota=200000 cpu.period=100000 memory.limit=1073741824", "overhead": "none"})

	hook.Reset()
	if _, err := p.UpdateContainer(ctx, pod, ctr, nriResources(2048, 200000, 2)); err != nil {
		t.Fatal(err)
	}
	oneEntry(t, hook, logrus.InfoLevel, "container resized", logrus.Fields{
		"pod": "ns/a", "container": "app", "cpuRequest": "2", "cpuLimit": "2", "memoryLimit": "2Gi",
		"operation": policy.OpIncrease, "cpuset": "1 → 1-2",
	})
	oneEntry(t, hook, logrus.DebugLevel, "UpdateContainer request", logrus.Fields{
		"current":   "cpu.shares=1024 cpu.quota=100000 cpu.period=100000 memory.limit=1073741824",
		"requested": "cpu.shares=2048 cpu.quota=200000 cpu.period=100000 memory.limit=2147483648"})
	if n := len(hook.AllEntries()); n != 2 {
		t.Errorf("%d lines for one resize, want the info line and the debug line: %s", n, dump(hook))
	}
}

// TestRefusalWarnedOncePerWindow: the kubelet retries a refused resize
// about once a second; the refusal is a warning (and counted in
// refusals_total) once per window, the retries are at debug and counted in
// resize_requests_total. A new request, the window's end or an accepted
// request in between make it a warning again. The pod level is the same.
func TestRefusalWarnedOncePerWindow(t *testing.T) {
	p, hook, m := loggedPlugin(t)
	now := time.Unix(1000, 0)
	p.reporter.refusals.now = func() time.Time { return now }
	ctx := context.Background()
	pod, ctr := guaranteedCtr("a", 1)
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	resize := func(n int64) error {
		_, err := p.UpdateContainer(ctx, pod, ctr, nriResources(n*1024, n*100000, 1))
		return err
	}
	refusals := func() float64 {
		return counterValue(t, m.refusals.WithLabelValues(string(policy.ReasonResizeAllocateCPUs), string(policy.Infeasible)))
	}
	const warned, again = "UpdateContainer refused", "UpdateContainer refused again (the kubelet retries; warned about once every 5m0s)"
	for _, step := range []struct {
		what          string
		advance       time.Duration
		cpus          int64
		accepted      bool
		warn, debug   int     // lines so far
		refusalsTotal float64 // so far
	}{
		{what: "first refusal", cpus: 4, warn: 1, refusalsTotal: 1},
		{what: "a retry", advance: time.Second, cpus: 4, warn: 1, debug: 1, refusalsTotal: 1},
		{what: "another retry", advance: time.Second, cpus: 4, warn: 1, debug: 2, refusalsTotal: 1},
		{what: "a new request", advance: time.Second, cpus: 5, warn: 2, debug: 2, refusalsTotal: 2},
		{what: "the first again, the window not over", advance: 4 * time.Minute, cpus: 4, warn: 2, debug: 3, refusalsTotal: 2},
		{what: "the window over", advance: time.Minute, cpus: 4, warn: 3, debug: 3, refusalsTotal: 3},
		{what: "an accepted request", advance: time.Second, cpus: 1, accepted: true, warn: 3, debug: 3, refusalsTotal: 3},
		{what: "the refusal after it", advance: time.Second, cpus: 4, warn: 4, debug: 3, refusalsTotal: 4},
	} {
		now = now.Add(step.advance)
		err := resize(step.cpus)
		if (err == nil) != step.accepted {
			t.Fatalf("%s: %v", step.what, err)
		}
		if got := len(entries(hook, logrus.WarnLevel, warned)); got != step.warn {
			t.Errorf("%s: %d warnings, want %d: %s", step.what, got, step.warn, dump(hook))
		}
		if got := len(entries(hook, logrus.DebugLevel, again)); got != step.debug {
			t.Errorf("%s: %d debug lines, want %d", step.what, got, step.debug)
		}
		if got := refusals(); got != step.refusalsTotal {
			t.Errorf("%s: refusals_total %v, want %v", step.what, got, step.refusalsTotal)
		}
	}
	if got := counterValue(t, m.resizes.WithLabelValues(string(policy.OpIncrease), outcomeInfeasible)); got != 7 {
		t.Errorf("resize_requests_total{increase, infeasible} = %v, want every refused request (7)", got)
	}
	w := entries(hook, logrus.WarnLevel, warned)[0]
	if w.Data["reason"] != policy.ReasonResizeAllocateCPUs || w.Data["verdict"] != policy.Infeasible || w.Data["pod"] != "ns/a" ||
		!strings.HasPrefix(fmt.Sprint(w.Data[logrus.ErrorKey]), "Infeasible: resizeAllocateCPUsError: cannot grow container ns/a/app from 1 to 4") {
		t.Errorf("warning %v", w.Data)
	}

	// The pod level: the same refusal twice, one warning.
	hook.Reset()
	for i := 0; i < 2; i++ {
		err := p.UpdatePodSandbox(ctx, pod, nil, nriResources(1024, 400000, 1))
		if err == nil || !strings.HasPrefix(err.Error(), "Infeasible: resizeAllocateCPUsError: cannot grow container ns/a/app from 1 to 4") {
			t.Fatalf("pod update %d: %v", i, err)
		}
	}
	if w, d := len(entries(hook, logrus.WarnLevel, "UpdatePodSandbox refused")), len(entries(hook, logrus.DebugLevel,
		"UpdatePodSandbox refused again (the kubelet retries; warned about once every 5m0s)")); w != 1 || d != 1 {
		t.Errorf("pod update refused twice: %d warnings, %d debug lines: %s", w, d, dump(hook))
	}
	if got := counterValue(t, m.podUpdates.WithLabelValues(outcomeInfeasible)); got != 2 {
		t.Errorf("pod_resource_updates_total{infeasible} = %v, want 2", got)
	}
}

// TestPodRefusalChangesNothing: a refused UpdatePodSandbox leaves the
// checkpoint's pod resources as they were; an accepted one is on disk.
func TestPodRefusalChangesNothing(t *testing.T) {
	p, store := newTestPlugin(t)
	ctx := context.Background()
	if _, err := p.Synchronize(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	pod, ctr := guaranteedCtr("a", 2)
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	accepted := nriResources(2048, 200000, 2) // memory only
	if err := p.UpdatePodSandbox(ctx, pod, nil, accepted); err != nil {
		t.Fatal(err)
	}
	err := p.UpdatePodSandbox(ctx, pod, nil, nriResources(4096, 400000, 2))
	if err == nil || !strings.HasPrefix(err.Error(), "Infeasible: resizeAllocateCPUsError") {
		t.Fatalf("growth to 4 of 3 allocatable CPUs: %v", err)
	}
	st, err := state.Inspect(filepath.Dir(store.Path()), cpuset.New(0, 1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	want := policy.PodResources{Resources: boundedResources(accepted, nil), Overhead: policy.Resources{}}
	if got, ok := st.PodResources("uid-a"); !ok || got != (state.PodRecord{Resources: state.ResourceRecord(want.Resources), Overhead: state.ResourceRecord(want.Overhead)}) {
		t.Errorf("checkpoint pod resources %+v (present %v), want the accepted %+v", got, ok, want)
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestRefusalMemory: a refusal is news once per refusalWindow per distinct
// request of a container, a different request of it is news at once, an
// accepted request or the pod's removal makes the next refusal news
// again; the memory holds at most maxRefused containers (the one refused
// least recently goes) and maxWarned distinct refusals of each.
func TestRefusalMemory(t *testing.T) {
	now := time.Unix(0, 0)
	m := newRefusalMemory(func() time.Time { return now })
	pod := func(i int) policy.Pod {
		return policy.Pod{UID: fmt.Sprint(i), Namespace: "ns", Name: fmt.Sprint("p", i)}
	}
	grow := refusalKey{event: "UpdateContainer", reason: policy.ReasonResizeAllocateCPUs, verdict: policy.Deferred,
		requested: policy.PodResources{Resources: policy.Resources{CPUQuota: 400000, CPUPeriod: 100000}}}
	bigger := grow
	bigger.requested.Resources.CPUQuota = 800000

	steps := []struct {
		name string
		do   func() bool
		want bool
	}{
		{"first refusal", func() bool { return m.refused(pod(1), "app", grow) }, true},
		{"the kubelet's retry", func() bool { return m.refused(pod(1), "app", grow) }, false},
		{"another request of the container", func() bool { return m.refused(pod(1), "app", bigger) }, true},
		{"the same request of another container", func() bool { return m.refused(pod(1), "sidecar", grow) }, true},
		{"the first request again, within the window", func() bool { return m.refused(pod(1), "app", grow) }, false},
		{"after the window", func() bool { now = now.Add(refusalWindow); return m.refused(pod(1), "app", grow) }, true},
		{"after an accepted request", func() bool { m.accepted("1", "app"); return m.refused(pod(1), "app", grow) }, true},
		{"after the pod's removal", func() bool { m.podRemoved("1"); return m.refused(pod(1), "app", grow) }, true},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Errorf("%s: news %v, want %v", s.name, got, s.want)
		}
	}

	for i := range maxWarned + 1 {
		k := grow
		k.requested.Resources.CPUQuota = int64(i+10) * 100000
		now = now.Add(time.Millisecond)
		m.refused(pod(1), "app", k)
	}
	if n := len(m.entries[refusedKey{"1", "app"}].warned); n != maxWarned {
		t.Errorf("%d distinct refusals remembered for one container, want %d", n, maxWarned)
	}

	for i := 2; i < maxRefused+2; i++ {
		now = now.Add(time.Millisecond)
		m.refused(pod(i), "app", grow)
	}
	if len(m.entries) != maxRefused {
		t.Fatalf("%d containers remembered, want %d", len(m.entries), maxRefused)
	}
	if _, ok := m.entries[refusedKey{"1", "sidecar"}]; ok {
		t.Error("the container refused least recently was kept")
	}
	if m.refused(pod(maxRefused), "app", grow) {
		t.Error("a refusal in its window was news again in a full memory")
	}
}
