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

// flagRule binds a flag to the key it overrides.
type flagRule struct {
	flag, key, usage string
	// set parses the flag's value (with the key's own validation) and
	// returns the change it makes to a config.
	set func(value string) (func(*Config), error)
}

// RegisterFlags defines on fs one flag per overridable key:
//
//	--nri-socket          nriSocket
//	--plugin-name         pluginName
//	--plugin-index        pluginIndex
//	--state-dir           stateDir
//	--sysfs-root          sysfsRoot
//	--cgroupfs-root       cgroupfsRoot
//	--reserved-cpus       reservedSystemCPUs (and sets reservedCPUCount to 0)
//	--metrics-address     metricsAddress
//	--health-address      healthAddress
//	--debug-address       debugAddress
//	--log-level           logLevel
//	--kubelet-checkpoint  kubeletCheckpoint
//	--kubernetes-api      kubernetesAPI (true or false)
//	--node-resource-topology  nodeResourceTopology.enabled (true or false)
//
// A bad value makes fs.Parse fail with the same message the file would
// give. Call Apply on each loaded config after fs.Parse.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	for _, r := range flagRules() {
		usage := fmt.Sprintf("%s (overrides config key %s, default %s)", r.usage, r.key, defaultValueText(r.key))
		fs.Func(r.flag, usage, func(value string) error {
			change, err := r.set(value)
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
	checked, err := toFile(&out).build()
	if err != nil {
		return nil, fmt.Errorf("config with command-line flags applied is invalid:\n%w", err)
	}
	return checked, nil
}

func flagRules() []flagRule {
	return []flagRule{
		stringFlag("nri-socket", "nriSocket", "`path` of containerd's NRI socket", parsePath,
			func(c *Config) *string { return &c.NRISocket }),
		stringFlag("plugin-name", "pluginName", "`name` the plugin registers with NRI", parsePluginName,
			func(c *Config) *string { return &c.PluginName }),
		stringFlag("plugin-index", "pluginIndex", "two-digit NRI plugin `index`", parsePluginIndex,
			func(c *Config) *string { return &c.PluginIndex }),
		stringFlag("state-dir", "stateDir", "`directory` of the plugin's checkpoint", parsePath,
			func(c *Config) *string { return &c.StateDir }),
		stringFlag("sysfs-root", "sysfsRoot", "`path` the CPU topology is read from", parsePath,
			func(c *Config) *string { return &c.SysfsRoot }),
		stringFlag("cgroupfs-root", "cgroupfsRoot", "`path` of the host's cgroup tree, \"\" turns the verification of cpusets off",
			func(v string) (string, error) { return v, nil },
			func(c *Config) *string { return &c.CgroupfsRoot }),
		{
			flag: "reserved-cpus", key: "reservedSystemCPUs",
			usage: "CPU `list` reserved for the system, e.g. 0,2-3; replaces reservedCPUCount",
			set: func(v string) (func(*Config), error) {
				cpus, err := parseCPUList(v)
				if err != nil {
					return nil, err
				}
				return func(c *Config) { c.ReservedSystemCPUs, c.ReservedCPUCount = cpus, 0 }, nil
			},
		},
		stringFlag("metrics-address", "metricsAddress", "host:port `address` of /metrics, \"\" disables it", parseMetricsAddress,
			func(c *Config) *string { return &c.MetricsAddress }),
		stringFlag("health-address", "healthAddress", "host:port `address` of /healthz and /readyz, \"\" serves them on the metrics address", parseMetricsAddress,
			func(c *Config) *string { return &c.HealthAddress }),
		stringFlag("debug-address", "debugAddress", "host:port `address` of /debug/state, \"\" disables it", parseMetricsAddress,
			func(c *Config) *string { return &c.DebugAddress }),
		{
			flag: "log-level", key: "logLevel", usage: "`level`: trace, debug, info, warn or error",
			set: func(v string) (func(*Config), error) {
				level, err := parseLogLevel(v)
				if err != nil {
					return nil, err
				}
				return func(c *Config) { c.LogLevel = level }, nil
			},
		},
		stringFlag("kubelet-checkpoint", "kubeletCheckpoint", "`path` of the kubelet's cpu_manager_state to import once, \"\" disables it",
			func(v string) (string, error) { return v, nil },
			func(c *Config) *string { return &c.KubeletCheckpoint }),
		boolFlag("kubernetes-api", "kubernetesAPI", "`true` uses the Kubernetes API (pod watch, events), false NRI alone",
			func(c *Config) *bool { return &c.KubernetesAPI }),
		boolFlag("node-resource-topology", "nodeResourceTopology", "`true` exports the NodeResourceTopology object (nodeResourceTopology.enabled)",
			func(c *Config) *bool { return &c.NodeResourceTopology.Enabled }),
	}
}

// boolFlag is a flag overriding a boolean key: true or false.
func boolFlag(name, key, usage string, field func(*Config) *bool) flagRule {
	return flagRule{flag: name, key: key, usage: usage, set: func(v string) (func(*Config), error) {
		value, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%q: want true or false", v)
		}
		return func(c *Config) { *field(c) = value }, nil
	}}
}

// stringFlag is a flag overriding a string key, checked by parse.
func stringFlag(name, key, usage string, parse func(string) (string, error), field func(*Config) *string) flagRule {
	return flagRule{flag: name, key: key, usage: usage, set: func(v string) (func(*Config), error) {
		value, err := parse(v)
		if err != nil {
			return nil, err
		}
		return func(c *Config) { *field(c) = value }, nil
	}}
}

// defaultValueText is the default of key as the file would write it.
func defaultValueText(key string) string {
	d := Default()
	for _, k := range keyRules {
		if k.name == key {
			return fmt.Sprintf("%q", k.value(d))
		}
	}
	return `""`
}
