package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
)

// metric is what the plugin exports under one name.
type metric struct {
	labels map[string]bool
	// histogram: the name also has _bucket, _sum and _count series.
	histogram bool
}

// targetLabels are the labels Prometheus adds to every series it scrapes
// through the ServiceMonitor (node from its relabeling).
var targetLabels = map[string]bool{
	"job": true, "instance": true, "namespace": true, "pod": true, "service": true,
	"endpoint": true, "container": true, "node": true,
}

// prometheusSeries are series Prometheus itself makes for every target,
// and those of kube-state-metrics the alerts read (its DaemonSet metrics
// carry the DaemonSet's namespace and name).
var prometheusSeries = map[string]metric{
	"up": {labels: map[string]bool{}},
	"kube_daemonset_status_desired_number_scheduled": {labels: map[string]bool{"namespace": true, "daemonset": true}},
}

// checkFiltered checks that every series expr selects is filtered to the
// plugin's scrape job (another job scraping the same pods, through their
// prometheus.io annotations say, would count them twice), or for
// kube-state-metrics's series, to the plugin's DaemonSet.
func checkFiltered(t *testing.T, where, expr string) {
	t.Helper()
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return // checkQuery reports it
	}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		matched := map[string]bool{}
		for _, lm := range vs.LabelMatchers {
			if lm.Type == labels.MatchEqual && lm.Value != "" {
				matched[lm.Name] = true
			}
		}
		if strings.HasPrefix(vs.Name, "kube_") {
			if !matched["namespace"] || !matched["daemonset"] {
				t.Errorf("%s: %q selects %s without namespace= and daemonset=", where, expr, vs.Name)
			}
		} else if !matched["job"] {
			t.Errorf("%s: %q selects %s without job=", where, expr, vs.Name)
		}
		return nil
	})
}

// capture records the collectors registered through it, and registers
// them with a real registry too (which checks them).
type capture struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (c *capture) Register(col prometheus.Collector) error {
	c.collectors = append(c.collectors, col)
	return c.reg.Register(col)
}

func (c *capture) MustRegister(cols ...prometheus.Collector) {
	for _, col := range cols {
		if err := c.Register(col); err != nil {
			panic(err)
		}
	}
}

func (c *capture) Unregister(col prometheus.Collector) bool { return c.reg.Unregister(col) }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descConst  = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// exportedMetrics are the metrics the plugin's command serves: the
// plugin's own (plugin.NewMetrics) and, as the run command registers them
// beside, the Go runtime's and the process's. Names and label names come
// from the collectors' descriptions, so a metric with no sample yet (a
// vector before its first event) counts too.
func exportedMetrics(t *testing.T) map[string]metric {
	t.Helper()
	c := &capture{reg: prometheus.NewPedanticRegistry()}
	if _, err := plugin.NewMetrics(c, plugin.BuildInfo{Version: "v0.0.0-test", Revision: "test", GoVersion: "go"}); err != nil {
		t.Fatalf("plugin.NewMetrics: %v", err)
	}
	if err := kubeapi.RegisterMetrics(c, true); err != nil {
		t.Fatalf("kubeapi.RegisterMetrics: %v", err)
	}
	c.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	out := map[string]metric{}
	for _, col := range c.collectors {
		histogram := false
		switch col.(type) {
		case prometheus.Histogram, *prometheus.HistogramVec, prometheus.Summary, *prometheus.SummaryVec:
			histogram = true
		}
		descs := make(chan *prometheus.Desc)
		go func() {
			col.Describe(descs)
			close(descs)
		}()
		for d := range descs {
			s := d.String()
			name := descName.FindStringSubmatch(s)
			if name == nil {
				t.Fatalf("cannot read the name of %s", s)
			}
			m := metric{labels: map[string]bool{}, histogram: histogram}
			for _, re := range []*regexp.Regexp{descConst, descLabels} {
				if l := re.FindStringSubmatch(s); l != nil && l[1] != "" {
					for _, part := range strings.Split(l[1], ",") {
						part, _, _ = strings.Cut(part, "=")
						part = strings.TrimSuffix(strings.TrimPrefix(part, "c("), ")")
						m.labels[part] = true
					}
				}
			}
			out[name[1]] = m
		}
	}
	if _, ok := out["nri_cpumanager_ready"]; !ok {
		t.Fatalf("the plugin's registry has no nri_cpumanager_ready: %v", sortedKeys(out))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// lookup finds the metric a series name belongs to.
func lookup(exported map[string]metric, name string) (metric, bool) {
	if m, ok := exported[name]; ok {
		return m, true
	}
	if m, ok := prometheusSeries[name]; ok {
		return m, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if m, ok := exported[base]; ok && m.histogram {
				if suffix == "_bucket" {
					m.labels = withLabel(m.labels, "le")
				}
				return m, true
			}
		}
	}
	return metric{}, false
}

func withLabel(set map[string]bool, l string) map[string]bool {
	out := map[string]bool{l: true}
	for k := range set {
		out[k] = true
	}
	return out
}

// checkQuery parses a PromQL expression and checks every series it selects
// is exported, with label matchers on labels the series has. It returns
// the metric names used.
func checkQuery(t *testing.T, where, expr string, exported map[string]metric) []string {
	t.Helper()
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, lm := range vs.LabelMatchers {
			if lm.Name == model.MetricNameLabel && lm.Type == labels.MatchEqual {
				name = lm.Value
			}
		}
		m, ok := lookup(exported, name)
		if !ok {
			t.Errorf("%s: %q queries %q, which the plugin does not export", where, expr, name)
			return nil
		}
		names = append(names, name)
		for _, lm := range vs.LabelMatchers {
			if lm.Name != model.MetricNameLabel && !m.labels[lm.Name] && !targetLabels[lm.Name] {
				t.Errorf("%s: %q matches label %q, which %s does not have", where, expr, lm.Name, name)
			}
		}
		return nil
	})
	return names
}

func TestAlertsQueryExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	rule := only(t, "PrometheusRule", kustomizeOverlay(t, components.prometheus).prometheusRules)
	used := map[string]bool{}
	alerts := map[string]bool{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if r.Alert == "" || r.Record != "" {
				t.Errorf("group %s: a rule that is not an alert (%q)", g.Name, r.Record)
				continue
			}
			if alerts[r.Alert] {
				t.Errorf("alert %s twice", r.Alert)
			}
			alerts[r.Alert] = true
			for _, n := range checkQuery(t, where, r.Expr.String(), exported) {
				used[n] = true
			}
			checkFiltered(t, where, r.Expr.String())
			if r.For != nil {
				if _, err := model.ParseDuration(string(*r.For)); err != nil {
					t.Errorf("%s: for %q: %v", where, *r.For, err)
				}
			}
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("%s: severity %q, want critical, warning or info", where, r.Labels["severity"])
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s has no %s", where, a)
				}
			}
		}
	}
	// The alerts an operator needs first: not ready, no plugin at all,
	// checkpoint write errors, real drift, pods refused, a configuration
	// the plugin refused.
	for _, name := range []string{
		"nri_cpumanager_ready", "kube_daemonset_status_desired_number_scheduled", "nri_cpumanager_checkpoint_writes_total",
		"nri_cpumanager_cpuset_drift_total", "nri_cpumanager_refused_since_seconds", "nri_cpumanager_config_rejected",
	} {
		if !used[name] {
			t.Errorf("no alert queries %s", name)
		}
	}
}

// grafanaVariable is $name or ${name} in a Grafana query.
var grafanaVariable = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// promQLOf replaces Grafana's variables by values PromQL accepts.
func promQLOf(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}")
		if strings.HasPrefix(name, "__") { // $__rate_interval, $__interval, $__range
			return "5m"
		}
		return "x"
	})
}

// dashPanel is the part of a Grafana panel the test reads.
type dashPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

func TestDashboardQueriesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	data, err := os.ReadFile(filepath.Join(deployDir, "grafana", "nri-cpumanager.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string      `json:"uid"`
		Title      string      `json:"title"`
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("dashboard uid %q, title %q", dash.UID, dash.Title)
	}
	variables := map[string]bool{}
	labelValues := regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)
	for _, v := range dash.Templating.List {
		variables[v.Name] = true
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		lv := labelValues.FindStringSubmatch(q)
		if lv == nil {
			checkQuery(t, "variable "+v.Name, promQLOf(q), exported)
			checkFiltered(t, "variable "+v.Name, promQLOf(q))
			continue
		}
		checkQuery(t, "variable "+v.Name, promQLOf(lv[1]), exported)
		if lv[2] != "job" { // the job variable itself lists the jobs
			checkFiltered(t, "variable "+v.Name, promQLOf(lv[1]))
		}
		if !targetLabels[lv[2]] {
			t.Errorf("variable %s: label_values of %q, not a label Prometheus gives the plugin's series", v.Name, lv[2])
		}
	}
	if !variables["datasource"] || !variables["job"] {
		t.Error("the dashboard has no datasource or no job variable")
	}
	ids := map[int]bool{}
	queried := 0
	var walk func([]dashPanel)
	walk = func(panels []dashPanel) {
		for _, p := range panels {
			if ids[p.ID] {
				t.Errorf("panel id %d twice", p.ID)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			where := "panel " + p.Title
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: datasource %+v, want the ${datasource} variable", where, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s has no query", where)
			}
			for _, tg := range p.Targets {
				for _, m := range grafanaVariable.FindAllStringSubmatch(tg.Expr, -1) {
					if !strings.HasPrefix(m[1], "__") && !variables[m[1]] {
						t.Errorf("%s: %q uses undefined variable $%s", where, tg.Expr, m[1])
					}
				}
				checkQuery(t, where, promQLOf(tg.Expr), exported)
				checkFiltered(t, where, promQLOf(tg.Expr))
				queried++
			}
		}
	}
	walk(dash.Panels)
	if queried == 0 {
		t.Error("the dashboard queries nothing")
	}
}
