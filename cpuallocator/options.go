package cpuallocator

import "fmt"

// Kubelet names of the static policy options, for messages.
const (
	optFullPCPUsOnly             = "full-pcpus-only"
	optDistributeCPUsAcrossNUMA  = "distribute-cpus-across-numa"
	optDistributeCPUsAcrossCores = "distribute-cpus-across-cores"
)

// defaultMaxAllowableNUMANodes is the kubelet's max-allowable-numa-nodes
// default.
const defaultMaxAllowableNUMANodes = 8

func (o StaticPolicyOptions) validate() error {
	if o.FullPCPUsOnly && o.DistributeCPUsAcrossCores {
		return fmt.Errorf("%s and %s cannot be used together: %w", optFullPCPUsOnly, optDistributeCPUsAcrossCores, ErrOptions)
	}
	if o.DistributeCPUsAcrossCores && o.DistributeCPUsAcrossNUMA {
		return fmt.Errorf("%s and %s cannot be used together: %w", optDistributeCPUsAcrossCores, optDistributeCPUsAcrossNUMA, ErrOptions)
	}
	return nil
}

func (o TopologyOptions) validate() error {
	if o.MaxAllowableNUMANodes < 0 {
		return fmt.Errorf("max-allowable-numa-nodes is %d, it must not be negative: %w", o.MaxAllowableNUMANodes, ErrOptions)
	}
	return nil
}

// maxNodes returns max-allowable-numa-nodes with the default applied.
func (o TopologyOptions) maxNodes() int {
	if o.MaxAllowableNUMANodes == 0 {
		return defaultMaxAllowableNUMANodes
	}
	return o.MaxAllowableNUMANodes
}
