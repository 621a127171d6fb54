package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// The config file's type: its apiVersion and kind, as Kubernetes
// components' configuration files name theirs (the kubelet's
// kubelet.config.k8s.io/v1beta1 KubeletConfiguration). A file without them
// is still read, as this version of the format, with a warning.
const (
	APIVersion = "config.nri-cpumanager.io/v1alpha1"
	Kind       = "PluginConfiguration"
)

// Load reads and parses the config file at path (symlinks are followed, as
// a ConfigMap mount needs).
func Load(path string) (*Config, error) {
	c, _, err := LoadWithWarnings(path)
	return c, err
}

// LoadWithWarnings is Load, and what the file should change although it
// is valid (ParseWithWarnings).
func LoadWithWarnings(path string) (*Config, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	c, warnings, err := ParseWithWarnings(data)
	if err != nil {
		return nil, nil, fmt.Errorf("config file %s is invalid:\n%w", path, err)
	}
	return c, warnings, nil
}

// Parse decodes and validates a YAML config document. Keys it does not
// write take their Default values; an empty document gives Default(). The
// error joins one line per problem (see errors.Join): every unknown key,
// every value of the wrong type and every value out of range, all from one
// call, so that a file is fixed in one round.
func Parse(data []byte) (*Config, error) {
	c, _, err := ParseWithWarnings(data)
	return c, err
}

// ParseWithWarnings is Parse, and what the document should change although
// it is valid: a document without apiVersion and kind (read as APIVersion,
// Kind: the form of earlier releases).
func ParseWithWarnings(data []byte) (*Config, []string, error) {
	d, warnings, err := decode(data)
	if d == nil {
		return nil, nil, err
	}
	c, buildErr := d.build()
	if err != nil || buildErr != nil {
		return nil, nil, errors.Join(err, buildErr)
	}
	return c, warnings, nil
}

// checkDocumentType checks a document's apiVersion and kind and removes them
// from top: both must be this format's, or both absent (a warning).
func checkDocumentType(top map[string]json.RawMessage) ([]string, error) {
	want := map[string]string{"apiVersion": APIVersion, "kind": Kind}
	var errs []error
	seen := 0
	for _, k := range []string{"apiVersion", "kind"} {
		raw, ok := top[k]
		if !ok {
			continue
		}
		seen++
		delete(top, k)
		var v string
		if err := json.Unmarshal(raw, &v); err != nil || v != want[k] {
			errs = append(errs, fmt.Errorf("%s: got %s, want %q (this plugin reads %s %s)", k, raw, want[k], APIVersion, Kind))
		}
	}
	switch {
	case len(errs) > 0:
		return nil, errors.Join(errs...)
	case seen == 1:
		return nil, fmt.Errorf("apiVersion and kind go together: write both (apiVersion: %s, kind: %s)", APIVersion, Kind)
	case seen == 0 && len(top) > 0:
		return []string{fmt.Sprintf("the configuration names no apiVersion and kind: read as %s %s; add apiVersion: %s and kind: %s at its top",
			APIVersion, Kind, APIVersion, Kind)}, nil
	}
	return nil, nil
}

// decode reads the document over the defaults, strictly: duplicate keys,
// keys the table does not know (also when only their case differs, which
// encoding/json would otherwise accept) and values of the wrong type are
// errors. A document that is not a mapping gives no document; otherwise
// the document comes back with the error, holding every value that decoded
// (a key that did not keeps its default), for build to check the rest.
func decode(data []byte) (*document, []string, error) {
	top, warnings, err := topOf(data)
	if top == nil && err != nil {
		return nil, nil, err
	}
	d, keyErr := decodeTop(top)
	return d, warnings, errors.Join(err, keyErr)
}

// topOf reads a document's top-level mapping, its apiVersion and kind
// checked and removed. A document that is not a mapping gives a nil map
// and the error; a type that is not this format's gives the map and the
// error.
func topOf(data []byte) (map[string]json.RawMessage, []string, error) {
	doc, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, nil, fmt.Errorf("the document must be a mapping of config keys to values, not %s", jsonKind(doc))
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	warnings, err := checkDocumentType(top)
	return top, warnings, err
}

