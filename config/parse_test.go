package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// errorLines splits a joined error into its lines ("" for nil).
func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// requireSame fails when got and want differ in any key.
func requireSame(t *testing.T, got, want *Config) {
	t.Helper()
	if ch := Diff(want, got); !ch.Empty() {
		t.Fatalf("configs differ in %s\ngot:  %+v\nwant: %+v", ch, got, want)
	}
}

func TestDefaultValues(t *testing.T) {
	want := map[string]string{
		"nriSocket":                    "/var/run/nri/nri.sock",
		"pluginName":                   "cpumanager",
		"pluginIndex":                  "90",
		"stateDir":                     "/var/lib/nri-cpumanager",
		"sysfsRoot":                    "/sys",
		"cgroupfsRoot":                 "/sys/fs/cgroup",
		"reservedSystemCPUs":           "0",
		"reservedCPUCount":             "0",
		"isolatedCPUs":                 "shared",
		"cpuManagerPolicyOptions":      "align-by-socket=false;distribute-cpus-across-cores=false;distribute-cpus-across-numa=false;full-pcpus-only=false;prefer-align-cpus-by-uncorecache=false;strict-cpu-reservation=false;",
		"topologyManagerPolicy":        "none",
		"topologyManagerScope":         "container",
		"topologyManagerPolicyOptions": "max-allowable-numa-nodes=8;prefer-closest-numa-nodes=false;",
		"inPlaceResize":                "true",
		"scaleDownDelay":               "0s",
		"alignMemory":                  "false",
		"metricsAddress":               ":9101",
		"probeSocket":                  "/run/nri-cpumanager/probe.sock",
		"healthAddress":                "",
		"debugAddress":                 "127.0.0.1:9102",
		"logLevel":                     "info",
		"logFormat":                    "text",
		"kubeletCheckpoint":            "",
		"disconnectedTimeout":          "1m0s",
		"nriConfigureTimeout":          "10s",
		"kubernetesAPI":                "true",
		"nodeResourceTopology":         "enabled=false;removeOnExit=false",
		"observeOnly":                  "false",
	}
	d := Default()
	for _, k := range keys {
		if got := k.value.text(d); got != want[k.name] {
			t.Errorf("default %s = %q, want %q", k.name, got, want[k.name])
		}
	}
	if len(want) != len(keys) {
		t.Errorf("test lists %d keys, schema has %d", len(want), len(keys))
	}
}

func TestParseEmptyDocumentGivesDefaults(t *testing.T) {
	for _, doc := range []string{"", "\n", "# only a comment\n", "null", "{}", "---\n"} {
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%q): %v", doc, err)
		}
		requireSame(t, c, Default())
	}
}

