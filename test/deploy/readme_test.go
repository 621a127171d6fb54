package deploy

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the generated files (the chart's README.md) instead of comparing them")

// TestChartReadme checks that the chart's README.md is what its
// Chart.yaml and the comments of its values.yaml make (chartReadme); run
// make chart-readme (this test with -update) after changing either.
func TestChartReadme(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	meta := loadChart(t).Metadata
	got, err := chartReadme(meta.Description, meta.Version, meta.AppVersion, meta.KubeVersion, values)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(chartDir, "README.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(want, got) {
		t.Errorf("%s is stale (%v): run make chart-readme; it should read:\n%s", path, err, got)
	}
	// Every key of values.yaml is documented.
	for _, line := range strings.Split(string(got), "\n") {
		if strings.HasPrefix(line, "| `") && strings.HasSuffix(line, "|  |") {
			t.Errorf("values.yaml: a key has no comment: %s", line)
		}
	}
}

// valueRow is one line of the values table.
type valueRow struct{ key, def, doc string }

// chartReadme generates the chart's README from its metadata and the
// comments of values.yaml: each key's comment block (the lines right above
// it) documents it. A mapping whose keys have comments of their own is
// listed key by key; any other value (a list, a mapping of data such as
// nodeSelector) as a whole.
func chartReadme(description, version, appVersion, kubeVersion string, values []byte) ([]byte, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(values, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yamlv3.MappingNode {
		return nil, fmt.Errorf("values.yaml is not a mapping")
	}
	var rows []valueRow
	if err := walkValues(doc.Content[0], "", "", &rows); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<!-- Generated from Chart.yaml and the comments of values.yaml by test/deploy
(TestChartReadme): edit those and run make chart-readme. -->
# nri-cpumanager

%s

Chart %s, nri-cpumanager %s, Kubernetes %s (in-place resize is GA from
1.35). Installing, configuring and checking a node:
[docs/install.md](../../../docs/install.md).

`+"```sh"+`
kubectl create namespace nri-cpumanager
kubectl label namespace nri-cpumanager pod-security.kubernetes.io/enforce=privileged
helm install nri-cpumanager deploy/helm/nri-cpumanager --namespace nri-cpumanager
kubectl label node <node> nri-cpumanager.io/enabled=true
`+"```"+`

values.schema.json checks every value at install and upgrade: an unknown
or misspelt key is an error.

## Values

| Key | Default | Description |
|---|---|---|
`, description, version, appVersion, kubeVersion)
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.key, r.def, r.doc)
	}
	return b.Bytes(), nil
}

// sectionRule is a comment line that only separates groups of keys.
var sectionRule = regexp.MustCompile(`^-{3}.*-{3}$`)

// commentText joins a comment block into one line of Markdown.
func commentText(comment string) string {
	var words []string
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line == "" || sectionRule.MatchString(line) {
			continue
		}
		words = append(words, line)
	}
	return strings.ReplaceAll(strings.Join(words, " "), "|", `\|`)
}

func walkValues(m *yamlv3.Node, prefix, inherited string, rows *[]valueRow) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		doc := commentText(k.HeadComment)
		if v.Kind == yamlv3.MappingNode && hasCommentedKey(v) {
			// The mapping's own comment introduces its first key.
			if err := walkValues(v, key+".", strings.TrimSpace(inherited+" "+doc), rows); err != nil {
				return err
			}
			continue
		}
		if i == 0 && inherited != "" {
			doc = strings.TrimSpace(inherited + " " + doc)
		}
		var val any
		if err := v.Decode(&val); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		def, err := json.Marshal(val)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*rows = append(*rows, valueRow{key, "`" + strings.ReplaceAll(string(def), "|", `\|`) + "`", doc})
	}
	return nil
}

// hasCommentedKey reports whether some key of the mapping has a comment.
func hasCommentedKey(m *yamlv3.Node) bool {
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].HeadComment != "" {
			return true
		}
	}
	return false
}
