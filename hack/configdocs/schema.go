package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// chartConfigDescription describes the chart's config value.
const chartConfigDescription = "The plugin's configuration file: every key of config/keys.go " +
	"(docs/install.md, \"Configuration reference\")."

// chartGroupsDescription describes the chart's configGroups value.
const chartGroupsDescription = "Configuration groups: each a name (a label value) and the keys its nodes " +
	"(labelled " + config.GroupLabel + "=<name>) run over config's; the keys only the common file sets are not " +
	"among them (docs/install.md, \"Configuration groups\")."

// renderChartSchema replaces properties.config and properties.configGroups
// of the chart's values.schema.json with the schemas of the keys; the
// rest of the file stays as it is.
func renderChartSchema(old []byte, keys []config.KeyDoc) ([]byte, error) {
	closed := false
	// The file's type: the chart writes it into the ConfigMap, and a
	// values file may repeat it (any other value is not this format).
	fileType := []config.Property{
		{Name: "apiVersion", Schema: config.Schema{Type: "string", Enum: []string{config.APIVersion}, Description: "The file format's version; the chart writes it."}},
		{Name: "kind", Schema: config.Schema{Type: "string", Enum: []string{config.Kind}, Description: "The file's kind; the chart writes it."}},
	}
	schema := config.Schema{Type: "object", AdditionalProperties: &closed, Description: chartConfigDescription}
	group := config.Schema{Type: "object", AdditionalProperties: &closed}
	schema.Properties = append(schema.Properties, fileType...)
	group.Properties = append(group.Properties, fileType...)
	for _, k := range keys {
		schema.Properties = append(schema.Properties, config.Property{Name: k.Name, Schema: k.Schema})
		if k.CommonOnly == "" {
			group.Properties = append(group.Properties, config.Property{Name: k.Name, Schema: k.Schema})
		}
	}
	groups := config.Schema{Type: "object", AdditionalProperties: &closed, Description: chartGroupsDescription,
		PatternProperties: map[string]config.Schema{config.GroupNamePattern: group}}
	out := old
	for _, p := range []struct {
		name   string
		schema config.Schema
	}{{"config", schema}, {"configGroups", groups}} {
		var err error
		if out, err = replaceProperty(out, p.name, p.schema); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replaceProperty replaces the value of properties.<name> in the JSON
// schema old with schema.
func replaceProperty(old []byte, name string, schema config.Schema) ([]byte, error) {
	pStart, pEnd, err := valueSpan(old, "properties")
	if err != nil {
		return nil, err
	}
	start, end, err := valueSpan(old[pStart:pEnd], name)
	if err != nil {
		return nil, fmt.Errorf("properties: %w", err)
	}
	start, end = start+pStart, end+pStart
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(indentOf(old, start), "  ")
	if err := enc.Encode(schema); err != nil {
		return nil, fmt.Errorf("encoding the schema of %s: %w", name, err)
	}
	return append(append(bytes.Clone(old[:start]), bytes.TrimSuffix(b.Bytes(), []byte("\n"))...), old[end:]...), nil
}

// valueSpan returns where the value of key starts and ends in the JSON
// object obj.
func valueSpan(obj []byte, key string) (start, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, fmt.Errorf("not a JSON object (%v)", err)
	}
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return 0, 0, fmt.Errorf("reading a key: %w", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, fmt.Errorf("reading the value of %v: %w", name, err)
		}
		if name == key {
			end := int(dec.InputOffset())
			return end - len(raw), end, nil
		}
	}
	return 0, 0, fmt.Errorf("no key %q", key)
}

// indentOf returns the white space that starts the line holding offset i.
func indentOf(text []byte, i int) string {
	line := text[bytes.LastIndexByte(text[:i], '\n')+1 : i]
	return string(line[:len(line)-len(bytes.TrimLeft(line, " \t"))])
}
