package placement

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	pluginstate "github.com/nri-cpumanager/nri-cpumanager/state"
)

// TopologyPolicies are the topology manager policies the admission with
// devices is compared under (none ignores devices on both sides).
var TopologyPolicies = []string{
	topologymanager.PolicySingleNumaNode,
	topologymanager.PolicyRestricted,
	topologymanager.PolicyBestEffort,
}

// deviceResource is the extended resource of the fake device plugin.
const deviceResource = "example.com/device"

// Admission is what one side does with a new pinned container whose
// devices are on some NUMA nodes: place it on CPUs, or refuse it.
type Admission struct {
	Admitted bool
	// CPUs are its CPUs when admitted.
	CPUs cpuset.CPUSet
	// Affinity is the NUMA affinity the kubelet's topology manager merged
	// and its static policy allocated in (nil: none); the kubelet's side
	// only.
	Affinity bitmask.BitMask
	// Why says why it was refused.
	Why string
}

func (a Admission) String() string {
	if !a.Admitted {
		return "refused (" + a.Why + ")"
	}
	if a.Affinity != nil {
		return fmt.Sprintf("CPUs %s (affinity %v)", a.CPUs, a.Affinity.GetBits())
	}
	return "CPUs " + a.CPUs.String()
}

// DeviceKubelet admits a Guaranteed pod of one container as the kubelet
// does when its CPU manager policy is static: its topology manager
// (container scope) merges the hints of two providers, the static policy
// on the free CPUs and a device plugin whose devices are allocated already
// (it hints their NUMA nodes, preferred), and when it admits the pod the
// static policy allocates in the merged affinity. The memory manager
// (policy None) gives no hint and is left out.
type DeviceKubelet struct {
	manager  topologymanager.Manager
	cpus     *CPUProvider
	devices  *deviceProvider
	reserved cpuset.CPUSet
	pods     map[int]*v1.Pod
}

// NewDeviceKubelet builds the kubelet's topology manager under tmPolicy
// with its static CPU manager policy (no option), reserved as its
// reservedSystemCPUs.
func NewDeviceKubelet(m *Machine, tmPolicy string, reserved cpuset.CPUSet) (*DeviceKubelet, error) {
	tm, err := topologymanager.NewManager(m.Info.Topology, tmPolicy, topologymanager.ContainerTopologyScope, nil)
	if err != nil {
		return nil, fmt.Errorf("kubelet topology manager %s: %w", tmPolicy, err)
	}
	p, err := cpumanager.NewStaticPolicy(logr.Discard(), m.Kubelet, reserved.Size(), reserved, tm, nil)
	if err != nil {
		return nil, fmt.Errorf("kubelet static policy: %w", err)
	}
	s := state.NewMemoryState(logr.Discard())
	if err := p.Start(logr.Discard(), s); err != nil {
		return nil, fmt.Errorf("starting the kubelet static policy: %w", err)
	}
	k := &DeviceKubelet{manager: tm, cpus: &CPUProvider{Policy: p, State: s}, devices: &deviceProvider{},
		reserved: reserved, pods: map[int]*v1.Pod{}}
	// The kubelet's order: the CPU manager, (the memory manager,) the
	// device manager.
	tm.AddHintProvider(logr.Discard(), k.cpus)
	tm.AddHintProvider(logr.Discard(), k.devices)
	return k, nil
}

// Admit admits a container of n CPUs whose devices are on the NUMA nodes
// devices when free are the CPUs no container holds (the reserved ones
// are in the shared pool, never free).
func (k *DeviceKubelet) Admit(free cpuset.CPUSet, n int, devices cpuallocator.NodeMask) (Admission, error) {
	mask, err := bitmask.NewBitMask(devices.Nodes()...)
	if err != nil {
		return Admission{}, err
	}
	k.devices.hint = topologymanager.TopologyHint{NUMANodeAffinity: mask, Preferred: true}
	k.cpus.State.SetDefaultCPUSet(free.Union(k.reserved))
	pod := k.pod(n)
	uid, name := string(pod.UID), pod.Spec.Containers[0].Name
	res := k.manager.Admit(&lifecycle.PodAdmitAttributes{Pod: pod})
	if !res.Admit {
		return Admission{Why: res.Reason}, nil
	}
	cpus, ok := k.cpus.State.GetCPUSet(uid, name)
	if !ok {
		return Admission{}, fmt.Errorf("kubelet admitted %d CPUs and allocated none", n)
	}
	k.cpus.State.Delete(uid, name)
	return Admission{Admitted: true, CPUs: cpus, Affinity: k.manager.GetAffinity(uid, name).NUMANodeAffinity}, nil
}

