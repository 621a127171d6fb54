package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// applyWhen says when a changed key can take effect in a running plugin.
type applyWhen int

const (
	// applyLive: safe at any time; affects only what the plugin does next.
	applyLive applyWhen = iota
	// applyWithoutExclusive: changes which CPUs are free or how they are
	// placed, so it can only take effect while no exclusive container holds
	// CPUs.
	applyWithoutExclusive
	// applyAtRestart: fixed for the life of the process.
	applyAtRestart
)

// keyRule describes one schema key for Diff: when it applies, and its
// value in a canonical text form for comparison.
type keyRule struct {
	name  string
	when  applyWhen
	value func(*Config) string
}

// keyRules lists every schema key (a test checks it against the schema),
// in schema order. It is read-only.
var keyRules = []keyRule{
	{"nriSocket", applyAtRestart, func(c *Config) string { return c.NRISocket }},
	{"pluginName", applyAtRestart, func(c *Config) string { return c.PluginName }},
	{"pluginIndex", applyAtRestart, func(c *Config) string { return c.PluginIndex }},
	{"stateDir", applyAtRestart, func(c *Config) string { return c.StateDir }},
	{"sysfsRoot", applyAtRestart, func(c *Config) string { return c.SysfsRoot }},
	{"cgroupfsRoot", applyAtRestart, func(c *Config) string { return c.CgroupfsRoot }},
	{"reservedSystemCPUs", applyWithoutExclusive, func(c *Config) string { return c.ReservedSystemCPUs.String() }},
	{"reservedCPUCount", applyWithoutExclusive, func(c *Config) string { return strconv.Itoa(c.ReservedCPUCount) }},
	{"isolatedCPUs", applyWithoutExclusive, func(c *Config) string { return string(c.IsolatedCPUs) }},
	{"cpuManagerPolicyOptions", applyWithoutExclusive, func(c *Config) string {
		return canonicalOptions(c.CPUManagerPolicyOptions.Map())
	}},
	{"topologyManagerPolicy", applyWithoutExclusive, func(c *Config) string { return string(c.TopologyManagerPolicy) }},
	{"topologyManagerScope", applyWithoutExclusive, func(c *Config) string { return string(c.TopologyManagerScope) }},
	{"topologyManagerPolicyOptions", applyWithoutExclusive, func(c *Config) string {
		return canonicalOptions(c.TopologyManagerPolicyOptions.Map())
	}},
	{"inPlaceResize", applyLive, func(c *Config) string { return strconv.FormatBool(c.InPlaceResize) }},
	{"scaleDownDelay", applyLive, func(c *Config) string { return c.ScaleDownDelay.String() }},
	{"alignMemory", applyLive, func(c *Config) string { return strconv.FormatBool(c.AlignMemory) }},
	{"metricsAddress", applyAtRestart, func(c *Config) string { return c.MetricsAddress }},
	{"healthAddress", applyAtRestart, func(c *Config) string { return c.HealthAddress }},
	{"debugAddress", applyAtRestart, func(c *Config) string { return c.DebugAddress }},
	{"logLevel", applyLive, func(c *Config) string { return logLevelName(c.LogLevel) }},
	{"kubeletCheckpoint", applyAtRestart, func(c *Config) string { return c.KubeletCheckpoint }},
	{"disconnectedTimeout", applyAtRestart, func(c *Config) string { return c.DisconnectedTimeout.String() }},
	{"nriConfigureTimeout", applyAtRestart, func(c *Config) string { return c.NRIConfigureTimeout.String() }},
	{"kubernetesAPI", applyAtRestart, func(c *Config) string { return strconv.FormatBool(c.KubernetesAPI) }},
	{"nodeResourceTopology", applyAtRestart, func(c *Config) string {
		return fmt.Sprintf("enabled=%t;removeOnExit=%t", c.NodeResourceTopology.Enabled, c.NodeResourceTopology.RemoveOnExit)
	}},
}

func canonicalOptions(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%s;", k, m[k])
	}
	return b.String()
}

// Changes lists the keys whose values differ between two configs, grouped
// by when a running plugin may apply them. Each list is in schema order.
type Changes struct {
	// Live keys (logLevel, inPlaceResize, scaleDownDelay, alignMemory) can
	// be applied at once; inPlaceResize, scaleDownDelay and alignMemory
	// affect only later decisions.
	Live []string
	// WithoutExclusive keys (reservedSystemCPUs, reservedCPUCount,
	// isolatedCPUs, cpuManagerPolicyOptions, topologyManagerPolicy,
	// topologyManagerScope, topologyManagerPolicyOptions) can be applied only while no exclusive
	// container holds CPUs.
	WithoutExclusive []string
	// Restart keys (nriSocket, pluginName, pluginIndex, stateDir,
	// sysfsRoot, cgroupfsRoot, metricsAddress, healthAddress,
	// debugAddress, kubeletCheckpoint, disconnectedTimeout,
	// nriConfigureTimeout, kubernetesAPI, nodeResourceTopology) take
	// effect only when the plugin restarts.
	Restart []string
}

// Diff returns the keys whose values differ between old and new.
func Diff(old, new *Config) Changes {
	var ch Changes
	for _, k := range keyRules {
		if k.value(old) == k.value(new) {
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
		label string
		keys  []string
	}{
		{"live", ch.Live},
		{"without exclusive containers", ch.WithoutExclusive},
		{"at restart", ch.Restart},
	} {
		if len(g.keys) > 0 {
			parts = append(parts, g.label+": "+strings.Join(g.keys, ", "))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}
