package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// runbookBase is where every alert's runbook_url points: a section of
// docs/troubleshooting.md as GitHub shows it. The release workflow's chart
// points at the docs of its tag instead (hack/release-artifacts).
const runbookBase = "https://github.com/nri-cpumanager/nri-cpumanager/blob/main/docs/troubleshooting.md#"

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown document: lower case, punctuation but '-' and '_' dropped,
// spaces made '-', a repeated anchor suffixed -1, -2, …; fenced code is
// skipped.
func headingAnchors(doc []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		if hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
			continue
		}
		text := strings.TrimSpace(strings.Trim(strings.TrimSpace(line[hashes:]), "#"))
		text = strings.NewReplacer("`", "", "*", "").Replace(text)
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		anchor := slug
		if n := seen[slug]; n > 0 {
			anchor = fmt.Sprintf("%s-%d", slug, n)
		}
		seen[slug]++
		anchors[anchor] = true
	}
	return anchors
}

func TestHeadingAnchors(t *testing.T) {
	doc := "# Troubleshooting\n## Where a refusal shows\n### `NRICPUManagerNotReady`\n" +
		"```\n## not a heading\n```\n## A pod's CPUs: late?\n## Where a refusal shows\n#hashtag\n"
	got := headingAnchors([]byte(doc))
	for _, want := range []string{"troubleshooting", "where-a-refusal-shows", "nricpumanagernotready", "a-pods-cpus-late", "where-a-refusal-shows-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	for _, not := range []string{"not-a-heading", "hashtag"} {
		if got[not] {
			t.Errorf("anchor %q, which is no heading", not)
		}
	}
}

// TestAlertRunbooks checks that every alert, of components/prometheus and
// of the chart, carries a runbook_url into docs/troubleshooting.md whose
// anchor is a heading there: the section named after the alert.
func TestAlertRunbooks(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(doc)
	rules := map[string]*monitoringv1.PrometheusRule{
		"components/prometheus": only(t, "PrometheusRule", kustomizeOverlay(t, components.prometheus).prometheusRules),
		"the chart": only(t, "PrometheusRule", chart(t, map[string]any{
			"prometheusRule": map[string]any{"enabled": true},
		}).prometheusRules),
	}
	for where, rule := range rules {
		n := 0
		for _, g := range rule.Spec.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				n++
				url := r.Annotations["runbook_url"]
				anchor, ok := strings.CutPrefix(url, runbookBase)
				switch {
				case !ok:
					t.Errorf("%s: alert %s: runbook_url %q, want %s<anchor>", where, r.Alert, url, runbookBase)
				case anchor != strings.ToLower(r.Alert):
					t.Errorf("%s: alert %s: runbook anchor %q, want the section named after it, %q", where, r.Alert, anchor, strings.ToLower(r.Alert))
				case !anchors[anchor]:
					t.Errorf("%s: alert %s: docs/troubleshooting.md has no heading with anchor #%s", where, r.Alert, anchor)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s has no alert", where)
		}
	}
}

// TestEveryAlertHasAPromtoolTest checks that testdata/alerts.test.yaml,
// which TestAlertsWithPromtool runs, makes every alert fire at least once
// (with its labels and annotations, runbook_url included) and holds it
// quiet at least once.
func TestEveryAlertHasAPromtoolTest(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []struct {
					ExpAnnotations map[string]string `json:"exp_annotations"`
				} `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) == 0 {
				quiet[a.Alertname] = true
				continue
			}
			fires[a.Alertname] = true
			for _, e := range a.ExpAlerts {
				if e.ExpAnnotations["runbook_url"] == "" {
					t.Errorf("a test of %s expects no runbook_url", a.Alertname)
				}
			}
		}
	}
	rule := only(t, "PrometheusRule", kustomizeOverlay(t, components.prometheus).prometheusRules)
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] {
				t.Errorf("testdata/alerts.test.yaml never makes %s fire", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("testdata/alerts.test.yaml never checks that %s stays quiet", r.Alert)
			}
		}
	}
}
