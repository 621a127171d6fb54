package lifecycle

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
)

// Kinds of container, as a pod's spec has them.
const (
	KindInit    = "init"    // an ordinary init container
	KindSidecar = "sidecar" // an init container with restartPolicy: Always
	KindApp     = "app"
)

// ContainerSpec is one container of a pod's spec.
type ContainerSpec struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Milli is the container's CPU request, and its limit in a Guaranteed
	// pod (a Burstable container has no limit; a BestEffort one neither).
	Milli int64 `json:"milli"`
}

// PodSpec is what a life starts a pod with.
type PodSpec struct {
	Name string `json:"name"`
	// QoS is guaranteed, burstable or besteffort.
	QoS string `json:"qos"`
	// Containers are the init containers and sidecars in their order,
	// then the app containers.
	Containers []ContainerSpec `json:"containers"`
	// Job pods (restartPolicy: Never) complete.
	Job bool `json:"job,omitempty"`
	// OverheadMilli is a RuntimeClass's pod overhead.
	OverheadMilli int64 `json:"overheadMilli,omitempty"`
	// SidecarCrashesAtStart: the pod's sidecars exit (code 1) just before
	// its app containers are created, and restart after them.
	SidecarCrashesAtStart bool `json:"sidecarCrashesAtStart,omitempty"`
}

// Operations of a life.
const (
	// OpStart: the kubelet admits a pod and runs its sandbox; without
	// Interleave, its whole start (each init container until it exits 0,
	// the sidecars, the app containers) in the same action, else one
	// step per OpStep.
	OpStart = "start"
	// OpStep is the next step of a pod's start: an init container's
	// creation, its exit 0, a sidecar's creation, an app container's
	// creation (its image pulled).
	OpStep = "step"
	// OpExit: a container exits with Code and stays down until the
	// kubelet re-creates it, its crash-loop back-off over (a restartable
	// container, sidecar or app container of a pod that restarts, exiting
	// 0 too).
	OpExit = "exit"
	// OpCrash: a container exits and the kubelet re-creates it in the
	// same action; RemoveFirst: the GC removes the dead instance first.
	OpCrash           = "crash"
	OpRecreateSandbox = "recreateSandbox" // the pause container dies
	OpCollect         = "collect"         // the container GC: dead containers and old sandboxes
	OpComplete        = "complete"        // a Job's containers exit 0
	OpDelete          = "delete"          // the pod is deleted
	OpResize          = "resize"          // an in-place resize of a container
	OpReboot          = "reboot"          // the node reboots
	// OpRebootDeleting: the node reboots, and the pod is deleted while it
	// is down (the kubelet never admits it again; containerd still lists
	// its sandbox).
	OpRebootDeleting    = "rebootDeleting"
	OpRestartContainerd = "restartContainerd" // containerd restarts, containers keep running
	OpRestartPlugin     = "restartPlugin"     // the plugin restarts
	// OpDeleteWhilePluginDown: the plugin stops, the pod is deleted (its
	// containers and sandboxes removed), the plugin starts again.
	OpDeleteWhilePluginDown = "deleteWhilePluginDown"
	// OpRestartKubelet: the kubelet restarts alone (the plugin sees no
	// event).
	OpRestartKubelet = "restartKubelet"
	// OpWait: time passes (Wait), the kubelet's syncs and the plugin's
	// timers with it.
	OpWait = "wait"
)

// Action is one step of a life.
type Action struct {
	Op        string   `json:"op"`
	Pod       string   `json:"pod,omitempty"`
	Container string   `json:"container,omitempty"`
	Spec      *PodSpec `json:"spec,omitempty"`
	// Interleave: a start whose steps come as later actions (OpStep).
	Interleave bool `json:"interleave,omitempty"`
	// Code is an exit's or a crash's exit code.
	Code int32 `json:"code,omitempty"`
	// RemoveFirst: the GC removes the crashed instance before the
	// kubelet re-creates it.
	RemoveFirst bool `json:"removeFirst,omitempty"`
	// Milli is a resize's new CPU request and limit.
	Milli int64 `json:"milli,omitempty"`
	// Wait is how long OpWait lasts (a time.Duration string).
	Wait string `json:"wait,omitempty"`
	// Pulling: during the wait the starting pods' next containers are
	// still pulling their images; else the kubelet takes their steps at
	// its first sync.
	Pulling bool `json:"pulling,omitempty"`
}

