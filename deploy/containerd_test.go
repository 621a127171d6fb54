package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// TestFailClosedOptInNamesThePlugin checks the commented fail-closed block
// of containerd-nri.toml: uncommented, it requires the name the plugin
// registers with (the pluginName the ConfigMap leaves at its default) and
// names a toleration annotation.
func TestFailClosedOptInNamesThePlugin(t *testing.T) {
	data, err := os.ReadFile("containerd-nri.toml")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		switch {
		case l == "[plugins.'io.containerd.nri.v1.nri'.default_validator]":
			in = true
		case in && (l == "" || strings.HasPrefix(l, "[")):
			in = false
		case in:
			block = append(block, l)
		}
	}
	text := strings.Join(block, "\n")
	cm := load(t, "configmap.yaml")
	cfg, err := config.Parse([]byte(dig(t, cm, "data", "config.yaml").(string)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"enable = true",
		`required_plugins = ["` + cfg.PluginName + `"]`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the fail-closed block lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`(?m)^tolerate_missing_plugins_annotation = "[a-z0-9.-]+"$`).MatchString(text) {
		t.Errorf("the fail-closed block names no toleration annotation:\n%s", text)
	}
	if !strings.Contains(string(data), "\n# [plugins.'io.containerd.nri.v1.nri'.default_validator]") {
		t.Error("the fail-closed block must stay commented out: it is an opt-in")
	}
}