func TestParseValidValues(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(*Config) bool
	}{
		{"socket", "nriSocket: /run/nri.sock", func(c *Config) bool { return c.NRISocket == "/run/nri.sock" }},
		{"plugin name", "pluginName: cpu.manager_2+x-y", func(c *Config) bool { return c.PluginName == "cpu.manager_2+x-y" }},
		{"plugin index quoted", `pluginIndex: "05"`, func(c *Config) bool { return c.PluginIndex == "05" }},
		{"plugin index unquoted number", `pluginIndex: 42`, func(c *Config) bool { return c.PluginIndex == "42" }},
		{"state dir", "stateDir: /tmp/s", func(c *Config) bool { return c.StateDir == "/tmp/s" }},
		{"scale-down delay", "scaleDownDelay: 30s", func(c *Config) bool { return c.ScaleDownDelay == 30*time.Second }},
		{"relative sysfs root", "sysfsRoot: testdata/sys", func(c *Config) bool { return c.SysfsRoot == "testdata/sys" }},
		{"cgroupfs root", "cgroupfsRoot: /cg", func(c *Config) bool { return c.CgroupfsRoot == "/cg" }},
		{"no cgroupfs root: no verification", `cgroupfsRoot: ""`, func(c *Config) bool { return c.CgroupfsRoot == "" }},
		{"reserved list", `reservedSystemCPUs: "0,2-3"`, func(c *Config) bool {
			return c.ReservedSystemCPUs.Equals(cpuset.New(0, 2, 3)) && c.ReservedCPUCount == 0
		}},
		{"largest CPU id", `reservedSystemCPUs: "16383"`, func(c *Config) bool { return c.ReservedSystemCPUs.Equals(cpuset.New(16383)) }},
		{"reserved list unquoted number", `reservedSystemCPUs: 1`, func(c *Config) bool { return c.ReservedSystemCPUs.Equals(cpuset.New(1)) }},
		{"no reserved CPUs", `reservedSystemCPUs: ""`, func(c *Config) bool { return c.ReservedSystemCPUs.IsEmpty() && c.ReservedCPUCount == 0 }},
		{"count replaces default list", `reservedCPUCount: 2`, func(c *Config) bool {
			return c.ReservedSystemCPUs.IsEmpty() && c.ReservedCPUCount == 2
		}},
		{"count with empty list", "reservedSystemCPUs: \"\"\nreservedCPUCount: 3", func(c *Config) bool {
			return c.ReservedSystemCPUs.IsEmpty() && c.ReservedCPUCount == 3
		}},
		{"list with zero count", "reservedSystemCPUs: \"4\"\nreservedCPUCount: 0", func(c *Config) bool {
			return c.ReservedSystemCPUs.Equals(cpuset.New(4)) && c.ReservedCPUCount == 0
		}},
		{"every static option", `cpuManagerPolicyOptions: {full-pcpus-only: "true", distribute-cpus-across-numa: "true", align-by-socket: "true", distribute-cpus-across-cores: "true", strict-cpu-reservation: "true", prefer-align-cpus-by-uncorecache: "true"}`,
			func(c *Config) bool {
				return c.CPUManagerPolicyOptions == cpuallocator.StaticPolicyOptions{FullPCPUsOnly: true, DistributeCPUsAcrossNUMA: true, AlignBySocket: true, DistributeCPUsAcrossCores: true, StrictCPUReservation: true, PreferAlignByUncoreCache: true}
			}},
		{"one static option, others false", `cpuManagerPolicyOptions: {strict-cpu-reservation: "true"}`, func(c *Config) bool {
			return c.CPUManagerPolicyOptions == cpuallocator.StaticPolicyOptions{StrictCPUReservation: true}
		}},
		{"unquoted boolean option", "cpuManagerPolicyOptions:\n  full-pcpus-only: true", func(c *Config) bool {
			return c.CPUManagerPolicyOptions == cpuallocator.StaticPolicyOptions{FullPCPUsOnly: true}
		}},
		{"kubelet-style boolean spelling", `cpuManagerPolicyOptions: {align-by-socket: "True"}`, func(c *Config) bool {
			return c.CPUManagerPolicyOptions == cpuallocator.StaticPolicyOptions{AlignBySocket: true}
		}},
		{"empty option map", "cpuManagerPolicyOptions: {}", func(c *Config) bool {
			return c.CPUManagerPolicyOptions == cpuallocator.StaticPolicyOptions{}
		}},
		{"isolated CPUs exclusive", "isolatedCPUs: exclusive", func(c *Config) bool { return c.IsolatedCPUs == IsolatedCPUsExclusive }},
		{"isolated CPUs shared", "isolatedCPUs: shared", func(c *Config) bool { return c.IsolatedCPUs == IsolatedCPUsShared }},
		{"scope pod", "topologyManagerScope: pod", func(c *Config) bool { return c.TopologyManagerScope == cpuallocator.ScopePod }},
		{"policy best-effort", "topologyManagerPolicy: best-effort", func(c *Config) bool { return c.TopologyManagerPolicy == cpuallocator.TopologyBestEffort }},
		{"policy restricted", "topologyManagerPolicy: restricted", func(c *Config) bool { return c.TopologyManagerPolicy == cpuallocator.TopologyRestricted }},
		{"policy single-numa-node", "topologyManagerPolicy: single-numa-node", func(c *Config) bool {
			return c.TopologyManagerPolicy == cpuallocator.TopologySingleNUMANode
		}},
		{"topology options", `topologyManagerPolicyOptions: {prefer-closest-numa-nodes: "true", max-allowable-numa-nodes: "2"}`, func(c *Config) bool {
			return c.TopologyManagerPolicyOptions == cpuallocator.TopologyOptions{PreferClosestNUMANodes: true, MaxAllowableNUMANodes: 2}
		}},
		{"topology options keep the node limit default", `topologyManagerPolicyOptions: {prefer-closest-numa-nodes: "true"}`, func(c *Config) bool {
			return c.TopologyManagerPolicyOptions == cpuallocator.TopologyOptions{PreferClosestNUMANodes: true, MaxAllowableNUMANodes: 8}
		}},
		{"unquoted node limit", "topologyManagerPolicyOptions:\n  max-allowable-numa-nodes: 1", func(c *Config) bool {
			return c.TopologyManagerPolicyOptions.MaxAllowableNUMANodes == 1
		}},
		{"resize off", "inPlaceResize: false", func(c *Config) bool { return !c.InPlaceResize }},
		{"align memory", "alignMemory: true", func(c *Config) bool { return c.AlignMemory }},
		{"metrics on loopback", `metricsAddress: "127.0.0.1:9000"`, func(c *Config) bool { return c.MetricsAddress == "127.0.0.1:9000" }},
		{"metrics on IPv6", `metricsAddress: "[::1]:9000"`, func(c *Config) bool { return c.MetricsAddress == "[::1]:9000" }},
		{"metrics disabled", `metricsAddress: ""`, func(c *Config) bool { return c.MetricsAddress == "" }},
		{"debug endpoint on every address", `debugAddress: ":9102"`, func(c *Config) bool { return c.DebugAddress == ":9102" }},
		{"probes over HTTP too", `healthAddress: ":9103"`, func(c *Config) bool { return c.HealthAddress == ":9103" }},
		{"no probe socket", `probeSocket: ""`, func(c *Config) bool { return c.ProbeSocket == "" }},
		{"configure watchdog off", `nriConfigureTimeout: 0s`, func(c *Config) bool { return c.NRIConfigureTimeout == 0 }},
		{"log trace", "logLevel: trace", func(c *Config) bool { return c.LogLevel == logrus.TraceLevel }},
		{"log debug", "logLevel: debug", func(c *Config) bool { return c.LogLevel == logrus.DebugLevel }},
		{"log warn", "logLevel: warn", func(c *Config) bool { return c.LogLevel == logrus.WarnLevel }},
		{"log error", "logLevel: error", func(c *Config) bool { return c.LogLevel == logrus.ErrorLevel }},
		{"import disabled", `kubeletCheckpoint: ""`, func(c *Config) bool { return c.KubeletCheckpoint == "" }},
		{"import elsewhere", `kubeletCheckpoint: /k/cpu_manager_state`, func(c *Config) bool { return c.KubeletCheckpoint == "/k/cpu_manager_state" }},
		{"state dir next to kubelet, import disabled", "stateDir: /var/lib/kubelet\nkubeletCheckpoint: \"\"", func(c *Config) bool {
			return c.StateDir == "/var/lib/kubelet"
		}},
		{"null value keeps the default", "logLevel:\nnriSocket: ~", func(c *Config) bool {
			return c.LogLevel == logrus.InfoLevel && c.NRISocket == "/var/run/nri/nri.sock"
		}},
		{"JSON document", `{"logLevel": "debug", "reservedCPUCount": 1}`, func(c *Config) bool {
			return c.LogLevel == logrus.DebugLevel && c.ReservedCPUCount == 1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.doc, err)
			}
			if !tt.check(c) {
				t.Errorf("Parse(%q) = %+v", tt.doc, c)
			}
		})
	}
}

