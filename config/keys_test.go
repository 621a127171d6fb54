package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"
)

// TestKeysDeclarations checks each key's declaration: a name and a doc,
// a default its own schema accepts, and every value the schema lists
// accepted by the parser.
func TestKeysDeclarations(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys() {
		t.Run(k.Name, func(t *testing.T) {
			if k.Name == "" || seen[k.Name] {
				t.Fatalf("key %q is declared twice or has no name", k.Name)
			}
			seen[k.Name] = true
			if k.Doc == "" || k.Schema.Description == "" {
				t.Error("no doc")
			}
			if !slices.Contains([]string{"live", "without exclusive containers", "at restart"}, k.Applies) {
				t.Errorf("applies %q", k.Applies)
			}
			if err := conforms(k.Schema, k.Default); err != nil {
				t.Errorf("the default %#v does not fit the key's schema: %v", k.Default, err)
			}
			for _, v := range k.Schema.Enum {
				if _, err := Parse([]byte(fmt.Sprintf("%s: %q", k.Name, v))); err != nil {
					t.Errorf("the schema allows %q, the parser refuses it: %v", v, err)
				}
			}
			for _, p := range k.Schema.Properties {
				for _, v := range p.Schema.Enum {
					if _, err := Parse([]byte(fmt.Sprintf("%s: {%s: %q}", k.Name, p.Name, v))); err != nil {
						t.Errorf("the schema allows %s %q, the parser refuses it: %v", p.Name, v, err)
					}
				}
			}
		})
	}
	if len(seen) != len(schemaKeys()) {
		t.Errorf("Keys describes %d keys, the table has %d", len(seen), len(schemaKeys()))
	}
}

// TestFlagsReadTheirKeysDefaults: each flag accepts its key's default as
// the file writes it.
func TestFlagsReadTheirKeysDefaults(t *testing.T) {
	d := Default()
	for _, k := range keys {
		if k.flag == nil || k.flag.set != nil {
			continue
		}
		if _, err := k.value.flagChange(k.value.text(d)); err != nil {
			t.Errorf("--%s %q: %v", k.flag.name, k.value.text(d), err)
		}
	}
}

func TestParagraphs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"one line", "one line"},
		{"\n\t\tWrapped\n\t\tlines.  ", "Wrapped lines."},
		{"First.\n\t\t\n\t\tSecond\n\t\tone.", "First.\n\nSecond one."},
		{"a\n\n\n\nb", "a\n\nb"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := paragraphs(tt.in); got != tt.want {
			t.Errorf("paragraphs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// conforms checks v, a value in the file's notation, against s.
func conforms(s Schema, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var value any
	if err := json.Unmarshal(data, &value); err != nil {
		return err
	}
	switch value := value.(type) {
	case string:
		if s.Type != "string" {
			return fmt.Errorf("a string, the schema wants %s", s.Type)
		}
		if len(s.Enum) > 0 && !slices.Contains(s.Enum, value) {
			return fmt.Errorf("%q is not one of %v", value, s.Enum)
		}
		if s.Pattern != "" && !regexp.MustCompile(s.Pattern).MatchString(value) {
			return fmt.Errorf("%q does not match %s", value, s.Pattern)
		}
	case bool:
		if s.Type != "boolean" {
			return fmt.Errorf("a boolean, the schema wants %s", s.Type)
		}
	case float64:
		if s.Type != "integer" || value != float64(int(value)) || (s.Minimum != nil && int(value) < *s.Minimum) {
			return fmt.Errorf("%v does not fit %+v", value, s)
		}
	case map[string]any:
		if s.Type != "object" {
			return fmt.Errorf("a mapping, the schema wants %s", s.Type)
		}
		for name, v := range value {
			i := slices.IndexFunc(s.Properties, func(p Property) bool { return p.Name == name })
			if i < 0 {
				return fmt.Errorf("%s is not a property", name)
			}
			if err := conforms(s.Properties[i].Schema, v); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	default:
		return fmt.Errorf("%T", value)
	}
	return nil
}
