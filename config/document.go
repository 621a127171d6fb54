package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// fileType is the Go type of a config document, built from keys: a struct
// with one field per key, in the table's order, tagged with the key's name
// and of the type its value has in the file. sigs.k8s.io/yaml decodes a
// document into it as it would into a struct written by hand.
var fileType = documentType()

func documentType() reflect.Type {
	fields := make([]reflect.StructField, len(keys))
	for i, k := range keys {
		fields[i] = reflect.StructField{
			Name: fmt.Sprintf("Key%d", i),
			Type: k.value.fileType(),
			Tag:  reflect.StructTag(fmt.Sprintf("json:%q", k.name)),
		}
	}
	return reflect.StructOf(fields)
}

// document holds a config file's values in the file's notation: a value of
// fileType, whose field i is the value of keys[i].
type document struct{ v reflect.Value }

// newDocument returns the document of a file that writes no key.
func newDocument() document {
	v := reflect.New(fileType).Elem()
	for i, k := range keys {
		v.Field(i).Set(k.value.fileDefault())
	}
	return document{v}
}

// documentOf returns c written as a file that writes every key.
func documentOf(c *Config) document {
	v := reflect.New(fileType).Elem()
	for i, k := range keys {
		v.Field(i).Set(reflect.ValueOf(k.value.save(c)))
	}
	return document{v}
}

// pointer returns a pointer to the document, to decode into.
func (d document) pointer() any { return d.v.Addr().Interface() }

// value returns the document's value of the key name, which must be one
// of keys.
func (d document) value(name string) reflect.Value {
	return d.v.Field(slices.IndexFunc(keys, func(k key) bool { return k.name == name }))
}

// build validates the document into a Config, reporting every problem (one
// error per problem, each starting with the key) joined into one error:
// the keys' in the table's order (a key marked checkLast after the
// others, the option maps last), then those of keys checked together.
func (d document) build() (*Config, error) {
	countReplacesDefaultList(d)
	c := &Config{}
	var first, last, opts []error
	for i, k := range keys {
		err := k.value.load(c, d.v.Field(i))
		switch {
		case err == nil:
		case k.value.fileType().Kind() == reflect.Map:
			opts = append(opts, keyErrors(k.name, err)...)
		case k.checkLast:
			last = append(last, keyErrors(k.name, err)...)
		default:
			first = append(first, keyErrors(k.name, err)...)
		}
	}
	errs := slices.Concat(first, last, opts, checkTogether(c))
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// keyErrors names key in each problem of err: key.option for a bad value
// of an option, key otherwise.
func keyErrors(key string, err error) []error {
	p, ok := err.(problems)
	if !ok {
		return []error{fmt.Errorf("%s: %w", key, err)}
	}
	named := make([]error, len(p))
	for i, err := range p {
		var bad *cpuallocator.OptionError
		if errors.As(err, &bad) {
			named[i] = fmt.Errorf("%s.%s: %w", key, bad.Option, bad.Err)
		} else {
			named[i] = fmt.Errorf("%s: %w", key, err)
		}
	}
	return named
}