func (a Action) String() string {
	switch a.Op {
	case OpStart:
		var cs []string
		for _, c := range a.Spec.Containers {
			cs = append(cs, fmt.Sprintf("%s:%s=%dm", c.Kind, c.Name, c.Milli))
		}
		extra := ""
		if a.Spec.Job {
			extra += " job"
		}
		if a.Spec.OverheadMilli > 0 {
			extra += fmt.Sprintf(" overhead=%dm", a.Spec.OverheadMilli)
		}
		if a.Spec.SidecarCrashesAtStart {
			extra += " sidecars-crash-at-start"
		}
		if a.Interleave {
			extra += " interleaved"
		}
		return fmt.Sprintf("start %s %s [%s]%s", a.Spec.QoS, a.Spec.Name, strings.Join(cs, " "), extra)
	case OpCrash:
		return fmt.Sprintf("crash %s/%s code=%d removeFirst=%v", a.Pod, a.Container, a.Code, a.RemoveFirst)
	case OpExit:
		return fmt.Sprintf("exit %s/%s code=%d", a.Pod, a.Container, a.Code)
	case OpResize:
		return fmt.Sprintf("resize %s/%s to %dm", a.Pod, a.Container, a.Milli)
	case OpWait:
		if a.Pulling {
			return "wait " + a.Wait + " (images pulling)"
		}
		return "wait " + a.Wait
	case OpReboot, OpRestartContainerd, OpRestartPlugin, OpCollect, OpRestartKubelet:
		return a.Op
	}
	return a.Op + " " + a.Pod
}

// duration returns a wait's duration.
func (a Action) duration() (time.Duration, error) {
	d, err := time.ParseDuration(a.Wait)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("wait %q: not a duration", a.Wait)
	}
	return d, nil
}

// Life is a sequence of actions, as kept in testdata/lives.
type Life struct {
	// Name says where it comes from (a seed).
	Name string `json:"name"`
	// API: the plugin watches the Kubernetes API.
	API bool `json:"api"`
	// Config names the node configuration (Configs); empty: the first.
	Config  string   `json:"config,omitempty"`
	Actions []Action `json:"actions"`
}

// LoadLife reads a kept life.
func LoadLife(path string) (*Life, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var l Life
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &l, nil
}

// Save writes a life as JSON.
func (l *Life) Save(path string) error {
	data, err := json.MarshalIndent(l, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

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

// setCPUs sets a container's CPU request (and limit, when it has one).
func setCPUs(c *v1.Container, milli int64) {
	cpu := *resource.NewMilliQuantity(milli, resource.DecimalSI)
	if _, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		c.Resources.Requests[v1.ResourceCPU] = cpu
	}
	if _, ok := c.Resources.Limits[v1.ResourceCPU]; ok {
		c.Resources.Limits[v1.ResourceCPU] = cpu
	}
}

// container returns the spec of container name (nil when none).
func (s *PodSpec) container(name string) *ContainerSpec {
	for i := range s.Containers {
		if s.Containers[i].Name == name {
			return &s.Containers[i]
		}
	}
	return nil
}

// kind returns container name's kind ("" when none).
func (s *PodSpec) kind(name string) string {
	if c := s.container(name); c != nil {
		return c.Kind
	}
	return ""
}

// milli returns container name's CPUs in the spec.
func (s *PodSpec) milli(name string) int64 {
	if c := s.container(name); c != nil {
		return c.Milli
	}
	return 0
}

// withMilli returns a copy of s with container name's CPUs at milli.
func (s *PodSpec) withMilli(name string, milli int64) *PodSpec {
	next := *s
	next.Containers = append([]ContainerSpec(nil), s.Containers...)
	if c := next.container(name); c != nil {
		c.Milli = milli
	}
	return &next
}

// exclusiveCPUs returns the whole CPUs a container of the spec asks for
// exclusively (0: it runs on the shared pool), as the kubelet's
// guaranteedCPUs counts them.
func (s *PodSpec) exclusiveCPUs(milli int64) int {
	if s.QoS != "guaranteed" || milli%1000 != 0 {
		return 0
	}
	return int(milli / 1000)
}
