package e2etest

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// scenarioMemory is the memory request and limit of a Guaranteed
// scenario container without one: the scenario package's default.
const scenarioMemory = "256Mi"

// apiPods returns, for each sandbox a scenario runs — each RunPod of its
// runner, in the order it calls them — the pod the Kubernetes API shows
// for it, or nil when the scenario does not know the pod's spec:
//
//   - a pod step's pod: its containers in the order of the step, an init
//     container as an init container, a sidecar as an init container with
//     restartPolicy Always, the others as app containers;
//   - a pod that runs at its first creation, when one of its creations
//     (until the pod is removed) names a container's role: every
//     container its creations name, with the role and the CPU of its
//     first creation (app when it names none), as the whole pod exists in
//     the API before the kubelet runs its sandbox;
//
// each with the resources of its pod's QoS class (a Guaranteed container's
// CPU and the scenario's default memory as request and limit, a
// Burstable one's CPU request and limit), its QoS class in the status and
// the phase Running, bound to node.
func apiPods(f *scenario.File, node string) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	// created are the pods that run at their first creation, by the index
	// of their sandbox: their QoS class and the containers their
	// creations name.
	type creation struct {
		pod, qos   string
		containers []scenario.SpecContainerStep
		limits     map[string]string // Burstable CPU limits
		roles      bool
	}
	created := map[int]*creation{}
	live := map[string]int{} // pod name → index of its sandbox
	for i, s := range f.Steps {
		switch {
		case s.Pod != nil:
			if _, ok := live[s.Pod.Name]; ok {
				return nil, fmt.Errorf("step %d: pod %s runs already (a pod step comes before its containers)", i+1, s.Pod.Name)
			}
			p, err := specPod(s.Pod.Name, s.Pod.QoS, s.Pod.Containers, nil, node)
			if err != nil {
				return nil, fmt.Errorf("step %d: %w", i+1, err)
			}
			live[s.Pod.Name] = len(pods)
			pods = append(pods, p)
		case s.Create != nil:
			c := s.Create
			idx, ok := live[c.Pod]
			if !ok {
				idx = len(pods)
				live[c.Pod] = idx
				pods = append(pods, nil)
				created[idx] = &creation{pod: c.Pod, qos: c.QoS, limits: map[string]string{}}
			}
			cr := created[idx]
			if cr == nil || slices.ContainsFunc(cr.containers, func(sc scenario.SpecContainerStep) bool { return sc.Name == c.Container }) {
				continue // a pod step's pod, or a container created again
			}
			cr.containers = append(cr.containers, scenario.SpecContainerStep{Name: c.Container, Role: c.Role, CPU: c.CPU})
			cr.limits[c.Container] = c.CPULimit
			cr.roles = cr.roles || c.Role != ""
		case s.RemovePod != "":
			delete(live, s.RemovePod)
		}
	}
	for idx, cr := range created {
		if !cr.roles {
			continue
		}
		p, err := specPod(cr.pod, cr.qos, cr.containers, cr.limits, node)
		if err != nil {
			return nil, err
		}
		pods[idx] = p
	}
	return pods, nil
}

// specPod returns the pod named name of QoS class qos (guaranteed by
// default) with containers; limits are the Burstable containers' CPU
// limits, by name.
func specPod(name, qos string, containers []scenario.SpecContainerStep, limits map[string]string, node string) (*corev1.Pod, error) {
	if qos == "" {
		qos = "guaranteed"
	}
	kp, err := scenario.KubeletPod(name, qos)
	if err != nil {
		return nil, err
	}
	class := map[string]corev1.PodQOSClass{"guaranteed": corev1.PodQOSGuaranteed, "burstable": corev1.PodQOSBurstable, "besteffort": corev1.PodQOSBestEffort}[qos]
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: kp.Name, Namespace: kp.Namespace, UID: types.UID(kp.UID)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: class},
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range containers {
		res, err := specResources(qos, c.CPU, limits[c.Name])
		if err != nil {
			return nil, fmt.Errorf("pod %s container %s: %w", name, c.Name, err)
		}
		ctr := corev1.Container{Name: c.Name, Image: "scenario", Resources: res}
		switch c.Role {
		case "init":
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, ctr)
		case "sidecar":
			ctr.RestartPolicy = &always
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, ctr)
		case "", "app":
			pod.Spec.Containers = append(pod.Spec.Containers, ctr)
		default:
			return nil, fmt.Errorf("pod %s container %s: unknown role %q (want init, sidecar or app)", name, c.Name, c.Role)
		}
	}
	return pod, nil
}

// specResources returns a container's resources in the spec of a pod of
// QoS class qos, for a CPU (request, and limit when Guaranteed) and a
// Burstable container's CPU limit.
func specResources(qos, cpu, limit string) (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	quantity := func(s string) (resource.Quantity, bool, error) {
		if s == "" {
			return resource.Quantity{}, false, nil
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return q, false, fmt.Errorf("CPU %q: %w", s, err)
		}
		return q, true, nil
	}
	req, hasReq, err := quantity(cpu)
	if err != nil {
		return r, err
	}
	switch qos {
	case "guaranteed":
		r.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(scenarioMemory)}
		if hasReq {
			r.Requests[corev1.ResourceCPU] = req
		}
		r.Limits = r.Requests.DeepCopy()
	case "burstable":
		if hasReq {
			r.Requests = corev1.ResourceList{corev1.ResourceCPU: req}
		}
		lim, hasLim, err := quantity(limit)
		if err != nil {
			return r, err
		}
		if hasLim {
			r.Limits = corev1.ResourceList{corev1.ResourceCPU: lim}
		}
	}
	return r, nil
}
