package config

import (
	"flag"
	"fmt"
	"strconv"
)

// Flags are command-line overrides of config keys. Only flags given on the
// command line override anything, and they override every config they are
// applied to, so a reloaded file never undoes them.
type Flags struct {
	// overrides holds, in command-line order, one change per flag given.
	overrides []func(*Config)
}

// flagSpec declares the flag that overrides a key.
type flagSpec struct {
	// name is the flag's name, without dashes.
	name string
	// usage is its help; a `quoted` word names its value.
	usage string
	// set, when not nil, reads the flag's value and returns the change it
	// makes to a config, for a flag that sets more or less than its key;
	// nil reads the value as the key's, with the key's own validation.
	set func(value string) (func(*Config), error)
}

// RegisterFlags defines on fs one flag per key whose declaration (keys)
// names one, e.g. --nri-socket for nriSocket. A bad value makes fs.Parse
// fail with the same message the file would give. Call Apply on each
// loaded config after fs.Parse.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	defaults := Default()
	for _, k := range keys {
		if k.flag == nil {
			continue
		}
		set := k.flag.set
		if set == nil {
			set = k.value.flagChange
		}
		usage := fmt.Sprintf("%s (overrides config key %s, default %q)", k.flag.usage, k.name, k.value.text(defaults))
		fs.Func(k.flag.name, usage, func(value string) error {
			change, err := set(value)
			if err != nil {
				return err
			}
			f.overrides = append(f.overrides, change)
			return nil
		})
	}
	return f
}

// Apply returns a copy of c with the overrides of the flags given on the
// command line, validated as a whole (a flag can clash with a key of the
// file, e.g. --state-dir with kubeletCheckpoint); c itself is not changed.
func (f *Flags) Apply(c *Config) (*Config, error) {
	out := *c
	for _, change := range f.overrides {
		change(&out)
	}
	checked, err := documentOf(&out).build()
	if err != nil {
		return nil, fmt.Errorf("config with command-line flags applied is invalid:\n%w", err)
	}
	return checked, nil
}

// reservedCPUsFlag reads --reserved-cpus: a list that replaces whatever
// the file reserves, a count included.
func reservedCPUsFlag(v string) (func(*Config), error) {
	cpus, err := parseCPUList(v)
	if err != nil {
		return nil, err
	}
	return func(c *Config) { c.ReservedSystemCPUs, c.ReservedCPUCount = cpus, 0 }, nil
}

// nodeResourceTopologyFlag reads --node-resource-topology, which sets
// nodeResourceTopology.enabled.
func nodeResourceTopologyFlag(v string) (func(*Config), error) {
	enabled, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("%q: want true or false", v)
	}
	return func(c *Config) { c.NodeResourceTopology.Enabled = enabled }, nil
}
