package deploy

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// mappingDoc is the page that maps the kubelet's CPU manager metrics to
// the plugin's.
var mappingDoc = filepath.Join("..", "..", "docs", "metrics-mapping.md")

// kubeletMetrics returns the names of the metrics the kubelet of the
// suites defines (test/kubernetes's k8s.io/kubernetes, read from its
// source: pkg/kubelet/metrics/metrics.go), each with the kubelet_ prefix
// its subsystem gives. The module is the one make placement-diff and the
// real-cluster suites build the kubelet from, so it is in the module
// cache already when make test gets here; go mod download fetches it
// otherwise.
func kubeletMetrics(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join("..", "kubernetes")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download k8s.io/kubernetes in test/kubernetes: %v\n%s", err, out)
	}
	var mod struct{ Path, Version, Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download -json k8s.io/kubernetes: %v\n%s", err, out)
	}
	src, err := os.ReadFile(filepath.Join(mod.Dir, "pkg", "kubelet", "metrics", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	// The names are constants (FooKey = "foo") or literals (Name: "foo"),
	// all under the subsystem KubeletSubsystem = "kubelet".
	if !regexp.MustCompile(`KubeletSubsystem\s*=\s*"kubelet"`).Match(src) {
		t.Fatalf("%s %s: no KubeletSubsystem = \"kubelet\" in pkg/kubelet/metrics/metrics.go", mod.Path, mod.Version)
	}
	names := map[string]bool{}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\s*\w+Key\s*=\s*"([a-z0-9_]+)"`),
		regexp.MustCompile(`Name:\s*"([a-z0-9_]+)"`),
	} {
		for _, m := range re.FindAllSubmatch(src, -1) {
			names["kubelet_"+string(m[1])] = true
		}
	}
	if !names["kubelet_cpu_manager_pinning_requests_total"] {
		t.Fatalf("%s %s: kubelet_cpu_manager_pinning_requests_total not found among %d names", mod.Path, mod.Version, len(names))
	}
	return names
}

// isKubeletMetric reports whether name is one of the kubelet's metrics,
// or a series of one of its histograms.
func isKubeletMetric(kubelet map[string]bool, name string) bool {
	if kubelet[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && kubelet[base] {
			return true
		}
	}
	return false
}

// TestMetricsMappingNamesRealMetrics checks docs/metrics-mapping.md:
// every plugin metric it names is one the plugin exports, every kubelet
// metric one the kubelet defines, every kubelet_cpu_manager_* metric has
// its row, and every PromQL query parses, selects only such series, the
// plugin's by its job and by labels they have.
func TestMetricsMappingNamesRealMetrics(t *testing.T) {
	data, err := os.ReadFile(mappingDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	exported := exportedMetrics(t)
	kubelet := kubeletMetrics(t)

	// Every name in the text, tables and queries alike.
	for _, name := range regexp.MustCompile(`\bnri_cpumanager_[a-z0-9_]+`).FindAllString(doc, -1) {
		if _, ok := lookup(exported, name); !ok {
			t.Errorf("%s names %s, which the plugin does not export", mappingDoc, name)
		}
	}
	for _, name := range regexp.MustCompile(`\bkubelet_[a-z0-9_]+\*?`).FindAllString(doc, -1) {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			// A family: kubelet_cpu_manager_*.
			if !slices.ContainsFunc(slices.Collect(maps.Keys(kubelet)), func(n string) bool { return strings.HasPrefix(n, prefix) }) {
				t.Errorf("%s names %s, but no metric of the kubelet starts with %s", mappingDoc, name, prefix)
			}
			continue
		}
		if !isKubeletMetric(kubelet, name) {
			t.Errorf("%s names %s, which the kubelet does not define", mappingDoc, name)
		}
	}
	// Each of the kubelet's CPU manager metrics has a row of its own.
	rows := 0
	for name := range kubelet {
		if !strings.HasPrefix(name, "kubelet_cpu_manager_") {
			continue
		}
		rows++
		if !regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` ").MatchString(doc) {
			t.Errorf("%s has no row for the kubelet's %s", mappingDoc, name)
		}
	}
	if rows < 5 {
		t.Errorf("the kubelet defines %d kubelet_cpu_manager_* metrics, want the 5 of v1.36 at least", rows)
	}

	queries := regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(doc, -1)
	if len(queries) < 5 {
		t.Fatalf("%s shows %d PromQL queries, want the examples of porting a panel", mappingDoc, len(queries))
	}
	for _, q := range queries {
		checkMappingQuery(t, strings.TrimSpace(q[1]), exported, kubelet)
	}
}

// checkMappingQuery checks one query of the mapping page: it parses; a
// plugin series is exported, has the labels matched on and is selected
// by job; a kubelet series is the kubelet's.
func checkMappingQuery(t *testing.T, expr string, exported map[string]metric, kubelet map[string]bool) {
	t.Helper()
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", mappingDoc, expr, err)
		return
	}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		switch {
		case strings.HasPrefix(vs.Name, "kubelet_"):
			if !isKubeletMetric(kubelet, vs.Name) {
				t.Errorf("%s: %q selects %s, which the kubelet does not define", mappingDoc, expr, vs.Name)
			}
		case strings.HasPrefix(vs.Name, "nri_cpumanager_"):
			m, ok := lookup(exported, vs.Name)
			if !ok {
				t.Errorf("%s: %q selects %s, which the plugin does not export", mappingDoc, expr, vs.Name)
				return nil
			}
			job := false
			for _, lm := range vs.LabelMatchers {
				if lm.Name == "__name__" {
					continue
				}
				job = job || lm.Name == "job" && lm.Type == labels.MatchEqual && lm.Value != ""
				if !m.labels[lm.Name] && !targetLabels[lm.Name] {
					t.Errorf("%s: %q matches label %q, which %s does not have", mappingDoc, expr, lm.Name, vs.Name)
				}
			}
			if !job {
				t.Errorf("%s: %q selects %s without job=", mappingDoc, expr, vs.Name)
			}
		default:
			t.Errorf("%s: %q selects %s, neither the kubelet's nor the plugin's", mappingDoc, expr, vs.Name)
		}
		return nil
	})
}
