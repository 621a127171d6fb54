package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// staticPolicyOptions maps the kubelet's cpuManagerPolicyOptions names to
// the fields of StaticPolicyOptions. It is read-only.
var staticPolicyOptions = []struct {
	name  string
	field func(*StaticPolicyOptions) *bool
}{
	{"full-pcpus-only", func(o *StaticPolicyOptions) *bool { return &o.FullPCPUsOnly }},
	{"distribute-cpus-across-numa", func(o *StaticPolicyOptions) *bool { return &o.DistributeCPUsAcrossNUMA }},
	{"align-by-socket", func(o *StaticPolicyOptions) *bool { return &o.AlignBySocket }},
	{"distribute-cpus-across-cores", func(o *StaticPolicyOptions) *bool { return &o.DistributeCPUsAcrossCores }},
	{"strict-cpu-reservation", func(o *StaticPolicyOptions) *bool { return &o.StrictCPUReservation }},
	{"prefer-align-cpus-by-uncorecache", func(o *StaticPolicyOptions) *bool { return &o.PreferAlignByUncoreCache }},
}

// Names of the topology manager policy options.
const (
	optPreferClosestNUMANodes = "prefer-closest-numa-nodes"
	optMaxAllowableNUMANodes  = "max-allowable-numa-nodes"
)

// parseStaticPolicyOptions turns the cpuManagerPolicyOptions map into typed
// options; options not in the map are false. Errors name key.option.
func parseStaticPolicyOptions(key string, raw map[string]string) (StaticPolicyOptions, []error) {
	var opts StaticPolicyOptions
	var errs []error
	names := make([]string, len(staticPolicyOptions))
	for i, o := range staticPolicyOptions {
		names[i] = o.name
	}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		i := slices.Index(names, name)
		if i < 0 {
			errs = append(errs, fmt.Errorf("%s: %w", key, notOneOf(name, names)))
			continue
		}
		b, err := parseBoolOption(raw[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", key, name, err))
			continue
		}
		*staticPolicyOptions[i].field(&opts) = b
	}
	return opts, errs
}

// asMap returns every option with its value, in the file's notation.
func (o StaticPolicyOptions) asMap() map[string]string {
	m := make(map[string]string, len(staticPolicyOptions))
	for _, opt := range staticPolicyOptions {
		m[opt.name] = strconv.FormatBool(*opt.field(&o))
	}
	return m
}

// parseTopologyOptions turns the topologyManagerPolicyOptions map into
// typed options; options not in the map keep their defaults. Errors name
// key.option.
func parseTopologyOptions(key string, raw map[string]string) (TopologyOptions, []error) {
	opts := TopologyOptions{MaxAllowableNUMANodes: DefaultMaxAllowableNUMANodes}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		var err error
		switch name {
		case optPreferClosestNUMANodes:
			opts.PreferClosestNUMANodes, err = parseBoolOption(raw[name])
		case optMaxAllowableNUMANodes:
			opts.MaxAllowableNUMANodes, err = parseNUMANodeLimit(raw[name])
		default:
			errs = append(errs, fmt.Errorf("%s: %w", key,
				notOneOf(name, []string{optPreferClosestNUMANodes, optMaxAllowableNUMANodes})))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", key, name, err))
		}
	}
	return opts, errs
}

// asMap returns every option with its value, in the file's notation.
func (o TopologyOptions) asMap() map[string]string {
	return map[string]string{
		optPreferClosestNUMANodes: strconv.FormatBool(o.PreferClosestNUMANodes),
		optMaxAllowableNUMANodes:  strconv.Itoa(o.MaxAllowableNUMANodes),
	}
}
