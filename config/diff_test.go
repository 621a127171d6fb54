package config

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

func TestDiffClassifiesEveryKey(t *testing.T) {
	tests := []struct {
		key    string
		change func(*Config)
		want   Changes
	}{
		{"nriSocket", func(c *Config) { c.NRISocket = "/x.sock" }, Changes{Restart: []string{"nriSocket"}}},
		{"pluginName", func(c *Config) { c.PluginName = "other" }, Changes{Restart: []string{"pluginName"}}},
		{"pluginIndex", func(c *Config) { c.PluginIndex = "10" }, Changes{Restart: []string{"pluginIndex"}}},
		{"stateDir", func(c *Config) { c.StateDir = "/s" }, Changes{Restart: []string{"stateDir"}}},
		{"sysfsRoot", func(c *Config) { c.SysfsRoot = "/fixture" }, Changes{Restart: []string{"sysfsRoot"}}},
		{"cgroupfsRoot", func(c *Config) { c.CgroupfsRoot = "/cg" }, Changes{Restart: []string{"cgroupfsRoot"}}},
		{"reservedSystemCPUs", func(c *Config) { c.ReservedSystemCPUs = cpuset.New(0, 1) }, Changes{WithoutExclusive: []string{"reservedSystemCPUs"}}},
		{"reservedCPUCount", func(c *Config) { c.ReservedCPUCount = 2 }, Changes{WithoutExclusive: []string{"reservedCPUCount"}}},
		{"isolatedCPUs", func(c *Config) { c.IsolatedCPUs = IsolatedCPUsExclusive }, Changes{WithoutExclusive: []string{"isolatedCPUs"}}},
		{"cpuManagerPolicyOptions", func(c *Config) { c.CPUManagerPolicyOptions.StrictCPUReservation = true }, Changes{WithoutExclusive: []string{"cpuManagerPolicyOptions"}}},
		{"topologyManagerPolicy", func(c *Config) { c.TopologyManagerPolicy = cpuallocator.TopologyRestricted }, Changes{WithoutExclusive: []string{"topologyManagerPolicy"}}},
		{"topologyManagerScope", func(c *Config) { c.TopologyManagerScope = cpuallocator.ScopePod }, Changes{WithoutExclusive: []string{"topologyManagerScope"}}},
		{"topologyManagerPolicyOptions", func(c *Config) { c.TopologyManagerPolicyOptions.MaxAllowableNUMANodes = 2 }, Changes{WithoutExclusive: []string{"topologyManagerPolicyOptions"}}},
		{"inPlaceResize", func(c *Config) { c.InPlaceResize = false }, Changes{Live: []string{"inPlaceResize"}}},
		{"scaleDownDelay", func(c *Config) { c.ScaleDownDelay = 5 * time.Second }, Changes{Live: []string{"scaleDownDelay"}}},
		{"alignMemory", func(c *Config) { c.AlignMemory = true }, Changes{Live: []string{"alignMemory"}}},
		{"metricsAddress", func(c *Config) { c.MetricsAddress = "" }, Changes{Restart: []string{"metricsAddress"}}},
		{"probeSocket", func(c *Config) { c.ProbeSocket = "" }, Changes{Restart: []string{"probeSocket"}}},
		{"healthAddress", func(c *Config) { c.HealthAddress = ":9103" }, Changes{Restart: []string{"healthAddress"}}},
		{"debugAddress", func(c *Config) { c.DebugAddress = ":9999" }, Changes{Restart: []string{"debugAddress"}}},
		{"logLevel", func(c *Config) { c.LogLevel = logrus.DebugLevel }, Changes{Live: []string{"logLevel"}}},
		{"logFormat", func(c *Config) { c.LogFormat = LogFormatJSON }, Changes{Restart: []string{"logFormat"}}},
		{"kubeletCheckpoint", func(c *Config) { c.KubeletCheckpoint = KubeletCheckpointPath }, Changes{Restart: []string{"kubeletCheckpoint"}}},
		{"disconnectedTimeout", func(c *Config) { c.DisconnectedTimeout = 0 }, Changes{Restart: []string{"disconnectedTimeout"}}},
		{"nriConfigureTimeout", func(c *Config) { c.NRIConfigureTimeout = time.Minute }, Changes{Restart: []string{"nriConfigureTimeout"}}},
		{"kubernetesAPI", func(c *Config) { c.KubernetesAPI = false }, Changes{Restart: []string{"kubernetesAPI"}}},
		{"nodeResourceTopology", func(c *Config) { c.NodeResourceTopology.RemoveOnExit = true }, Changes{Restart: []string{"nodeResourceTopology"}}},
		{"observeOnly", func(c *Config) { c.ObserveOnly = true }, Changes{Restart: []string{"observeOnly"}}},
	}
	var covered []string
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			changed := Default()
			tt.change(changed)
			if got := Diff(Default(), changed); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff after changing %s = %#v, want %#v", tt.key, got, tt.want)
			}
			if got := Diff(changed, Default()); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff back from changed %s = %#v, want %#v", tt.key, got, tt.want)
			}
		})
		covered = append(covered, tt.key)
	}
	if !slices.Equal(covered, schemaKeys()) {
		t.Errorf("test covers %v, schema keys are %v", covered, schemaKeys())
	}
}

func TestDiffRulesMatchSchema(t *testing.T) {
	var names []string
	for _, k := range keys {
		names = append(names, k.name)
	}
	if !slices.Equal(names, schemaKeys()) {
		t.Errorf("Diff knows keys %v, schema has %v", names, schemaKeys())
	}
	if n := reflect.TypeFor[Config]().NumField(); n != len(schemaKeys()) {
		t.Errorf("Config has %d fields, schema has %d keys: a field has no key (or a key no field)", n, len(schemaKeys()))
	}
}

func TestDiffOfEqualConfigsIsEmpty(t *testing.T) {
	a, b := Default(), Default()
	// Equal sets built differently are the same value.
	b.ReservedSystemCPUs = cpuset.New(0).Union(cpuset.New())
	if ch := Diff(a, b); !ch.Empty() || ch.String() != "no change" {
		t.Errorf("Diff of equal configs = %#v (%s)", ch, ch)
	}
}

func TestChangesGroupsSeveralKeys(t *testing.T) {
	changed := Default()
	changed.LogLevel = logrus.TraceLevel
	changed.AlignMemory = true
	changed.ReservedSystemCPUs = cpuset.New(1)
	changed.StateDir = "/elsewhere"
	changed.MetricsAddress = ":1"
	ch := Diff(Default(), changed)
	want := Changes{
		Live:             []string{"alignMemory", "logLevel"},
		WithoutExclusive: []string{"reservedSystemCPUs"},
		Restart:          []string{"stateDir", "metricsAddress"},
	}
	if !reflect.DeepEqual(ch, want) {
		t.Fatalf("Diff = %#v, want %#v", ch, want)
	}
	wantText := "live: alignMemory, logLevel; without exclusive containers: reservedSystemCPUs; at restart: stateDir, metricsAddress"
	if ch.String() != wantText {
		t.Errorf("String() = %q, want %q", ch.String(), wantText)
	}
	if ch.Empty() {
		t.Error("Empty() = true for a non-empty change")
	}
}
