package cpuallocator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

func TestStaticPolicyOptionsValidate(t *testing.T) {
	// Every one of the 32 combinations: the kubelet forbids exactly those
	// with distribute-cpus-across-cores and either full-pcpus-only or
	// distribute-cpus-across-numa.
	for bits := 0; bits < 32; bits++ {
		o := cpuallocator.StaticPolicyOptions{
			FullPCPUsOnly:             bits&1 != 0,
			DistributeCPUsAcrossNUMA:  bits&2 != 0,
			AlignBySocket:             bits&4 != 0,
			DistributeCPUsAcrossCores: bits&8 != 0,
			PreferAlignByUncoreCache:  bits&16 != 0,
		}
		var wantNames []string
		switch {
		case o.DistributeCPUsAcrossCores && o.FullPCPUsOnly:
			wantNames = []string{"full-pcpus-only", "distribute-cpus-across-cores"}
		case o.DistributeCPUsAcrossCores && o.DistributeCPUsAcrossNUMA:
			wantNames = []string{"distribute-cpus-across-cores", "distribute-cpus-across-numa"}
		}
		err := o.Validate()
		if wantNames == nil {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", o, err)
			}
			if _, err := cpuallocator.NewAllocator(topologyOf(t, twoSocketFourNodes), o, cpuallocator.TopologyOptions{}); err != nil {
				t.Errorf("%+v: NewAllocator: %v", o, err)
			}
			continue
		}
		if !errors.Is(err, cpuallocator.ErrOptions) {
			t.Errorf("%+v: got %v, want ErrOptions", o, err)
			continue
		}
		for _, name := range wantNames {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("%+v: error %q does not name %s", o, err, name)
			}
		}
		if _, err := cpuallocator.NewAllocator(topologyOf(t, twoSocketFourNodes), o, cpuallocator.TopologyOptions{}); !errors.Is(err, cpuallocator.ErrOptions) {
			t.Errorf("%+v: NewAllocator accepted forbidden options: %v", o, err)
		}
	}
}

func TestNewAllocatorRejects(t *testing.T) {
	topo := topologyOf(t, twoSocketFourNodes)
	if _, err := cpuallocator.NewAllocator(topo, cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{MaxAllowableNUMANodes: -1}); !errors.Is(err, cpuallocator.ErrOptions) {
		t.Errorf("negative max-allowable-numa-nodes: got %v, want ErrOptions", err)
	}
	if _, err := cpuallocator.NewAllocator(nil, cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{}); !errors.Is(err, cpuallocator.ErrInvalidRequest) {
		t.Errorf("nil topology: got %v, want ErrInvalidRequest", err)
	}
}
