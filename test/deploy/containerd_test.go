package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailClosedOptIn checks the commented fail-closed block of
// deploy/containerd-nri.toml against what deploy/ runs: uncommented, it
// requires the name the plugin registers with (pluginName) and names the
// annotation the DaemonSet's pod carries, so that the plugin's own pod is
// created while the plugin is away. It must stay commented: an opt-in.
func TestFailClosedOptIn(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "containerd-nri.toml"))
	if err != nil {
		t.Fatal(err)
	}
	const header = "[plugins.'io.containerd.nri.v1.nri'.default_validator]"
	var block []string
	in, commented := false, false
	for _, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		switch {
		case l == header:
			in, commented = true, strings.HasPrefix(line, "#")
		case in && (l == "" || strings.HasPrefix(l, "[")):
			in = false
		case in:
			block = append(block, l)
		}
	}
	if len(block) == 0 {
		t.Fatalf("containerd-nri.toml has no %s block", header)
	}
	if !commented {
		t.Error("the fail-closed block is not commented out: it must stay an opt-in")
	}
	p := pluginOf(t, kustomize(t, deployDir))
	text := strings.Join(block, "\n")
	for _, want := range []string{
		"enable = true",
		`required_plugins = ["` + p.cfg.PluginName + `"]`,
		`tolerate_missing_plugins_annotation = "` + tolerateMissing + `"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the fail-closed block lacks %q:\n%s", want, text)
		}
	}
	if p.ds.Spec.Template.Annotations[tolerateMissing] != "true" {
		t.Errorf("the DaemonSet's pod does not carry %s: \"true\"", tolerateMissing)
	}
}
