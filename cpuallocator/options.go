package cpuallocator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// This file is the one place that knows the kubelet's option names: the
// static CPU manager policy options (cpuManagerPolicyOptions), the topology
// manager policy options (topologyManagerPolicyOptions), and the topology
// manager's policy and scope. The configuration parses them with these
// functions, and the allocator and the policy use the typed values as they
// come: a new option is a field and a row of the table below.

// StaticPolicyOptions are the kubelet's static CPU manager policy options,
// each false unless set to "true" in cpuManagerPolicyOptions.
type StaticPolicyOptions struct {
	// FullPCPUsOnly (full-pcpus-only) allocates whole physical cores
	// only: a core is its online CPUs (isolated ones included), so a core
	// with offline siblings is a whole core of fewer CPUs. Sizes must be a
	// multiple of ThreadsPerCore(). A request is refused only when no
	// choice of whole free cores adds up to it (see wholecores.go).
	FullPCPUsOnly             bool
	DistributeCPUsAcrossNUMA  bool // distribute-cpus-across-numa
	AlignBySocket             bool // align-by-socket
	DistributeCPUsAcrossCores bool // distribute-cpus-across-cores
	// StrictCPUReservation (strict-cpu-reservation) keeps the reserved
	// CPUs out of the shared pool too. It does not shape placements: the
	// policy applies it to the pool.
	StrictCPUReservation     bool
	PreferAlignByUncoreCache bool // prefer-align-cpus-by-uncorecache
}

// staticPolicyOptions maps the kubelet's names to the fields, in the
// kubelet's documentation order. It is read-only.
var staticPolicyOptions = []struct {
	name  string
	field func(*StaticPolicyOptions) *bool
}{
	{optFullPCPUsOnly, func(o *StaticPolicyOptions) *bool { return &o.FullPCPUsOnly }},
	{optDistributeCPUsAcrossNUMA, func(o *StaticPolicyOptions) *bool { return &o.DistributeCPUsAcrossNUMA }},
	{"align-by-socket", func(o *StaticPolicyOptions) *bool { return &o.AlignBySocket }},
	{optDistributeCPUsAcrossCores, func(o *StaticPolicyOptions) *bool { return &o.DistributeCPUsAcrossCores }},
	{"strict-cpu-reservation", func(o *StaticPolicyOptions) *bool { return &o.StrictCPUReservation }},
	{"prefer-align-cpus-by-uncorecache", func(o *StaticPolicyOptions) *bool { return &o.PreferAlignByUncoreCache }},
}

// Kubelet names of the options that messages name.
const (
	optFullPCPUsOnly             = "full-pcpus-only"
	optDistributeCPUsAcrossNUMA  = "distribute-cpus-across-numa"
	optDistributeCPUsAcrossCores = "distribute-cpus-across-cores"
	optPreferClosestNUMANodes    = "prefer-closest-numa-nodes"
	optMaxAllowableNUMANodes     = "max-allowable-numa-nodes"
)

// StaticPolicyOptionNames returns the kubelet's names of the static policy
// options, in documentation order.
func StaticPolicyOptionNames() []string {
	names := make([]string, len(staticPolicyOptions))
	for i, o := range staticPolicyOptions {
		names[i] = o.name
	}
	return names
}

// OptionError is a bad value of one option.
type OptionError struct {
	// Option is the option's name.
	Option string
	// Err says what is wrong with its value.
	Err error
}

func (e *OptionError) Error() string { return e.Option + ": " + e.Err.Error() }

func (e *OptionError) Unwrap() error { return e.Err }

// ParseStaticPolicyOptions turns a cpuManagerPolicyOptions map into typed
// options; options not in the map are false. It returns one error per bad
// entry, in name order: an unknown name, or an *OptionError for a value
// that is not a boolean; the combinations the kubelet forbids are checked
// by Validate.
func ParseStaticPolicyOptions(raw map[string]string) (StaticPolicyOptions, []error) {
	var opts StaticPolicyOptions
	var errs []error
	names := StaticPolicyOptionNames()
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		i := slices.Index(names, name)
		if i < 0 {
			errs = append(errs, notOneOf(name, names))
			continue
		}
		b, err := parseBool(raw[name])
		if err != nil {
			errs = append(errs, &OptionError{Option: name, Err: err})
			continue
		}
		*staticPolicyOptions[i].field(&opts) = b
	}
	return opts, errs
}

// Map returns every option with its value, in the kubelet's notation.
func (o StaticPolicyOptions) Map() map[string]string {
	m := make(map[string]string, len(staticPolicyOptions))
	for _, opt := range staticPolicyOptions {
		m[opt.name] = strconv.FormatBool(*opt.field(&o))
	}
	return m
}

// Validate rejects the combinations the kubelet forbids:
// full-pcpus-only with distribute-cpus-across-cores, and
// distribute-cpus-across-cores with distribute-cpus-across-numa.
func (o StaticPolicyOptions) Validate() error {
	if o.FullPCPUsOnly && o.DistributeCPUsAcrossCores {
		return fmt.Errorf("%s and %s cannot be used together: %w", optFullPCPUsOnly, optDistributeCPUsAcrossCores, ErrOptions)
	}
	if o.DistributeCPUsAcrossCores && o.DistributeCPUsAcrossNUMA {
		return fmt.Errorf("%s and %s cannot be used together: %w", optDistributeCPUsAcrossCores, optDistributeCPUsAcrossNUMA, ErrOptions)
	}
	return nil
}

