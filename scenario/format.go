package scenario

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// File is one scenario.
type File struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Topology    Topology `json:"topology"`
	// Machines are further machines on which every expectation holds as
	// written: the suites that play scenarios on fixture machines play
	// it on each, and the suites on real machines (make e2e, make e2e-vm)
	// play it on a machine whose topology has the shape of its topology
	// or of one of these (see Shape).
	Machines []Topology     `json:"machines,omitempty"`
	Config   map[string]any `json:"config,omitempty"`
	Steps    []Step         `json:"steps"`
}

// Topology selects the machine: a KEP machine, a hand-written layout of a
// real machine, or a regular one.
type Topology struct {
	// KEP is "use-cases" (KEP-5554's 12-CPU machine) or "checkpoint" (its
	// 16-CPU walk-through machine).
	KEP string `json:"kep,omitempty"`
	// Layout names a layout of cpuallocator/fakesysfs/layouts.
	Layout string `json:"layout,omitempty"`
	// A regular machine otherwise.
	Sockets        int    `json:"sockets,omitempty"`
	NUMAPerSocket  int    `json:"numaPerSocket,omitempty"`
	CoresPerNUMA   int    `json:"coresPerNUMA,omitempty"`
	ThreadsPerCore int    `json:"threadsPerCore,omitempty"`
	L3PerNUMA      int    `json:"l3PerNUMA,omitempty"`
	Numbering      string `json:"numbering,omitempty"` // adjacent (default) or offset
	// Isolated is the kernel's isolcpus list on any of these machines
	// (devices/system/cpu/isolated), e.g. "2-15".
	Isolated string `json:"isolated,omitempty"`
	// Distances, when set, are the NUMA distances of any of these
	// machines: row i lists the distances from node i (a regular
	// machine's default: 10 local, 11 within a socket, 21 between
	// sockets; QEMU's, for instance, are 10 and 20).
	Distances [][]int `json:"distances,omitempty"`
}

// Step is one action and what it should lead to. Exactly one action is set.
type Step struct {
	Create *ContainerStep `json:"create,omitempty"`
	Resize *ContainerStep `json:"resize,omitempty"`
	Stop   *StopStep      `json:"stop,omitempty"`
	Remove *ContainerRef  `json:"remove,omitempty"`
	// Restart plays a container's exit and the kubelet's re-creation of
	// it under a new id with the given resources; once the new one is
	// created the exited one is removed (the kubelet's garbage collection).
	Restart   *ContainerStep `json:"restart,omitempty"`
	RemovePod string         `json:"removePod,omitempty"`
	UpdatePod *PodStep       `json:"updatePod,omitempty"`
	// Pod declares a pod's spec as the Kubernetes API gives it and runs
	// its sandbox, before its containers are created: a driver that knows
	// the spec (the plugin watching the API) admits the whole pod there.
	Pod *PodSpecStep `json:"pod,omitempty"`
	// Expect checks the outcome of a successful action.
	Expect *Expect `json:"expect,omitempty"`
	// Refused, when set, requires the action to be refused with an error
	// containing this text (e.g. "Infeasible: prohibitedCPUAllocationError").
	Refused string `json:"refused,omitempty"`
	// Note is a comment shown in reports.
	Note string `json:"note,omitempty"`
}

// ContainerRef names a container.
type ContainerRef struct {
	Pod       string `json:"pod"`
	Container string `json:"container"`
}

// StopStep is a container's process ending. ExitCode is its exit code
// (default 0: it exited by itself, as an init container completes; a
// crash exits with another code, a kill with 137).
type StopStep struct {
	ContainerRef `json:",inline"`
	ExitCode     int32 `json:"exitCode,omitempty"`
}

// ContainerStep creates or resizes a container. CPU is a Kubernetes
// quantity ("2", "1500m"), used for request and limit; QoS is guaranteed
// (default), burstable or besteffort. A burstable container's limit is
// CPULimit when set (else none).
type ContainerStep struct {
	ContainerRef `json:",inline"`
	QoS          string `json:"qos,omitempty"`
	CPU          string `json:"cpu,omitempty"`
	CPULimit     string `json:"cpuLimit,omitempty"`
	Memory       string `json:"memory,omitempty"`
	// PodCPU is the pod's CPU total (request and limit) as the kubelet
	// passes it with the sandbox, set at the pod's first creation step.
	PodCPU string `json:"podCPU,omitempty"`
	// Role is what the pod's spec says the container is, for a driver
	// that knows the spec (the plugin watching the Kubernetes API): init
	// (an ordinary init container), sidecar (a restartable one) or app;
	// empty when the spec is not known.
	Role string `json:"role,omitempty"`
	// Devices are the NUMA nodes of the device nodes the container is
	// given (a GPU, a VF bound to vfio-pci), as the plugin finds them in
	// sysfs; creation steps only. A driver that cannot give a container
	// devices refuses the step.
	Devices []int `json:"devices,omitempty"`
}

// PodSpecStep is a pod's spec: its containers in the order of the spec
// (its init containers and sidecars first, then its app containers),
// each with its CPU request (its limit too in a Guaranteed pod). PodCPU
// is the pod's CPU total as the kubelet passes it with the sandbox; by
// default the kubelet's total of the containers (the largest of each init
// container's need, with the sidecars before it, and of the sidecars'
// and app containers' sum).
type PodSpecStep struct {
	Name       string              `json:"name"`
	QoS        string              `json:"qos,omitempty"`
	PodCPU     string              `json:"podCPU,omitempty"`
	Containers []SpecContainerStep `json:"containers"`
}

// SpecContainerStep is one container of a pod's spec; Role is init,
// sidecar or app (the default).
type SpecContainerStep struct {
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
	CPU  string `json:"cpu,omitempty"`
}

