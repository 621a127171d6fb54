package integration

import (
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// metricValue returns the value of a counter, gauge or histogram count with
// the given labels (0 when absent).
func metricValue(t testing.TB, rp *runningPlugin, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := rp.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// histogram returns the sample count and sum of a histogram.
func histogram(t testing.TB, rp *runningPlugin, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	families, err := rp.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && hasLabels(m, labels) && m.Histogram != nil {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestMetricsAfterScenario runs the refusals scenario through NRI and
// checks the metrics it must have left.
func TestMetricsAfterScenario(t *testing.T) {
	f, err := scenario.Load(filepath.Join("..", "scenarios", "refusals.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := assemble.ScenarioPolicy(f, f.Topology, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := newNRIDriver(t, pol)
	if err := scenario.NewRunner(d).Run(f); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		// refusals.yaml resizes gu/c1 six times: four refusals (below the
		// original, SMT alignment, fractional, a growth that never fits),
		// one growth to 6 and one shrink to 4; its creations refuse an
		// odd count, a too large container and one that must wait.
		{"nri_cpumanager_resize_requests_total", map[string]string{"operation": "increase", "outcome": "applied"}, 1},
		{"nri_cpumanager_resize_requests_total", map[string]string{"operation": "decrease", "outcome": "applied"}, 1},
		{"nri_cpumanager_resize_requests_total", map[string]string{"operation": "decrease", "outcome": "infeasible"}, 2},
		{"nri_cpumanager_resize_requests_total", map[string]string{"operation": "increase", "outcome": "infeasible"}, 2},
		{"nri_cpumanager_refusals_total", map[string]string{"reason": "prohibitedCPUAllocationError", "verdict": "Infeasible"}, 1},
		{"nri_cpumanager_refusals_total", map[string]string{"reason": "SMTAlignmentError", "verdict": "Infeasible"}, 2},
		{"nri_cpumanager_refusals_total", map[string]string{"reason": "inconsistentCPUAllocationError", "verdict": "Infeasible"}, 1},
		{"nri_cpumanager_refusals_total", map[string]string{"reason": "TopologyAffinityError", "verdict": "Infeasible"}, 1},
		{"nri_cpumanager_refusals_total", map[string]string{"reason": "resizeAllocateCPUsError", "verdict": "Infeasible"}, 1},
		{"nri_cpumanager_refusals_total", map[string]string{"reason": "TopologyAffinityError", "verdict": "Deferred"}, 1},
		{"nri_cpumanager_exclusive_cpus", nil, 12},
		{"nri_cpumanager_exclusive_containers", nil, 2},
		{"nri_cpumanager_shared_cpus", nil, 4},
		{"nri_cpumanager_event_duration_seconds", map[string]string{"event": "UpdateContainer"}, 6},
		{"nri_cpumanager_ready", nil, 1},
	} {
		if got := metricValue(t, d.rp, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if metricValue(t, d.rp, "nri_cpumanager_checkpoint_writes_total", map[string]string{"result": "ok"}) == 0 {
		t.Errorf("no checkpoint write counted")
	}
	// The fixture machine has 2 NUMA nodes of 8 CPUs: the per-node gauges
	// add up to the exclusive CPUs.
	perNode := metricValue(t, d.rp, "nri_cpumanager_numa_node_exclusive_cpus", map[string]string{"numa_node": "0"}) +
		metricValue(t, d.rp, "nri_cpumanager_numa_node_exclusive_cpus", map[string]string{"numa_node": "1"})
	if perNode != 12 {
		t.Errorf("nri_cpumanager_numa_node_exclusive_cpus adds up to %v over nodes 0 and 1, want 12", perNode)
	}
	if got := metricValue(t, d.rp, "nri_cpumanager_build_info", map[string]string{"version": "test", "revision": "test"}); got != 1 {
		t.Errorf("nri_cpumanager_build_info = %v, want 1", got)
	}
	// The refused creations that never succeeded are still refused; gu's
	// resizes succeeded after their refusals.
	for _, c := range []struct {
		pod  string
		want float64
	}{{"odd", 1}, {"huge", 1}, {"late", 1}, {"gu", 0}} {
		n := metricCount(t, d.rp, "nri_cpumanager_refused_since_seconds", map[string]string{"pod_name": c.pod})
		if n != c.want {
			t.Errorf("refused_since_seconds series of pod %s: %v, want %v", c.pod, n, c.want)
		}
	}
	checkNoEmptyLabels(t, d.rp)
}

// checkNoEmptyLabels fails on any series of the plugin's with an empty
// label value.
// metricCount counts the series of metric name whose labels include
// labels.
func metricCount(t *testing.T, rp *runningPlugin, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := rp.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				n++
			}
		}
	}
	return n
}

func checkNoEmptyLabels(t *testing.T, rp *runningPlugin) {
	t.Helper()
	families, err := rp.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "" {
					t.Errorf("%s has an empty value for label %q", f.GetName(), l.GetName())
				}
			}
		}
	}
}
