package lifecycle

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/utils/cpuset"
)

// Kubelet is the kubelet's CPU manager with the static policy, as the
// kubelet drives it in a pod's life (cpu_manager.go): Allocate for every
// init and app container, in the spec's order, when it admits a pod
// (topologyManagerPolicy: none calls it container by container); nothing
// at a container's restart or a sandbox's re-creation (the entries stay);
// removeStaleState at its reconcile, which drops the entries of pods no
// longer active (terminal or deleted) and of names no longer in a spec.
// Its state is in memory and survives what the kubelet's checkpoint
// survives: a restart of the kubelet or of the node.
type Kubelet struct {
	policy cpumanager.Policy
	state  state.State
	// reservedCPUs are never given exclusively.
	reservedCPUs cpuset.CPUSet
	// active are the pods the kubelet runs: admitted, not terminal, not
	// deleted.
	active map[types.UID]*v1.Pod
	// short maps pod UID/name to the CPUs an entry is short (Resize).
	short map[string]int
}

// NewKubelet starts the static policy on topo with the reserved CPUs.
func NewKubelet(topo *topology.CPUTopology, reserved cpuset.CPUSet) (*Kubelet, error) {
	p, err := cpumanager.NewStaticPolicy(logr.Discard(), topo, reserved.Size(), reserved, noAffinity{}, nil)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's static policy: %w", err)
	}
	s := state.NewMemoryState(logr.Discard())
	if err := p.Start(logr.Discard(), s); err != nil {
		return nil, fmt.Errorf("starting the kubelet's static policy: %w", err)
	}
	return &Kubelet{policy: p, state: s, reservedCPUs: reserved, active: map[types.UID]*v1.Pod{}}, nil
}

// Admit allocates the CPUs of a pod's containers, or refuses the pod (the
// kubelet fails it with UnexpectedAdmissionError; its partial allocations
// go at the next reconcile, done here at once).
func (k *Kubelet) Admit(pod *v1.Pod) error {
	k.Reconcile()
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if err := k.policy.Allocate(logr.Discard(), k.state, pod, &c); err != nil {
			k.Reconcile()
			return fmt.Errorf("container %s: %w", c.Name, err)
		}
	}
	k.active[pod.UID] = pod
	return nil
}

// Readmit is the kubelet's start after a restart of its own or of the
// node: every active pod is admitted again, and Allocate finds every
// container in its state ("already present in state, skipping").
func (k *Kubelet) Readmit() error {
	for _, uid := range slices.Sorted(maps.Keys(k.active)) {
		pod := k.active[uid]
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			if err := k.policy.Allocate(logr.Discard(), k.state, pod, &c); err != nil {
				return fmt.Errorf("re-admitting %s/%s: %w", pod.Name, c.Name, err)
			}
		}
	}
	return nil
}

// End makes a pod inactive (terminal, or deleted) and reconciles.
func (k *Kubelet) End(uid types.UID) {
	delete(k.active, uid)
	k.Reconcile()
}

// Reconcile is the CPU manager's removeStaleState.
func (k *Kubelet) Reconcile() {
	for uid, containers := range k.state.GetCPUAssignments() {
		pod := k.active[types.UID(uid)]
		for name := range containers {
			if pod != nil && inSpec(pod, name) {
				continue
			}
			_ = k.policy.RemoveContainer(logr.Discard(), k.state, uid, name)
		}
	}
}

// inSpec reports whether a pod's spec names container name.
func inSpec(pod *v1.Pod, name string) bool {
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if c.Name == name {
			return true
		}
	}
	return false
}

// Entry returns a container's exclusive CPUs, if it has any.
func (k *Kubelet) Entry(uid types.UID, name string) (cpuset.CPUSet, bool) {
	return k.state.GetCPUSet(string(uid), name)
}

// Pool returns the shared pool (the default CPU set).
func (k *Kubelet) Pool() cpuset.CPUSet { return k.state.GetDefaultCPUSet() }

// Held returns every CPU a pod's entries hold.
func (k *Kubelet) Held(uid types.UID) cpuset.CPUSet {
	all := cpuset.New()
	for _, cpus := range k.state.GetCPUAssignments()[string(uid)] {
		all = all.Union(cpus)
	}
	return all
}

