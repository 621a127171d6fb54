package config

import "strings"

// Changes lists the keys whose values differ between two configs, grouped
// by when a running plugin may apply them (each key's declaration in keys
// says). Each list is in the table's order.
type Changes struct {
	// Live keys can be applied at once; they affect only what the plugin
	// does next.
	Live []string
	// WithoutExclusive keys can be applied only while no exclusive
	// container holds CPUs.
	WithoutExclusive []string
	// Restart keys take effect only when the plugin restarts.
	Restart []string
}

// Diff returns the keys whose values differ between old and new.
func Diff(old, new *Config) Changes {
	var ch Changes
	for _, k := range keys {
		if k.value.text(old) == k.value.text(new) {
			continue
		}
		switch k.when {
		case applyLive:
			ch.Live = append(ch.Live, k.name)
		case applyWithoutExclusive:
			ch.WithoutExclusive = append(ch.WithoutExclusive, k.name)
		case applyAtRestart:
			ch.Restart = append(ch.Restart, k.name)
		}
	}
	return ch
}

// Empty reports whether no key changed.
func (ch Changes) Empty() bool {
	return len(ch.Live) == 0 && len(ch.WithoutExclusive) == 0 && len(ch.Restart) == 0
}

// String lists the changed keys by group, for logs, e.g.
// "live: logLevel; without exclusive containers: reservedSystemCPUs;
// at restart: stateDir", or "no change".
func (ch Changes) String() string {
	var parts []string
	for _, g := range []struct {
		when  applyWhen
		names []string
	}{
		{applyLive, ch.Live},
		{applyWithoutExclusive, ch.WithoutExclusive},
		{applyAtRestart, ch.Restart},
	} {
		if len(g.names) > 0 {
			parts = append(parts, g.when.String()+": "+strings.Join(g.names, ", "))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

// Value returns the value of the key name in c, in the canonical text
// Diff compares; "" for a name that is no key.
func (c *Config) Value(name string) string {
	k, ok := keyNamed(name)
	if !ok {
		return ""
	}
	return k.value.text(c)
}
