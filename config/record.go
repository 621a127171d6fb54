package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/utils/cpuset"
)

// This file turns a configuration into the values of some of its keys and
// back, in the file's own notation: the checkpoint records the keys the
// CPU assignments were made under (AllocationKeys), and a restart under
// another configuration can run on the recorded one (WithKeys) until no
// pinned container is in the way of the new one.

// AllocationKeys returns the values of c's keys that decide which CPUs
// may be exclusive and how they are placed (Changes.WithoutExclusive's
// keys), each as the file writes it (JSON), by key.
func (c *Config) AllocationKeys() map[string]string {
	fields := fieldsOf(c)
	values := map[string]string{}
	for _, k := range keys {
		if k.when == applyWithoutExclusive {
			values[k.name] = string(fields[k.name])
		}
	}
	return values
}

// WithKeys returns c with the keys given in AllocationKeys' notation set
// to their values. Only allocation keys may be given.
func (c *Config) WithKeys(values map[string]string) (*Config, error) {
	fields := fieldsOf(c)
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if k, ok := keyNamed(name); !ok || k.when != applyWithoutExclusive {
			return nil, fmt.Errorf("%s is not a key of the CPU assignments", name)
		}
		fields[name] = json.RawMessage(values[name])
	}
	return fromFields(fields)
}

// WithReservedCPUs returns c reserving exactly cpus (reservedSystemCPUs,
// reservedCPUCount unset), whichever way c reserved its CPUs.
func (c *Config) WithReservedCPUs(cpus cpuset.CPUSet) (*Config, error) {
	list, err := json.Marshal(cpus.String())
	if err != nil {
		return nil, fmt.Errorf("encoding CPUs %s: %w", cpus, err)
	}
	return c.WithKeys(map[string]string{"reservedSystemCPUs": string(list), "reservedCPUCount": "0"})
}

// Merge returns the configuration of file as a running plugin applies it:
// file's values, but running's for the keys that take effect only at a
// restart.
func Merge(running, file *Config) *Config {
	fields, was := fieldsOf(file), fieldsOf(running)
	for _, k := range keys {
		if k.when == applyAtRestart {
			fields[k.name] = was[k.name]
		}
	}
	c, err := fromFields(fields)
	if err != nil {
		// Both are valid configurations, and keys applied at restart do
		// not depend on others: a bug.
		panic(fmt.Sprintf("config: merging two valid configurations: %v", err))
	}
	return c
}

// LiveOnly returns the running configuration with file's values for the
// keys a running plugin applies at once (Changes.Live).
func LiveOnly(running, file *Config) *Config {
	fields, now := fieldsOf(running), fieldsOf(file)
	for _, k := range keys {
		if k.when == applyLive {
			fields[k.name] = now[k.name]
		}
	}
	c, err := fromFields(fields)
	if err != nil {
		panic(fmt.Sprintf("config: merging two valid configurations: %v", err))
	}
	return c
}

// fieldsOf returns every key of c in the file's notation.
func fieldsOf(c *Config) map[string]json.RawMessage {
	data, err := json.Marshal(documentOf(c).v.Interface())
	if err != nil {
		panic(fmt.Sprintf("config: encoding a configuration: %v", err)) // plain values: cannot fail
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		panic(fmt.Sprintf("config: decoding its own encoding: %v", err))
	}
	return fields
}

// fromFields parses a document of every key.
func fromFields(fields map[string]json.RawMessage) (*Config, error) {
	data, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encoding a configuration: %w", err)
	}
	return Parse(data)
}
