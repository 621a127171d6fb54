package plugin

import (
	"time"

	"github.com/containerd/nri/pkg/api"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// API is what the plugin takes from and gives to the Kubernetes API when
// it watches it (the command wires it in; nil without the API, and the
// plugin then works on NRI alone). Its methods must not block for long:
// the plugin calls them from its handlers (PodSpec outside its lock).
type API interface {
	// PodSpec returns what the spec of pod podUID asks for each of its
	// containers, once the API server's view of the pod asks for a CPU
	// limit of totalMilli in all (the totals the runtime just sent);
	// false when that view does not come within wait.
	PodSpec(podUID string, totalMilli int64, wait time.Duration) (policy.PodSpec, bool)
	// ContainerSpec is PodSpec for a resize of one container: it waits for
	// a view of the pod whose spec asks container for a CPU limit of
	// limitMilli.
	ContainerSpec(podUID, container string, limitMilli int64, wait time.Duration) (policy.PodSpec, bool)
	// PodActive reports whether the API says pod podUID is active (it
	// lists the pod, not terminal), or cannot say (its view is not synced
	// or failing): then the plugin does not end a pod on its own.
	PodActive(podUID string) bool
	// PodInfo returns what the spec of pod podUID says of its containers
	// (their roles, the kubelet's exclusive CPU need, the containers in
	// the kubelet's order), from what the API server last said, waiting
	// at most wait for the pod to be known; false when it is not.
	PodInfo(podUID string, wait time.Duration) (policy.PodInfo, bool)
	// Refused reports a refused request of a pod (container "" for a
	// pod-level one; event is the NRI event refused: CreateContainer,
	// UpdateContainer, UpdatePodSandbox): an event on the pod.
	Refused(pod policy.Pod, container, event string, r *policy.Refusal)
	// Resized reports a resize applied to a container.
	Resized(pod policy.Pod, container string, before, after cpuset.CPUSet)
	// Changed says that the exclusive CPUs changed (Topology).
	Changed()
}

// podSpecWait bounds how long UpdatePodSandbox waits for the API server's
// view of a pod to catch up with the totals the runtime sends: the kubelet
// writes the pod's resize to the API before it calls the runtime, so the
// watch is usually there first.
const podSpecWait = 300 * time.Millisecond

// Topology returns the NUMA nodes' CPUs with the policy and scope that
// place them, read together (a reload may change the policy).
func (p *Plugin) Topology() policy.TopologyView {
	p.mu.Lock()
	pol := p.policy
	free := pol.Free(p.model)
	p.mu.Unlock()
	return pol.TopologyView(free)
}

// podSpec asks the API for a pod's spec for an UpdatePodSandbox, outside
// the plugin's lock; nil without the API or when it does not answer.
func (p *Plugin) podSpec(podUID string, totalMilli int64) policy.PodSpec {
	if p.opts.API == nil || podUID == "" || totalMilli == 0 {
		return nil
	}
	spec, ok := p.opts.API.PodSpec(podUID, totalMilli, podSpecWait)
	if !ok {
		return nil
	}
	return spec
}

// resizeSpec asks the API for a pod's spec for a CPU change of one of its
// containers (an UpdateContainer), outside the plugin's lock: a resize
// whose pod total does not change sends no UpdatePodSandbox, and its
// first request is a decrease, where the whole resize is decided; and the
// kubelet's order of a resize's parts is not the one the whole resize
// was admitted in, so a part may need its siblings' parts first (see
// policy.UpdateContainerWithSpec). Nil without the API, for a request
// that does not change the CPU limit, or when the API does not answer.
func (p *Plugin) resizeSpec(pod *api.PodSandbox, ctr *api.Container, requested policy.Resources) policy.PodSpec {
	if p.opts.API == nil {
		return nil
	}
	current := boundedResources(ctr.GetLinux().GetResources(), nil)
	want := policy.CPULimitMilli(policy.MergeResources(current, requested))
	if want == 0 || want == policy.CPULimitMilli(current) {
		return nil
	}
	uid, name := bounded(pod.GetUid(), maxUIDLen), bounded(ctr.GetName(), maxNameLen)
	if uid == "" || name == "" {
		return nil
	}
	spec, ok := p.opts.API.ContainerSpec(uid, name, want, podSpecWait)
	if !ok {
		return nil
	}
	return spec
}

// podInfo returns what the spec of a pod in the Kubernetes API says of
// its containers, when the plugin watches the API and knows the pod
// (waiting at most wait for it); the zero PodInfo, which says nothing,
// otherwise. Called outside the plugin's lock.
func (p *Plugin) podInfo(pod policy.Pod, wait time.Duration) policy.PodInfo {
	if p.opts.API == nil || pod.UID == "" {
		return policy.PodInfo{}
	}
	info, _ := p.opts.API.PodInfo(pod.UID, wait)
	return info
}

// admissionWait is how long RunPodSandbox waits for the Kubernetes API's
// view of a Guaranteed pod it does not know yet, to admit it whole: the
// kubelet admitted the pod from the API server before it asked for the
// sandbox, so the watch usually has it already. Other pods have nothing
// to admit (no container of theirs is pinned), and a static pod's mirror
// comes only later (its containers are then decided one by one).
func admissionWait(pod policy.Pod) time.Duration {
	if pod.QoS() != policy.QoSGuaranteed {
		return 0
	}
	return podSpecWait
}

// EndPod is told by the Kubernetes API that a pod is terminal or deleted:
// its CPUs go back to the shared pool once none of its containers runs,
// as the kubelet's static policy gives them back (removeStaleState).
func (p *Plugin) EndPod(podUID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.policy.EndPod(p.model, podUID); d.Model != p.model {
		p.apply("PodEnded", d)
	}
}

// cpusetChanged tells the API that the exclusive CPUs may have changed.
func (p *Plugin) cpusetChanged() {
	if p.opts.API != nil {
		p.opts.API.Changed()
	}
}