// decodeTop decodes a top-level mapping (topOf) over the defaults,
// strictly, and returns the document with every value that decoded (see
// decode) and the errors of the others.
func decodeTop(top map[string]json.RawMessage) (*document, error) {
	keyErr := checkKeys(slices.Sorted(maps.Keys(top)))
	keysOnly, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	d := newDocument()
	if err := yaml.UnmarshalStrict(keysOnly, d.pointer()); err == nil {
		return &d, keyErr
	}
	// The whole document stops at its first bad value: decode the keys one
	// by one to report them all.
	d = newDocument()
	return &d, errors.Join(keyErr, decodeKeys(top, d))
}

// decodeKeys decodes each known key of top into d on its own, in the
// table's order, and reports every key (and option) whose value has the
// wrong type; such a key keeps its default.
func decodeKeys(top map[string]json.RawMessage, d document) error {
	var errs []error
	for i, k := range keys {
		raw, ok := top[k.name]
		if !ok {
			continue
		}
		field := d.v.Field(i)
		if field.Kind() == reflect.Map {
			errs = append(errs, decodeOptions(k.name, raw, field)...)
			continue
		}
		val := reflect.New(field.Type())
		val.Elem().Set(field)
		if err := yaml.UnmarshalStrict(raw, val.Interface()); err != nil {
			errs = append(errs, explainDecodeError(k.name, err))
			continue
		}
		field.Set(val.Elem())
	}
	return errors.Join(errs...)
}

// decodeOptions decodes an option map (cpuManagerPolicyOptions,
// topologyManagerPolicyOptions) option by option into field, reporting
// each option whose value is not a scalar.
func decodeOptions(key string, raw json.RawMessage, field reflect.Value) []error {
	var opts map[string]json.RawMessage
	if err := json.Unmarshal(raw, &opts); err != nil {
		return []error{explainDecodeError(key, err)}
	}
	if opts == nil { // null: the default
		return nil
	}
	var errs []error
	out := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(opts)) {
		var s string
		if err := yaml.UnmarshalStrict(opts[name], &s); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) {
				err = fmt.Errorf("got %s, want a string such as \"true\"", withArticle(typeErr.Value))
			}
			errs = append(errs, fmt.Errorf("%s.%s: %w", key, name, err))
			continue
		}
		out[name] = s
	}
	field.Set(reflect.ValueOf(out))
	return errs
}

// checkKeys reports every key the table does not know, suggesting the
// closest known key.
func checkKeys(keys []string) error {
	known := schemaKeys()
	var errs []error
	for _, k := range keys {
		if slices.Contains(known, k) {
			continue
		}
		if s := closest(k, known); s != "" {
			errs = append(errs, fmt.Errorf("unknown key %q (did you mean %q?)", k, s))
		} else {
			errs = append(errs, fmt.Errorf("unknown key %q; known keys are %s", k, strings.Join(known, ", ")))
		}
	}
	return errors.Join(errs...)
}

// closest returns the candidate that differs from s only in case or by at
// most two edits, or "".
func closest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if strings.EqualFold(s, c) {
			return c
		}
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// explainDecodeError rewrites a type mismatch of key's value into
// "key: got X, want Y"; other errors are returned with the key.
func explainDecodeError(key string, err error) error {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		return fmt.Errorf("%s: %w", key, err)
	}
	return fmt.Errorf("%s: got %s, want %s", key, withArticle(typeErr.Value), describeType(typeErr.Type))
}

func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int:
		return "an integer"
	case reflect.Map:
		return "a mapping of option names to values"
	case reflect.Struct:
		return "a mapping of " + structKeys(t)
	default:
		return t.String()
	}
}

// structKeys names the keys of a nested mapping, e.g. "enabled and
// removeOnExit".
func structKeys(t reflect.Type) string {
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = jsonName(t.Field(i))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func withArticle(jsonKind string) string {
	switch {
	case jsonKind == "":
		return "a value"
	case strings.HasPrefix(jsonKind, "array"), strings.HasPrefix(jsonKind, "object"):
		return "an " + jsonKind
	default:
		return "a " + jsonKind
	}
}

// jsonKind names the kind of a JSON document for an error message.
func jsonKind(doc []byte) string {
	switch b := bytes.TrimSpace(doc); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '[':
		return "a list"
	case b[0] == '"':
		return "a string"
	default:
		return "a scalar (" + string(b) + ")"
	}
}