// Resize plays on the kubelet's state the resize of a container the
// plugin applied (the kubelet v1.36 refuses a CPU resize of a pinned
// container; KEP-5554 is the plugin's): the entry grows by free CPUs or
// gives back CPUs other than baseline, which its pod's other entries do
// not hold, so that the pools of both stay comparable. A growth the
// kubelet's pool cannot hold (its weaker reuse of init containers' CPUs
// left it smaller than the plugin's) grows as far as it can; Short says
// by how many CPUs the entry is short.
func (k *Kubelet) Resize(uid types.UID, name string, n int, baseline cpuset.CPUSet) error {
	cur, ok := k.Entry(uid, name)
	if !ok {
		return fmt.Errorf("%s/%s has no entry", uid, name)
	}
	key := string(uid) + "/" + name
	if k.short == nil {
		k.short = map[string]int{}
	}
	delete(k.short, key)
	switch {
	case n > cur.Size():
		// The pod's own CPUs no other entry holds (an init container's
		// the kubelet did not reuse) first, as the plugin reuses them.
		free := append(k.unused(uid).Difference(cur).List(), k.Pool().Difference(k.reserved()).List()...)
		if short := n - cur.Size() - len(free); short > 0 {
			k.short[key] = short
			n -= short
		}
		add := cpuset.New(free[:n-cur.Size()]...)
		k.state.SetCPUSet(string(uid), name, cur.Union(add))
		k.state.SetDefaultCPUSet(k.Pool().Difference(add))
	case n < cur.Size():
		extra := cur.Difference(baseline).List()
		if len(extra) < cur.Size()-n {
			return fmt.Errorf("%s/%s: cannot shrink %s to %d keeping %s", uid, name, cur, n, baseline)
		}
		drop := cpuset.New(extra[len(extra)-(cur.Size()-n):]...)
		k.state.SetCPUSet(string(uid), name, cur.Difference(drop))
		siblings := cpuset.New()
		for other, cpus := range k.state.GetCPUAssignments()[string(uid)] {
			if other != name {
				siblings = siblings.Union(cpus)
			}
		}
		k.state.SetDefaultCPUSet(k.Pool().Union(drop.Difference(siblings)))
	}
	return nil
}

// CatchUp grows the entries that are short by the CPUs the kubelet's
// pool gives back since, so that its pool never has room the plugin's
// lacks.
func (k *Kubelet) CatchUp() {
	for _, key := range slices.Sorted(maps.Keys(k.short)) {
		uid, name, _ := strings.Cut(key, "/")
		cur, ok := k.Entry(types.UID(uid), name)
		if !ok || k.active[types.UID(uid)] == nil {
			delete(k.short, key)
			continue
		}
		n := cur.Size() + k.short[key]
		_ = k.Resize(types.UID(uid), name, n, cpuset.New())
	}
}

// Short returns by how many CPUs a container's entry is short of what the
// plugin gave it (Resize).
func (k *Kubelet) Short(uid types.UID, name string) int { return k.short[string(uid)+"/"+name] }

// unused returns the CPUs of a pod's ordinary init containers' entries
// that none of its other entries holds.
func (k *Kubelet) unused(uid types.UID) cpuset.CPUSet {
	pod := k.active[uid]
	inits, others := cpuset.New(), cpuset.New()
	for name, cpus := range k.state.GetCPUAssignments()[string(uid)] {
		if pod != nil && isInit(pod, name) {
			inits = inits.Union(cpus)
		} else {
			others = others.Union(cpus)
		}
	}
	return inits.Difference(others)
}

// isInit reports whether name is an ordinary init container of pod.
func isInit(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy == nil
		}
	}
	return false
}

// reserved are the CPUs never given exclusively.
func (k *Kubelet) reserved() cpuset.CPUSet { return k.reservedCPUs }

// noAffinity is the topology manager with topologyManagerPolicy: none.
type noAffinity struct{}

func (noAffinity) GetAffinity(string, string) topologymanager.TopologyHint {
	return topologymanager.TopologyHint{}
}
func (noAffinity) GetPolicy() topologymanager.Policy { return topologymanager.NewNonePolicy() }
func (noAffinity) Name() string                      { return "none" }

// V1Pod is the pod a spec makes, as the API server holds it (with its
// QoS class in the status, as the API server sets it).
func (s *PodSpec) V1Pod() *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = s.Name, "default", s.UID()
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	if s.Job {
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
	}
	always := v1.ContainerRestartPolicyAlways
	for _, c := range s.Containers {
		vc := v1.Container{Name: c.Name, Resources: s.resources(c.Milli)}
		switch c.Kind {
		case KindApp:
			pod.Spec.Containers = append(pod.Spec.Containers, vc)
		case KindSidecar:
			vc.RestartPolicy = &always
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, vc)
		default:
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, vc)
		}
	}
	if s.OverheadMilli > 0 {
		pod.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(s.OverheadMilli, resource.DecimalSI)}
	}
	pod.Status.QOSClass = v1qos.GetPodQOS(pod)
	pod.Status.Phase = v1.PodRunning
	return pod
}

// UID is the pod's UID.
func (s *PodSpec) UID() types.UID { return types.UID(s.Name + "-uid") }

// resources are a container's resources of milli CPUs in the pod's QoS.
func (s *PodSpec) resources(milli int64) v1.ResourceRequirements {
	mem := resource.MustParse("256Mi")
	cpu := *resource.NewMilliQuantity(milli, resource.DecimalSI)
	switch s.QoS {
	case "guaranteed":
		l := v1.ResourceList{v1.ResourceCPU: cpu, v1.ResourceMemory: mem}
		return v1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
	case "burstable":
		return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: cpu, v1.ResourceMemory: mem}}
	}
	return v1.ResourceRequirements{}
}
