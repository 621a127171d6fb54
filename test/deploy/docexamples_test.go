package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// TestDocumentedConfigFiles: every plugin configuration file the docs show
// (a YAML block all of whose keys are configuration keys, a fragment or a
// whole typed file) is valid, a whole file draws no warning, and
// changes no key it does not name (a count set beside the default list,
// say), so that it keeps every other choice deploy/ ships. That deploy/
// ships the plugin's defaults is TestKustomizeBaseIsSafeAndShipsTheDefaults'
// to check (shippedDefaults).
func TestDocumentedConfigFiles(t *testing.T) {
	known := map[string]bool{}
	for _, k := range config.Keys() {
		known[k.Name] = true
	}
	found := 0
	for _, doc := range []string{"README.md", "docs/install.md", "docs/operations.md", "docs/troubleshooting.md", "docs/design.md"} {
		data, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
			var top map[string]any
			if err := yaml.Unmarshal([]byte(block[1]), &top); err != nil || len(top) == 0 {
				continue
			}
			isConfig := true
			for k, v := range top {
				isConfig = isConfig && (known[k] || typeFields[k] && (v == config.APIVersion || v == config.Kind))
			}
			if !isConfig {
				continue
			}
			found++
			cfg, warnings, err := config.ParseWithWarnings([]byte(block[1]))
			if err != nil {
				t.Errorf("%s: a configuration file the docs show is invalid: %v\n%s", doc, err, block[1])
				continue
			}
			if len(warnings) > 0 && top["apiVersion"] != nil {
				t.Errorf("%s: a configuration file the docs show draws warnings %q:\n%s", doc, warnings, block[1])
			}
			// Every key the block does not name is what deploy/ ships.
			ch := config.Diff(shippedDefaults(), cfg)
			for _, k := range append(append(ch.Live, ch.WithoutExclusive...), ch.Restart...) {
				if _, named := top[k]; !named {
					t.Errorf("%s: the configuration file changes %s without naming it:\n%s", doc, k, block[1])
				}
			}
		}
	}
	if found < 2 {
		t.Fatalf("%d configuration files found in the docs, want the overlay's and the isolated CPUs' at least", found)
	}
}