// PodStep is an UpdatePodSandboxResources with the pod's new CPU total.
type PodStep struct {
	Pod    string `json:"pod"`
	CPU    string `json:"cpu"`
	Memory string `json:"memory,omitempty"`
}

// Expect is what a step must lead to. Empty fields are not checked.
type Expect struct {
	// CPUs, Count, Baseline, Resized, NUMANodes and Within are about the
	// step's container.
	CPUs      string `json:"cpus,omitempty"`
	Count     int    `json:"count,omitempty"`
	Baseline  string `json:"baseline,omitempty"`
	Resized   string `json:"resized,omitempty"`
	NUMANodes int    `json:"numaNodes,omitempty"`
	Within    string `json:"within,omitempty"`
	// Shared is the shared pool.
	Shared string `json:"shared,omitempty"`
	// Containers are the cpusets other containers must run on
	// ("pod/container": "cpuset").
	Containers map[string]string `json:"containers,omitempty"`
	// Entries are the exclusive CPUs the checkpoint assigns to containers,
	// running or not ("pod/container": "cpuset"; "" for none): what a
	// pod's admission gave containers that have not started yet.
	Entries map[string]string `json:"entries,omitempty"`
}

// Load reads a scenario file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// ConfigFile returns the scenario's plugin configuration as a
// configuration file, with the keys of extra set as well (the machine's
// sysfsRoot, the NRI socket, the state directory).
func (f *File) ConfigFile(extra map[string]any) ([]byte, error) {
	keys := maps.Clone(f.Config)
	if keys == nil {
		keys = map[string]any{}
	}
	maps.Copy(keys, extra)
	return yaml.Marshal(keys)
}

// Parse decodes a scenario strictly and checks that every step has exactly
// one action.
func Parse(data []byte) (*File, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	if f.Name == "" {
		return nil, errors.New("scenario has no name")
	}
	for i, s := range f.Steps {
		n := 0
		for _, set := range []bool{s.Create != nil, s.Resize != nil, s.Stop != nil, s.Restart != nil, s.Remove != nil, s.RemovePod != "", s.UpdatePod != nil, s.Pod != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("step %d: want exactly one of create, resize, stop, restart, remove, removePod, updatePod, pod; got %d", i+1, n)
		}
		if s.Refused != "" && s.Expect != nil {
			return nil, fmt.Errorf("step %d: a refused step cannot have expectations", i+1)
		}
		if s.Pod != nil && s.Refused != "" {
			return nil, fmt.Errorf("step %d: a pod's sandbox is never refused (a pod that is not admitted has its containers' creations refused)", i+1)
		}
	}
	return &f, nil
}

// NeedsPodSpec reports whether a step names a container's role in the
// pod's spec or declares a pod's spec, which a plugin learns from the
// Kubernetes API only.
func (f *File) NeedsPodSpec() bool {
	for _, s := range f.Steps {
		if s.Create != nil && s.Create.Role != "" || s.Pod != nil {
			return true
		}
	}
	return false
}

// DeviceNodes returns the NUMA nodes its creations give devices on,
// sorted, each once: a driver over a real runtime needs a device node on
// each of them.
func (f *File) DeviceNodes() []int {
	var nodes []int
	for _, s := range f.Steps {
		if s.Create == nil {
			continue
		}
		for _, n := range s.Create.Devices {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	slices.Sort(nodes)
	return nodes
}

// Action names a step's action for reports.
func (s Step) Action() string {
	switch {
	case s.Create != nil:
		return fmt.Sprintf("create %s/%s cpu=%s %s", s.Create.Pod, s.Create.Container, s.Create.CPU, s.Create.QoS)
	case s.Resize != nil:
		return fmt.Sprintf("resize %s/%s cpu=%s", s.Resize.Pod, s.Resize.Container, s.Resize.CPU)
	case s.Stop != nil:
		return fmt.Sprintf("stop %s/%s", s.Stop.Pod, s.Stop.Container)
	case s.Remove != nil:
		return fmt.Sprintf("remove %s/%s", s.Remove.Pod, s.Remove.Container)
	case s.Restart != nil:
		return fmt.Sprintf("restart %s/%s cpu=%s", s.Restart.Pod, s.Restart.Container, s.Restart.CPU)
	case s.RemovePod != "":
		return "remove pod " + s.RemovePod
	case s.UpdatePod != nil:
		return fmt.Sprintf("update pod %s cpu=%s", s.UpdatePod.Pod, s.UpdatePod.CPU)
	case s.Pod != nil:
		var cs []string
		for _, c := range s.Pod.Containers {
			role := c.Role
			if role == "" {
				role = "app"
			}
			cs = append(cs, fmt.Sprintf("%s:%s=%s", role, c.Name, c.CPU))
		}
		return fmt.Sprintf("pod %s [%s]", s.Pod.Name, strings.Join(cs, " "))
	}
	return "nothing"
}

// MilliCPU parses a CPU quantity: "2", "0.5", "1500m".
func MilliCPU(q string) (int64, error) {
	if q == "" {
		return 0, nil
	}
	if m, ok := strings.CutSuffix(q, "m"); ok {
		return strconv.ParseInt(m, 10, 64)
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("CPU quantity %q: want a number of CPUs or milli-CPUs like 1500m", q)
	}
	return int64(f*1000 + 0.5), nil
}

// Bytes parses a memory quantity: "1Gi", "512Mi", "1048576".
func Bytes(q string) (int64, error) {
	if q == "" {
		return 0, nil
	}
	for suffix, mult := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("memory quantity %q: %w", q, err)
			}
			return v * mult, nil
		}
	}
	v, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory quantity %q: want bytes or a Ki/Mi/Gi/Ti suffix", q)
	}
	return v, nil
}