// pod returns a Guaranteed pod of one container requesting n CPUs and one
// device; one per size, reused (its allocation is deleted after each
// admission, and each admission sets its affinity again).
func (k *DeviceKubelet) pod(n int) *v1.Pod {
	if p, ok := k.pods[n]; ok {
		return p
	}
	res := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(n), resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse("1Gi"),
		deviceResource:    resource.MustParse("1"),
	}
	p := &v1.Pod{}
	p.Name = "pod-" + strconv.Itoa(n)
	p.UID = types.UID("uid-" + strconv.Itoa(n))
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}
	k.pods[n] = p
	return p
}

// CPUProvider is the kubelet's CPU manager as the topology manager sees
// it: the static policy on its state.
type CPUProvider struct {
	Policy cpumanager.Policy
	State  state.State
}

// GetTopologyHints is the static policy's, on State.
func (p *CPUProvider) GetTopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	return p.Policy.GetTopologyHints(logr.Discard(), p.State, pod, c)
}

// GetPodTopologyHints is the static policy's, on State.
func (p *CPUProvider) GetPodTopologyHints(pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	return p.Policy.GetPodTopologyHints(logr.Discard(), p.State, pod)
}

// Allocate is the static policy's, on State.
func (p *CPUProvider) Allocate(pod *v1.Pod, c *v1.Container) error {
	return p.Policy.Allocate(logr.Discard(), p.State, pod, c)
}

// AllocatePod is the static policy's, on State.
func (p *CPUProvider) AllocatePod(pod *v1.Pod) error {
	return p.Policy.AllocatePod(logr.Discard(), p.State, pod)
}

// deviceProvider is a device plugin's resource whose devices the pod holds
// already: the device manager regenerates their hint, their NUMA nodes,
// and has nothing left to allocate.
type deviceProvider struct{ hint topologymanager.TopologyHint }

func (p *deviceProvider) GetTopologyHints(*v1.Pod, *v1.Container) map[string][]topologymanager.TopologyHint {
	return map[string][]topologymanager.TopologyHint{deviceResource: {p.hint}}
}

func (p *deviceProvider) GetPodTopologyHints(*v1.Pod) map[string][]topologymanager.TopologyHint {
	return map[string][]topologymanager.TopologyHint{deviceResource: {p.hint}}
}

func (p *deviceProvider) Allocate(*v1.Pod, *v1.Container) error { return nil }
func (p *deviceProvider) AllocatePod(*v1.Pod) error             { return nil }

// DevicePlugin creates the same container with the plugin's policy under
// the same topology manager policy (container scope, no option), its
// devices' NUMA nodes in Container.DeviceNodes, on a model whose free
// CPUs are the same.
type DevicePlugin struct {
	policy   *policy.Policy
	reserved cpuset.CPUSet
	pod      policy.Pod
}

// NewDevicePlugin builds the plugin's policy under tmPolicy with reserved
// as its reserved CPUs.
func NewDevicePlugin(m *Machine, tmPolicy string, reserved cpuset.CPUSet) (*DevicePlugin, error) {
	tp, err := cpuallocator.ParseTopologyPolicy(tmPolicy)
	if err != nil {
		return nil, err
	}
	alloc, err := cpuallocator.NewAllocator(m.Ours, cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{})
	if err != nil {
		return nil, err
	}
	p, err := policy.New(alloc, policy.Options{Reserved: reserved, TopologyPolicy: tp, TopologyScope: cpuallocator.ScopeContainer})
	if err != nil {
		return nil, err
	}
	pod, err := scenario.KubeletPod("pod", "guaranteed")
	if err != nil {
		return nil, err
	}
	return &DevicePlugin{policy: p, reserved: reserved, pod: pod}, nil
}

// Admit creates a container of n CPUs whose devices are on the NUMA nodes
// devices when free are the CPUs no container holds: the model's shared
// pool is free and the reserved CPUs, nothing else is free.
func (o *DevicePlugin) Admit(free cpuset.CPUSet, n int, devices cpuallocator.NodeMask) (Admission, error) {
	m := policy.NewModel(pluginstate.New(free.Union(o.reserved)))
	c := policy.Container{ID: "ctr", Name: "c", Pod: o.pod, DeviceNodes: devices,
		Resources: scenario.KubeletResources("guaranteed", int64(n)*1000, int64(n)*1000, 1<<30)}
	d, err := o.policy.CreateContainer(m, c)
	if r, ok := policy.AsRefusal(err); ok {
		return Admission{Why: string(r.Reason)}, nil
	}
	if err != nil {
		return Admission{}, err
	}
	placed := d.After.CPUSet()
	if !d.Exclusive || placed.Size() != n || !placed.IsSubsetOf(free) {
		return Admission{}, errors.New("the plugin placed " + placed.String() + " out of free " + free.String())
	}
	return Admission{Admitted: true, CPUs: placed}, nil
}