// DefaultMaxAllowableNUMANodes is the kubelet's default of
// max-allowable-numa-nodes.
const DefaultMaxAllowableNUMANodes = 8

// TopologyOptions are the topology manager policy options that shape NUMA
// hints.
type TopologyOptions struct {
	// MaxAllowableNUMANodes bounds the number of NUMA nodes a hint may span
	// (max-allowable-numa-nodes; 0 means DefaultMaxAllowableNUMANodes).
	MaxAllowableNUMANodes int
	// PreferClosestNUMANodes orders hints of equal width by the distance
	// between their nodes (prefer-closest-numa-nodes).
	PreferClosestNUMANodes bool
}

// TopologyOptionNames returns the kubelet's names of the topology manager
// policy options.
func TopologyOptionNames() []string {
	return []string{optPreferClosestNUMANodes, optMaxAllowableNUMANodes}
}

// ParseTopologyOptions turns a topologyManagerPolicyOptions map into typed
// options; options not in the map keep the kubelet's defaults. It returns
// one error per bad entry, in name order: an unknown name, or an
// *OptionError for a bad value.
func ParseTopologyOptions(raw map[string]string) (TopologyOptions, []error) {
	opts := TopologyOptions{MaxAllowableNUMANodes: DefaultMaxAllowableNUMANodes}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		var err error
		switch name {
		case optPreferClosestNUMANodes:
			opts.PreferClosestNUMANodes, err = parseBool(raw[name])
		case optMaxAllowableNUMANodes:
			opts.MaxAllowableNUMANodes, err = parseNUMANodeLimit(raw[name])
		default:
			errs = append(errs, notOneOf(name, TopologyOptionNames()))
			continue
		}
		if err != nil {
			errs = append(errs, &OptionError{Option: name, Err: err})
		}
	}
	return opts, errs
}

// Map returns every option with its value, in the kubelet's notation.
func (o TopologyOptions) Map() map[string]string {
	return map[string]string{
		optPreferClosestNUMANodes: strconv.FormatBool(o.PreferClosestNUMANodes),
		optMaxAllowableNUMANodes:  strconv.Itoa(o.maxNodes()),
	}
}

func (o TopologyOptions) validate() error {
	if o.MaxAllowableNUMANodes < 0 {
		return fmt.Errorf("%s is %d, it must not be negative: %w", optMaxAllowableNUMANodes, o.MaxAllowableNUMANodes, ErrOptions)
	}
	return nil
}

// maxNodes returns max-allowable-numa-nodes with the default applied.
func (o TopologyOptions) maxNodes() int {
	if o.MaxAllowableNUMANodes == 0 {
		return DefaultMaxAllowableNUMANodes
	}
	return o.MaxAllowableNUMANodes
}

// TopologyPolicy is a topology manager policy (topologyManagerPolicy).
type TopologyPolicy string

// The topology manager policies, named as the kubelet names them.
const (
	TopologyNone           TopologyPolicy = "none"
	TopologyBestEffort     TopologyPolicy = "best-effort"
	TopologyRestricted     TopologyPolicy = "restricted"
	TopologySingleNUMANode TopologyPolicy = "single-numa-node"
)

// topologyPolicies lists the topology manager policies.
var topologyPolicies = []TopologyPolicy{TopologyNone, TopologyBestEffort, TopologyRestricted, TopologySingleNUMANode}

// ParseTopologyPolicy accepts the kubelet's topology manager policy names.
func ParseTopologyPolicy(s string) (TopologyPolicy, error) {
	return parseName(s, topologyPolicies)
}

// TopologyPolicyNames returns the names ParseTopologyPolicy accepts.
func TopologyPolicyNames() []string { return nameList(topologyPolicies) }

// TopologyScope is the topology manager's scope (topologyManagerScope):
// what one NUMA affinity is computed for.
type TopologyScope string

// The topology manager scopes, named as the kubelet names them.
const (
	// ScopeContainer aligns each container on its own (the default).
	ScopeContainer TopologyScope = "container"
	// ScopePod aligns all the pinned containers of a pod on one NUMA
	// affinity, computed for the pod's total.
	ScopePod TopologyScope = "pod"
)

var topologyScopes = []TopologyScope{ScopeContainer, ScopePod}

// ParseTopologyScope accepts the kubelet's topology manager scope names.
func ParseTopologyScope(s string) (TopologyScope, error) {
	return parseName(s, topologyScopes)
}

// TopologyScopeNames returns the names ParseTopologyScope accepts.
func TopologyScopeNames() []string { return nameList(topologyScopes) }

// parseName returns the value of names that s spells.
func parseName[T ~string](s string, names []T) (T, error) {
	for _, n := range names {
		if string(n) == s {
			return n, nil
		}
	}
	return "", notOneOf(s, nameList(names))
}

// nameList returns names as strings, in order.
func nameList[T ~string](names []T) []string {
	all := make([]string, len(names))
	for i, n := range names {
		all[i] = string(n)
	}
	return all
}

// parseBool accepts what the kubelet accepts for a boolean policy option
// (strconv.ParseBool).
func parseBool(s string) (bool, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, notOneOf(s, []string{"true", "false"})
	}
	return b, nil
}

// parseNUMANodeLimit accepts an integer ≥ 1.
func parseNUMANodeLimit(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not an integer ≥ 1", s)
	}
	return n, nil
}

func notOneOf(value string, allowed []string) error {
	return fmt.Errorf("%q is not one of %s", value, strings.Join(allowed, ", "))
}