func TestParseValidationMessages(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"empty socket", `nriSocket: ""`, []string{`nriSocket: "" is not a path`}},
		{"empty plugin name", `pluginName: ""`, []string{`pluginName: "" is not a plugin name; use letters, digits and _.+-`}},
		{"plugin name with a slash", `pluginName: cpu/manager`, []string{`pluginName: "cpu/manager" has the character '/'; a plugin name has only letters, digits and _.+-`}},
		{"one-digit index", `pluginIndex: "9"`, []string{`pluginIndex: "9" is not two digits 00-99; write it quoted, e.g. "09"`}},
		{"index read as octal", `pluginIndex: 05`, []string{`pluginIndex: "5" is not two digits 00-99; write it quoted, e.g. "09"`}},
		{"three-digit index", `pluginIndex: "100"`, []string{`pluginIndex: "100" is not two digits 00-99; write it quoted, e.g. "09"`}},
		{"letters in index", `pluginIndex: "a1"`, []string{`pluginIndex: "a1" is not two digits 00-99; write it quoted, e.g. "09"`}},
		{"empty state dir", `stateDir: ""`, []string{`stateDir: "" is not a path`}},
		{"empty sysfs root", `sysfsRoot: ""`, []string{`sysfsRoot: "" is not a path`}},
		{"bad CPU list", `reservedSystemCPUs: "0-"`, []string{`reservedSystemCPUs: "0-" is not a CPU list such as "0,2-3": "0-": missing CPU number`}},
		{"reversed CPU range", `reservedSystemCPUs: "3-1"`, []string{`reservedSystemCPUs: "3-1" is not a CPU list such as "0,2-3": "3-1": range runs backwards`}},
		{"huge CPU range", `reservedSystemCPUs: "0-99999999"`, []string{`reservedSystemCPUs: "0-99999999" is not a CPU list such as "0,2-3": "0-99999999": CPU 99999999 is above the largest supported CPU 65535`}},
		{"huge single CPU", `reservedSystemCPUs: "1,65536"`, []string{`reservedSystemCPUs: "1,65536" is not a CPU list such as "0,2-3": "65536": CPU 65536 is above the largest supported CPU 65535`}},
		{"negative count", `reservedCPUCount: -1`, []string{`reservedCPUCount: -1 is not a CPU count ≥ 0`}},
		{"negative scale-down delay", `scaleDownDelay: -1s`, []string{`scaleDownDelay: "-1s" is not a duration ≥ 0 such as "60s" or "2m"`}},
		{"scale-down delay too long", `scaleDownDelay: 1h`, []string{`scaleDownDelay: 1h0m0s is longer than 10m0s: the CPUs a decrease releases would stay out of every other container's reach that long`}},
		{"list and count", "reservedSystemCPUs: \"0-1\"\nreservedCPUCount: 2", []string{
			`reservedSystemCPUs and reservedCPUCount are both set ("0-1" and 2): remove reservedCPUCount to reserve exactly CPUs 0-1, or remove reservedSystemCPUs to reserve 2 CPUs placed by topology`}},
		{"default list written out and count", "reservedSystemCPUs: \"0\"\nreservedCPUCount: 1", []string{
			`reservedSystemCPUs and reservedCPUCount are both set ("0" and 1): remove reservedCPUCount to reserve exactly CPUs 0, or remove reservedSystemCPUs to reserve 1 CPUs placed by topology`}},
		{"bad isolated CPUs mode", `isolatedCPUs: dedicated`, []string{`isolatedCPUs: "dedicated" is not one of shared, exclusive`}},
		{"isolated CPUs mode as a boolean", `isolatedCPUs: true`, []string{`isolatedCPUs: "true" is not one of shared, exclusive`}},
		{"unknown static option", `cpuManagerPolicyOptions: {full-pcpu-only: "true"}`, []string{
			`cpuManagerPolicyOptions: "full-pcpu-only" is not one of full-pcpus-only, distribute-cpus-across-numa, align-by-socket, distribute-cpus-across-cores, strict-cpu-reservation, prefer-align-cpus-by-uncorecache`}},
		{"non-boolean static option", `cpuManagerPolicyOptions: {full-pcpus-only: "maybe"}`, []string{
			`cpuManagerPolicyOptions.full-pcpus-only: "maybe" is not one of true, false`}},
		{"bad policy", `topologyManagerPolicy: single-numa`, []string{
			`topologyManagerPolicy: "single-numa" is not one of none, best-effort, restricted, single-numa-node`}},
		{"policy in wrong case", `topologyManagerPolicy: None`, []string{
			`topologyManagerPolicy: "None" is not one of none, best-effort, restricted, single-numa-node`}},
		{"unknown topology option", `topologyManagerPolicyOptions: {prefer-closest-numa-node: "true"}`, []string{
			`topologyManagerPolicyOptions: "prefer-closest-numa-node" is not one of prefer-closest-numa-nodes, max-allowable-numa-nodes`}},
		{"non-boolean topology option", `topologyManagerPolicyOptions: {prefer-closest-numa-nodes: "yes please"}`, []string{
			`topologyManagerPolicyOptions.prefer-closest-numa-nodes: "yes please" is not one of true, false`}},
		{"zero node limit", `topologyManagerPolicyOptions: {max-allowable-numa-nodes: "0"}`, []string{
			`topologyManagerPolicyOptions.max-allowable-numa-nodes: "0" is not an integer ≥ 1`}},
		{"non-integer node limit", `topologyManagerPolicyOptions: {max-allowable-numa-nodes: "eight"}`, []string{
			`topologyManagerPolicyOptions.max-allowable-numa-nodes: "eight" is not an integer ≥ 1`}},
		{"port missing", `metricsAddress: "9101"`, []string{
			`metricsAddress: "9101" is not host:port such as ":9101" or "127.0.0.1:9101", or "" to disable the endpoint`}},
		{"named port", `metricsAddress: ":http"`, []string{
			`metricsAddress: ":http" is not host:port such as ":9101" or "127.0.0.1:9101", or "" to disable the endpoint`}},
		{"port out of range", `metricsAddress: ":70000"`, []string{
			`metricsAddress: ":70000" is not host:port such as ":9101" or "127.0.0.1:9101", or "" to disable the endpoint`}},
		{"bad log level", `logLevel: verbose`, []string{`logLevel: "verbose" is not one of trace, debug, info, warn, error`}},
		{"logrus-only log level", `logLevel: warning`, []string{`logLevel: "warning" is not one of trace, debug, info, warn, error`}},
		{"checkpoint clash", "stateDir: /var/lib/kubelet/\nkubeletCheckpoint: /var/lib/kubelet/cpu_manager_state", []string{
			`stateDir: "/var/lib/kubelet/" holds kubeletCheckpoint "/var/lib/kubelet/cpu_manager_state"; the plugin would write its own checkpoint over it: give the plugin a directory of its own`}},
		{"probes on the metrics listener", `healthAddress: ":9101"`, []string{
			`healthAddress and metricsAddress are both ":9101": the probes need a listener of their own (or none: healthAddress "", the probes ask probeSocket)`}},
		{"negative configure watchdog", `nriConfigureTimeout: -1s`, []string{
			`nriConfigureTimeout: "-1s" is not a duration ≥ 0 such as "60s" or "2m"`}},
		{"all problems at once", "pluginIndex: \"9\"\nlogLevel: verbose\ntopologyManagerPolicy: single-numa\ncpuManagerPolicyOptions: {b: \"1\", a: \"1\"}", []string{
			`pluginIndex: "9" is not two digits 00-99; write it quoted, e.g. "09"`,
			`topologyManagerPolicy: "single-numa" is not one of none, best-effort, restricted, single-numa-node`,
			`logLevel: "verbose" is not one of trace, debug, info, warn, error`,
			`cpuManagerPolicyOptions: "a" is not one of full-pcpus-only, distribute-cpus-across-numa, align-by-socket, distribute-cpus-across-cores, strict-cpu-reservation, prefer-align-cpus-by-uncorecache`,
			`cpuManagerPolicyOptions: "b" is not one of full-pcpus-only, distribute-cpus-across-numa, align-by-socket, distribute-cpus-across-cores, strict-cpu-reservation, prefer-align-cpus-by-uncorecache`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tt.doc, c)
			}
			if got := errorLines(err); !slices.Equal(got, tt.want) {
				t.Errorf("Parse(%q) error:\n%s\nwant:\n%s", tt.doc, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestParseReportsEveryError checks that one call reports every problem of
// a file, whatever its kind: unknown keys, values of the wrong type (each
// of them, not only the first the decoder meets) and values out of range,
// so that validate-config shows them all at once.
func TestParseReportsEveryError(t *testing.T) {
	doc := strings.Join([]string{
		"logLvel: debug",
		"pluginIndex: \"9\"",
		"reservedCPUCount: two",
		"inPlaceResize: \"false\"",
		"cpuManagerPolicyOptions: {full-pcpus-only: [true], align-by-socket: \"maybe\", strict-cpu-reservation: \"true\"}",
		"topologyManagerPolicy: single-numa",
		"topologyManagerPolicyOptions: [prefer-closest-numa-nodes]",
		"alignMemory: 1",
		"logLevel: {level: debug}",
		"metricsAddress: \"9101\"",
	}, "\n")
	want := []string{
		`unknown key "logLvel" (did you mean "logLevel"?)`,
		`reservedCPUCount: got a string, want an integer`,
		`cpuManagerPolicyOptions.full-pcpus-only: got an array, want a string such as "true"`,
		`topologyManagerPolicyOptions: got an array, want a mapping of option names to values`,
		`inPlaceResize: got a string, want true or false`,
		`alignMemory: got a number, want true or false`,
		`logLevel: got an object, want a string`,
		`pluginIndex: "9" is not two digits 00-99; write it quoted, e.g. "09"`,
		`topologyManagerPolicy: "single-numa" is not one of none, best-effort, restricted, single-numa-node`,
		`metricsAddress: "9101" is not host:port such as ":9101" or "127.0.0.1:9101", or "" to disable the endpoint`,
		`cpuManagerPolicyOptions.align-by-socket: "maybe" is not one of true, false`,
	}
	_, err := Parse([]byte(doc))
	if got := errorLines(err); !slices.Equal(got, want) {
		t.Errorf("Parse error:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseRejectsUnknownKeys(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"wrong case", `reservedSystemCpus: "1"`, []string{`unknown key "reservedSystemCpus" (did you mean "reservedSystemCPUs"?)`}},
		{"typo", `logLvel: debug`, []string{`unknown key "logLvel" (did you mean "logLevel"?)`}},
		{"kubelet key this plugin has no use for", `cpuManagerPolicy: static`, []string{
			`unknown key "cpuManagerPolicy"; known keys are nriSocket, pluginName, pluginIndex, stateDir, sysfsRoot, cgroupfsRoot, reservedSystemCPUs, reservedCPUCount, isolatedCPUs, cpuManagerPolicyOptions, topologyManagerPolicy, topologyManagerScope, topologyManagerPolicyOptions, inPlaceResize, scaleDownDelay, alignMemory, metricsAddress, probeSocket, healthAddress, debugAddress, logLevel, logFormat, kubeletCheckpoint, disconnectedTimeout, nriConfigureTimeout, kubernetesAPI, nodeResourceTopology, observeOnly`}},
		{"every unknown key reported", "zz: 1\nlogLevel: debug\naa: 2", []string{
			`unknown key "aa"; known keys are nriSocket, pluginName, pluginIndex, stateDir, sysfsRoot, cgroupfsRoot, reservedSystemCPUs, reservedCPUCount, isolatedCPUs, cpuManagerPolicyOptions, topologyManagerPolicy, topologyManagerScope, topologyManagerPolicyOptions, inPlaceResize, scaleDownDelay, alignMemory, metricsAddress, probeSocket, healthAddress, debugAddress, logLevel, logFormat, kubeletCheckpoint, disconnectedTimeout, nriConfigureTimeout, kubernetesAPI, nodeResourceTopology, observeOnly`,
			`unknown key "zz"; known keys are nriSocket, pluginName, pluginIndex, stateDir, sysfsRoot, cgroupfsRoot, reservedSystemCPUs, reservedCPUCount, isolatedCPUs, cpuManagerPolicyOptions, topologyManagerPolicy, topologyManagerScope, topologyManagerPolicyOptions, inPlaceResize, scaleDownDelay, alignMemory, metricsAddress, probeSocket, healthAddress, debugAddress, logLevel, logFormat, kubeletCheckpoint, disconnectedTimeout, nriConfigureTimeout, kubernetesAPI, nodeResourceTopology, observeOnly`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if got := errorLines(err); !slices.Equal(got, tt.want) {
				t.Errorf("Parse(%q) error:\n%s\nwant:\n%s", tt.doc, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestParseRejectsMalformedDocuments(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"duplicate key", "logLevel: info\nlogLevel: debug", `line 2: key "logLevel" already set in map`},
		{"syntax error", "logLevel: [", "not valid YAML: yaml: line 1: did not find expected node content"},
		{"list document", "- logLevel", "the document must be a mapping of config keys to values, not a list"},
		{"scalar document", "debug", "the document must be a mapping of config keys to values, not a string"},
		{"string for integer", "reservedCPUCount: two", "reservedCPUCount: got a string, want an integer"},
		{"fraction for integer", "reservedCPUCount: 1.5", "reservedCPUCount: got a number 1.5, want an integer"},
		{"quoted boolean", `inPlaceResize: "false"`, "inPlaceResize: got a string, want true or false"},
		{"list for options", "cpuManagerPolicyOptions: [full-pcpus-only]", "cpuManagerPolicyOptions: got an array, want a mapping of option names to values"},
		{"list as option value", "cpuManagerPolicyOptions: {full-pcpus-only: [true]}", `cpuManagerPolicyOptions.full-pcpus-only: got an array, want a string such as "true"`},
		{"mapping for a string", "logLevel: {level: debug}", "logLevel: got an object, want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error = %v, want it to contain %q", tt.doc, err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("logLevel: debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("logLevel: loud\npluginIndex: \"1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	c, err := Load(good)
	if err != nil || c.LogLevel != logrus.DebugLevel {
		t.Errorf("Load(good) = %+v, %v; want logLevel debug", c, err)
	}

	_, err = Load(bad)
	wantBad := []string{
		"config file " + bad + " is invalid:",
		`pluginIndex: "1" is not two digits 00-99; write it quoted, e.g. "09"`,
		`logLevel: "loud" is not one of trace, debug, info, warn, error`,
	}
	if got := errorLines(err); !slices.Equal(got, wantBad) {
		t.Errorf("Load(bad) error:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantBad, "\n"))
	}

	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) error = %v, want a not-exist error naming the file", err)
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	configs := []*Config{Default()}
	for _, doc := range []string{
		"reservedCPUCount: 3",
		`reservedSystemCPUs: ""`,
		`reservedSystemCPUs: "0,4-7"`,
		`cpuManagerPolicyOptions: {full-pcpus-only: "true", strict-cpu-reservation: "true"}`,
		`topologyManagerPolicyOptions: {prefer-closest-numa-nodes: "true", max-allowable-numa-nodes: "3"}`,
		"topologyManagerPolicy: single-numa-node\nlogLevel: warn\nmetricsAddress: \"\"\nkubeletCheckpoint: \"\"\npluginIndex: \"07\"",
		"inPlaceResize: false\nalignMemory: true",
	} {
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%q): %v", doc, err)
		}
		configs = append(configs, c)
	}
	for _, c := range configs {
		out, err := c.YAML()
		if err != nil {
			t.Fatalf("YAML(%+v): %v", c, err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(YAML(%+v)): %v\n%s", c, err, out)
		}
		requireSame(t, back, c)
		if !reflect.DeepEqual(back.ReservedSystemCPUs.List(), c.ReservedSystemCPUs.List()) {
			t.Errorf("reserved CPUs %v came back as %v", c.ReservedSystemCPUs, back.ReservedSystemCPUs)
		}
	}
}

func TestYAMLWritesEveryKey(t *testing.T) {
	out, err := Default().YAML()
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if d.value("reservedSystemCPUs").IsNil() || d.value("cpuManagerPolicyOptions").Len() != len(cpuallocator.StaticPolicyOptionNames()) || d.value("topologyManagerPolicyOptions").Len() != 2 {
		t.Errorf("YAML() leaves keys or options out:\n%s", out)
	}
	for _, k := range schemaKeys() {
		if !strings.Contains(string(out), "\n"+k+":") && !strings.HasPrefix(string(out), k+":") {
			t.Errorf("YAML() does not write %s:\n%s", k, out)
		}
	}
}

// The Kubernetes keys: the export needs the API, and its mapping is
// decoded strictly.
func TestParseKubernetesKeys(t *testing.T) {
	c, err := Parse([]byte("kubernetesAPI: true\nnodeResourceTopology: {enabled: true, removeOnExit: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.KubernetesAPI || c.NodeResourceTopology != (NodeResourceTopology{Enabled: true, RemoveOnExit: true}) {
		t.Errorf("parsed %+v", c)
	}
	for doc, want := range map[string]string{
		"kubernetesAPI: false\nnodeResourceTopology: {enabled: true}": "nodeResourceTopology.enabled: the export needs the Kubernetes API",
		"kubernetesAPI: true\nnodeResourceTopology: {enable: true}":   `unknown field "enable"`,
		"kubernetesAPI: true\nnodeResourceTopology: true":             "nodeResourceTopology: got a bool, want a mapping of enabled and removeOnExit",
		"kubernetesAPI: \"yes\"\nnodeResourceTopology: {enabled: no}": `kubernetesAPI: got a string, want true or false`,
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error:\n%v\nwant it to contain %q", doc, err, want)
		}
	}
}

// TestDocumentType: the file names its type as Kubernetes components'
// configuration files do; a file without apiVersion and kind (the form
// of earlier releases) is read with a warning; a wrong or half type is
// refused.
func TestDocumentType(t *testing.T) {
	header := "apiVersion: " + APIVersion + "\nkind: " + Kind + "\n"
	for _, tc := range []struct {
		name, doc string
		warning   bool
		err       string
	}{
		{"typed", header + "logLevel: debug\n", false, ""},
		{"typed, nothing else", header, false, ""},
		{"untyped (earlier releases)", "logLevel: debug\n", true, ""},
		{"empty", "", false, ""},
		{"another version", "apiVersion: config.nri-cpumanager.io/v2\nkind: " + Kind + "\n", false, `apiVersion: got "config.nri-cpumanager.io/v2", want "config.nri-cpumanager.io/v1alpha1"`},
		{"another kind", "apiVersion: " + APIVersion + "\nkind: KubeletConfiguration\n", false, `kind: got "KubeletConfiguration", want "PluginConfiguration"`},
		{"half a type", "apiVersion: " + APIVersion + "\nlogLevel: debug\n", false, "apiVersion and kind go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := ParseWithWarnings([]byte(tc.doc))
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if (len(warnings) > 0) != tc.warning {
				t.Errorf("warnings %q, want some: %v", warnings, tc.warning)
			}
			if strings.Contains(tc.doc, "logLevel") && c.LogLevel.String() != "debug" {
				t.Errorf("logLevel %s, want debug", c.LogLevel)
			}
		})
	}
	out, err := Default().YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, warnings, err := ParseWithWarnings(out); err != nil || len(warnings) > 0 || !strings.HasPrefix(string(out), header) {
		t.Errorf("the printed configuration does not read back typed: %v %q\n%s", err, warnings, out)
	}
}
