package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestAlertsWithPromtool runs the alerts of components/prometheus through
// Prometheus's own rule tester, promtool test rules ($PROMTOOL, which make
// deploy-test sets to Debian's, hack/debian-promtool; else the one pinned in
// hack/tools/promtool): testdata/alerts.test.yaml feeds each alert
// the series of its failure, of a plugin restarted in a new pod, and of a
// healthy node, and says when it fires and with what text. The chart's
// rules are the same (TestChartMonitoringMatchesKustomize).
func TestAlertsWithPromtool(t *testing.T) {
	rule := only(t, "PrometheusRule", kustomizeOverlay(t, components.prometheus).prometheusRules)
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"rules.yaml": rules, "alerts.test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if version, err := tool(t, "promtool", "--version"); err == nil {
		t.Logf("%s", bytes.SplitN(version, []byte("\n"), 2)[0])
	}
	out, err := tool(t, "promtool", "test", "rules", filepath.Join(dir, "alerts.test.yaml"))
	t.Logf("promtool test rules:\n%s", out)
	if err != nil {
		t.Errorf("promtool test rules failed: %v\nthe rules:\n%s", err, rules)
	}
}

// tool runs a tool pinned in hack/tools/NAME/go.mod (built from the Go module
// proxy the first time, then cached), or for promtool the binary $PROMTOOL
// names when it is set, and returns its output.
func tool(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	if path := os.Getenv("PROMTOOL"); name == "promtool" && path != "" {
		return exec.Command(path, args...).CombinedOutput()
	}
	modfile, err := filepath.Abs(filepath.Join("..", "..", "hack", "tools", name, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"tool", "-modfile=" + modfile, name}, args...)...)
	if name == "promtool" {
		// As the Makefile builds it (PROMTOOL_FLAGS): without Prometheus's
		// service discoveries, which testing rules does not use.
		cmd.Env = append(os.Environ(), "GOFLAGS=-tags=remove_all_sd")
	}
	return cmd.CombinedOutput()
}
