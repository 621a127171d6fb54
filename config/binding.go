package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// value is what the table knows of a key's value, whatever its types.
type value interface {
	// fileType is the type of the value in the file: what YAML decodes
	// it into.
	fileType() reflect.Type
	// fileDefault is the file's value when it does not write the key.
	fileDefault() reflect.Value
	// load checks raw, a value of fileType, and stores what it reads in c,
	// even with an error (the checks of several keys look at it).
	load(c *Config, raw reflect.Value) error
	// save returns c's value in the file's notation, a value of fileType.
	save(c *Config) any
	// text returns c's value in a canonical text, to compare values and
	// to show them in flags' help.
	text(c *Config) string
	// flagChange reads a flag's value as the key's and returns the change
	// it makes to a config.
	flagChange(value string) (func(*Config), error)
	// schema is the JSON schema of the value in the file.
	schema() Schema
}

// binding ties a key to its field of Config: R is the value's type in the
// file, T the field's.
type binding[R, T any] struct {
	def   R
	parse func(R) (T, error)
	print func(T) R
	field func(*Config) *T
	js    Schema
}

func (b binding[R, T]) fileType() reflect.Type { return reflect.TypeFor[R]() }

func (b binding[R, T]) fileDefault() reflect.Value { return reflect.ValueOf(&b.def).Elem() }

func (b binding[R, T]) load(c *Config, raw reflect.Value) error {
	v, err := b.parse(raw.Interface().(R))
	*b.field(c) = v
	return err
}

func (b binding[R, T]) save(c *Config) any { return b.print(*b.field(c)) }

func (b binding[R, T]) text(c *Config) string { return canonical(b.print(*b.field(c))) }

func (b binding[R, T]) schema() Schema { return b.js }

func (b binding[R, T]) flagChange(s string) (func(*Config), error) {
	var raw R
	switch p := any(&raw).(type) {
	case *string:
		*p = s
	case *bool:
		v, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%q: want true or false", s)
		}
		*p = v
	default:
		return nil, fmt.Errorf("no flag reads a value written as %T", raw)
	}
	v, err := b.parse(raw)
	if err != nil {
		return nil, err
	}
	return func(c *Config) { *b.field(c) = v }, nil
}

// text binds a key written as a string, in format f; def is its default,
// as the file writes it.
func text[T any](field func(*Config) *T, def string, f textFormat[T]) value {
	return binding[string, T]{def: def, parse: f.parse, print: f.print, field: field, js: f.schema}
}

// boolean binds a key written as true or false.
func boolean(field func(*Config) *bool, def bool) value {
	return binding[bool, bool]{def: def, parse: accept[bool], print: same[bool], field: field, js: Schema{Type: "boolean"}}
}

// count binds a key written as a count of CPUs, ≥ 0.
func count(field func(*Config) *int, def int) value {
	zero := 0
	return binding[int, int]{def: def, parse: parseCPUCount, print: same[int], field: field,
		js: Schema{Type: "integer", Minimum: &zero}}
}

// cpuList binds a key written as a CPU list. The file holds nil when it
// does not write the key, which reads as def (see checks.go for when a
// count replaces it).
func cpuList(field func(*Config) *cpuset.CPUSet, def string) value {
	return binding[*string, cpuset.CPUSet]{
		parse: func(s *string) (cpuset.CPUSet, error) {
			if s == nil {
				return parseCPUList(def)
			}
			return parseCPUList(*s)
		},
		print: func(cpus cpuset.CPUSet) *string {
			s := cpus.String()
			return &s
		},
		field: field, js: cpuListSchema,
	}
}

// options binds a key written as a mapping of the kubelet's policy
// options (names, in documentation order) to their values: "true" or
// "false" unless schemas says otherwise. The file holds nil when it does
// not write the key: every option keeps its default.
func options[T any](field func(*Config) *T, parse func(map[string]string) (T, []error),
	print func(T) map[string]string, names []string, schemas map[string]Schema) value {
	props := make(Properties, len(names))
	for i, name := range names {
		s, ok := schemas[name]
		if !ok {
			s = booleanOptionSchema
		}
		props[i] = Property{Name: name, Schema: s}
	}
	return binding[map[string]string, T]{
		parse: func(m map[string]string) (T, error) {
			v, errs := parse(m)
			if len(errs) > 0 {
				return v, problems(errs)
			}
			return v, nil
		},
		print: print, field: field, js: closedObject(props),
	}
}

// mapping binds a key written as a mapping of booleans, decoded as
// struct T (json tags name its keys); its default is T's zero value.
func mapping[T any](field func(*Config) *T) value {
	t := reflect.TypeFor[T]()
	props := make(Properties, t.NumField())
	for i := range props {
		props[i] = Property{Name: jsonName(t.Field(i)), Schema: Schema{Type: "boolean"}}
	}
	return binding[T, T]{parse: accept[T], print: same[T], field: field, js: closedObject(props)}
}

// problems are several problems of one value, such as an option map's:
// each is reported on a line of its own.
type problems []error

func (p problems) Error() string {
	lines := make([]string, len(p))
	for i, err := range p {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

func accept[T any](v T) (T, error) { return v, nil }

func same[T any](v T) T { return v }

// jsonName is the key a struct field is written as.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// canonical writes a value in the file's notation as text: a map as its
// sorted key=value pairs, a struct as its fields' key=value pairs.
func canonical(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case *string:
		return *v
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case map[string]string:
		return canonicalOptions(v)
	}
	rv := reflect.ValueOf(v)
	parts := make([]string, rv.NumField())
	for i := range parts {
		parts[i] = fmt.Sprintf("%s=%v", jsonName(rv.Type().Field(i)), rv.Field(i).Interface())
	}
	return strings.Join(parts, ";")
}

// canonicalOptions writes an option map as its sorted name=value pairs.
func canonicalOptions(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%s;", k, m[k])
	}
	return b.String()
}
