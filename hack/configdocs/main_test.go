package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// TestDocumentsAreCurrent fails while a document generated from the keys'
// declarations is not what they make.
func TestDocumentsAreCurrent(t *testing.T) {
	keys := config.Keys()
	for _, d := range documents {
		t.Run(d.path, func(t *testing.T) {
			old, err := os.ReadFile(filepath.Join("..", "..", d.path))
			if err != nil {
				t.Fatal(err)
			}
			want, err := d.render(old, keys)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(old, want) {
				t.Errorf("%s is stale: run %s (- now, + generated):\n%s", d.path, regenerate, lineDiff(string(old), string(want)))
			}
		})
	}
}

func TestWrap(t *testing.T) {
	tests := []struct {
		text  string
		width int
		want  []string
	}{
		{"one two three", 9, []string{"# one two", "# three"}},
		{"one two three", 80, []string{"# one two three"}},
		{"averyveryverylongword x", 5, []string{"# averyveryverylongword", "# x"}},
		{"", 10, []string{"# "}},
	}
	for _, tt := range tests {
		if got := wrap(tt.text, tt.width, "# ", "# "); !slices.Equal(got, tt.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", tt.text, tt.width, got, tt.want)
		}
	}
}

func TestScalar(t *testing.T) {
	tests := []struct {
		value any
		want  string
	}{
		{"/var/run/nri/nri.sock", "/var/run/nri/nri.sock"},
		{"90", `"90"`},
		{"", `""`},
		{":9101", `":9101"`},
		{"127.0.0.1:9102", `"127.0.0.1:9102"`},
		{"false", `"false"`},
		{"null", `"null"`},
		{"1m0s", "1m0s"},
		{true, "true"},
		{0, "0"},
	}
	for _, tt := range tests {
		if got := scalar(tt.value); got != tt.want {
			t.Errorf("scalar(%#v) = %s, want %s", tt.value, got, tt.want)
		}
	}
}

func TestRenderChartSchemaKeepsTheRest(t *testing.T) {
	old := "{\n  \"a\": 1,\n  \"properties\": {\n    \"config\": {\"type\": \"null\"},\n    \"configGroups\": {},\n    \"image\": {\"type\": \"string\"}\n  }\n}\n"
	keys := []config.KeyDoc{
		{Name: "k", Schema: config.Schema{Type: "boolean", Description: "a <b> & c"}},
		{Name: "c", Schema: config.Schema{Type: "string"}, CommonOnly: "the common file's"},
	}
	got, err := renderChartSchema([]byte(old), keys)
	if err != nil {
		t.Fatal(err)
	}
	fileType := "        \"apiVersion\": {\n          \"type\": \"string\",\n          \"enum\": [\n            \"" + config.APIVersion + "\"\n          ],\n          \"description\": \"The file format's version; the chart writes it.\"\n        },\n" +
		"        \"kind\": {\n          \"type\": \"string\",\n          \"enum\": [\n            \"" + config.Kind + "\"\n          ],\n          \"description\": \"The file's kind; the chart writes it.\"\n        },\n"
	want := "{\n  \"a\": 1,\n  \"properties\": {\n    \"config\": {\n      \"type\": \"object\",\n      \"additionalProperties\": false,\n" +
		"      \"properties\": {\n" + fileType +
		"        \"k\": {\n          \"type\": \"boolean\",\n          \"description\": \"a <b> & c\"\n        },\n" +
		"        \"c\": {\n          \"type\": \"string\"\n        }\n      },\n" +
		"      \"description\": " + `"` + strings.ReplaceAll(chartConfigDescription, `"`, `\"`) + `"` + "\n    },\n" +
		"    \"configGroups\": {\n      \"type\": \"object\",\n      \"additionalProperties\": false,\n" +
		"      \"patternProperties\": {\n        \"" + strings.ReplaceAll(config.GroupNamePattern, `\`, `\\`) + "\": {\n" +
		"          \"type\": \"object\",\n          \"additionalProperties\": false,\n          \"properties\": {\n" +
		indent(fileType, "    ") +
		"            \"k\": {\n              \"type\": \"boolean\",\n              \"description\": \"a <b> & c\"\n            }\n          }\n        }\n      },\n" +
		"      \"description\": " + `"` + strings.ReplaceAll(chartGroupsDescription, `"`, `\"`) + `"` + "\n    },\n" +
		"    \"image\": {\"type\": \"string\"}\n  }\n}\n"
	if string(got) != want {
		t.Errorf("renderChartSchema:\n%s", lineDiff(want, string(got)))
	}
	if _, err := renderChartSchema([]byte(`{"properties": {"configGroups": {}}}`), keys); err == nil {
		t.Error("renderChartSchema of a file without properties.config did not fail")
	}
	if _, err := renderChartSchema([]byte(`{"properties": {"config": {}}}`), keys); err == nil {
		t.Error("renderChartSchema of a file without properties.configGroups did not fail")
	}
}

// indent puts prefix before every line of text.
func indent(text, prefix string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

func TestRenderReference(t *testing.T) {
	keys := []config.KeyDoc{{Name: "k", Doc: "a | b <c>\n\nd", Default: "x:y", Applies: "live", Flag: "kf"},
		{Name: "c", Doc: "e", Default: 1, Applies: "at restart", CommonOnly: "the common file's"}}
	old := "intro\n" + referenceBegin + "stale\n" + referenceEnd + "\nrest\n"
	got, err := renderReference([]byte(old), keys)
	if err != nil {
		t.Fatal(err)
	}
	want := "intro\n" + referenceBegin + "| Key | Default | Applies | Flag | In a group | |\n|---|---|---|---|---|---|\n" +
		"| `k` | `\"x:y\"` | live | `--kf` | yes | a \\| b &lt;c&gt;<br>d |\n" +
		"| `c` | `1` | at restart |  | no | e |\n" + referenceEnd + "\nrest\n"
	if string(got) != want {
		t.Errorf("renderReference:\n%s", lineDiff(want, string(got)))
	}
	if _, err := renderReference([]byte("no markers"), keys); err == nil {
		t.Error("renderReference of a file without markers did not fail")
	}
}

func TestLineDiff(t *testing.T) {
	got := lineDiff("a\nb\nc\nd", "a\nB\nc\nd\ne")
	want := "  a\n- b\n+ B\n  d\n+ e\n"
	if got != want {
		t.Errorf("lineDiff = %q, want %q", got, want)
	}
}
