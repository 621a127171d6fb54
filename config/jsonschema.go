package config

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Schema is the JSON Schema (draft-07) of a key's value: the subset the
// chart's values.schema.json uses, for the tools that check a
// configuration before the plugin reads it. It is stricter than the
// parser where a deployment needs more (absolute paths), never looser.
// Each field is the JSON Schema keyword its tag names.
type Schema struct {
	Type                 string     `json:"type"`
	Enum                 []string   `json:"enum,omitempty"`
	Pattern              string     `json:"pattern,omitempty"`
	Minimum              *int       `json:"minimum,omitempty"`
	AdditionalProperties *bool      `json:"additionalProperties,omitempty"`
	Properties           Properties `json:"properties,omitempty"`
	// PatternProperties are the schemas of the properties whose names
	// match each pattern.
	PatternProperties map[string]Schema `json:"patternProperties,omitempty"`
	Description       string            `json:"description,omitempty"`
}

// Properties are the properties of an object's schema, in order.
type Properties []Property

// Property is one named property of an object's schema.
type Property struct {
	Name   string
	Schema Schema
}

// MarshalJSON writes the properties as a JSON object, in their order.
func (p Properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, prop := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encodeJSON(&b, prop.Name); err != nil {
			return nil, fmt.Errorf("encoding property name %q: %w", prop.Name, err)
		}
		b.WriteByte(':')
		if err := encodeJSON(&b, prop.Schema); err != nil {
			return nil, fmt.Errorf("encoding the schema of %s: %w", prop.Name, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// encodeJSON appends v to b as JSON, leaving <, > and & as they are (the
// descriptions are text for people).
func encodeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// closedObject is the schema of a mapping of exactly these properties.
func closedObject(props Properties) Schema {
	closed := false
	return Schema{Type: "object", AdditionalProperties: &closed, Properties: props}
}
