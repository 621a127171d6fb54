package placement

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// Kubelet decides placements with the kubelet's static policy: Allocate of
// a Guaranteed pod's container on a state whose shared pool is the free
// CPUs, with the NUMA affinity the topology manager would hand it.
type Kubelet struct {
	policy cpumanager.Policy
	state  state.State
	store  *affinityStore
	pods   map[int]*v1.Pod
}

// NewKubelet builds the kubelet's static policy with the given
// cpuManagerPolicyOptions and no reserved CPUs. Alpha options need the
// CPUManagerPolicyAlphaOptions feature gate enabled by the caller.
func NewKubelet(m *Machine, options map[string]string) (*Kubelet, error) {
	store := &affinityStore{}
	p, err := cpumanager.NewStaticPolicy(logr.Discard(), m.Kubelet, 0, cpuset.New(), store, options)
	if err != nil {
		return nil, fmt.Errorf("kubelet static policy with %v: %w", options, err)
	}
	s := state.NewMemoryState(logr.Discard())
	if err := p.Start(logr.Discard(), s); err != nil {
		return nil, fmt.Errorf("starting the kubelet static policy: %w", err)
	}
	return &Kubelet{policy: p, state: s, store: store, pods: map[int]*v1.Pod{}}, nil
}

// Decide returns the CPUs the kubelet gives a new container of n CPUs when
// free are the unassigned CPUs. A zero affinity means none.
func (k *Kubelet) Decide(free cpuset.CPUSet, n int, affinity cpuallocator.NodeMask) (cpuset.CPUSet, error) {
	k.store.hint = topologymanager.TopologyHint{}
	if affinity != 0 {
		mask, err := bitmask.NewBitMask(affinity.Nodes()...)
		if err != nil {
			return cpuset.New(), err
		}
		k.store.hint = topologymanager.TopologyHint{NUMANodeAffinity: mask, Preferred: true}
	}
	pod := k.pod(n)
	k.state.SetDefaultCPUSet(free)
	if err := k.policy.Allocate(logr.Discard(), k.state, pod, &pod.Spec.Containers[0]); err != nil {
		return cpuset.New(), err
	}
	cpus, ok := k.state.GetCPUSet(string(pod.UID), pod.Spec.Containers[0].Name)
	if !ok {
		return cpuset.New(), fmt.Errorf("kubelet allocated nothing for %d CPUs", n)
	}
	k.state.Delete(string(pod.UID), pod.Spec.Containers[0].Name)
	return cpus, nil
}

// pod returns a Guaranteed pod of one container requesting n CPUs; one
// per size, reused (the policy keeps nothing of a pod whose container
// left the state).
func (k *Kubelet) pod(n int) *v1.Pod {
	if p, ok := k.pods[n]; ok {
		return p
	}
	res := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(n), resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse("1Gi"),
	}
	p := &v1.Pod{}
	p.Name = "pod-" + strconv.Itoa(n)
	p.UID = types.UID("uid-" + strconv.Itoa(n))
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}
	k.pods[n] = p
	return p
}

// affinityStore is the topology manager as the static policy sees it: the
// affinity of the container being allocated.
type affinityStore struct{ hint topologymanager.TopologyHint }

func (s *affinityStore) GetAffinity(string, string) topologymanager.TopologyHint { return s.hint }
func (s *affinityStore) GetPolicy() topologymanager.Policy                       { return topologymanager.NewNonePolicy() }
func (s *affinityStore) Name() string                                            { return "placement" }

// Ours decides placements with the plugin's allocator, configured from the
// same cpuManagerPolicyOptions through the plugin's configuration.
type Ours struct {
	alloc *cpuallocator.Allocator
}

// NewOurs parses the options as the plugin's configuration file does and
// builds the allocator the plugin would run with.
func NewOurs(m *Machine, options map[string]string) (*Ours, error) {
	var doc strings.Builder
	doc.WriteString("cpuManagerPolicyOptions:\n")
	for _, name := range slices.Sorted(maps.Keys(options)) {
		fmt.Fprintf(&doc, "  %s: %q\n", name, options[name])
	}
	cfg, err := config.Parse([]byte(doc.String()))
	if err != nil {
		return nil, fmt.Errorf("plugin configuration with %v: %w", options, err)
	}
	opts, tmOpts := cfg.CPUManagerPolicyOptions, cfg.TopologyManagerPolicyOptions
	alloc, err := cpuallocator.NewAllocator(m.Ours, opts, tmOpts)
	if err != nil {
		return nil, err
	}
	return &Ours{alloc: alloc}, nil
}

// Decide returns the CPUs the plugin gives a new container of n CPUs.
func (o *Ours) Decide(free cpuset.CPUSet, n int, affinity cpuallocator.NodeMask) (cpuset.CPUSet, error) {
	return o.alloc.Allocate(free, n, affinity)
}

// Affinity returns the NUMA affinity a topology manager would choose for n
// CPUs out of free, as the plugin computes it: its best hint, or none.
func (o *Ours) Affinity(free cpuset.CPUSet, n int) cpuallocator.NodeMask {
	if hints := o.alloc.NUMAHints(free, cpuset.New(), n); len(hints) > 0 {
		return hints[0].Nodes
	}
	return 0
}
