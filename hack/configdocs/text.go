package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// wrap breaks text into lines of at most width characters (longer words
// stay whole): the first line starts with first, the others with rest.
func wrap(text string, width int, first, rest string) []string {
	var lines []string
	line := first
	for _, word := range strings.Fields(text) {
		if line != first && line != rest && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = rest
		}
		if line != first && line != rest {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// scalar writes a value as YAML does, quoting a string that YAML would
// read as something else, or that has a character YAML treats apart.
func scalar(v any) string {
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case string:
		var back any
		if v == "" || strings.ContainsAny(v, ":#{}[],&*!|>'\"%@`") ||
			yaml.Unmarshal([]byte(v), &back) != nil || back != v {
			return strconv.Quote(v)
		}
		return v
	}
	return fmt.Sprint(v)
}

// entry is one key of a mapping with its value.
type entry struct {
	name  string
	value any
}

// entries returns the keys of a default that is a mapping (options, a
// struct) in the order of the key's schema; nil for a scalar.
func entries(k config.KeyDoc) ([]entry, error) {
	if len(k.Schema.Properties) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(k.Default)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the default: %w", k.Name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: the default is not a mapping: %w", k.Name, err)
	}
	var out []entry
	for _, p := range k.Schema.Properties {
		if v, ok := m[p.Name]; ok {
			out = append(out, entry{p.Name, v})
		}
	}
	if len(out) != len(m) {
		return nil, fmt.Errorf("%s: the default has keys %v, not all in its schema", k.Name, slices.Sorted(maps.Keys(m)))
	}
	return out, nil
}
