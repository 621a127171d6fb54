package scenario

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// Driver is what a scenario runs against: something that behaves like the
// plugin behind a container runtime.
type Driver interface {
	CreateContainer(pod policy.Pod, name string, r policy.Resources) error
	UpdateContainer(pod policy.Pod, name string, r policy.Resources) error
	// StopContainer ends a container's process with exitCode.
	StopContainer(pod policy.Pod, name string, exitCode int32) error
	RemoveContainer(pod policy.Pod, name string) error
	// RunPod runs a pod's sandbox, before its first container.
	RunPod(pod policy.Pod) error
	// RestartContainer stops a container, creates it again under a new id
	// with r and, when that succeeds, removes the stopped one. A refused
	// re-creation leaves the stopped one in place.
	RestartContainer(pod policy.Pod, name string, r policy.Resources) error
	RemovePod(pod policy.Pod) error
	UpdatePod(pod policy.Pod, r policy.PodResources) error
	// ContainerCPUs returns the cpuset the runtime applied to a running
	// container.
	ContainerCPUs(pod policy.Pod, name string) (cpuset.CPUSet, bool)
	// State returns the committed state.
	State() *state.State
	// NUMANodesOf counts the NUMA nodes of a cpuset.
	NUMANodesOf(cpus cpuset.CPUSet) int
}

// DeviceDriver is a Driver that can create a container given devices on
// NUMA nodes (a step's devices).
type DeviceDriver interface {
	CreateContainerWithDevices(pod policy.Pod, name string, r policy.Resources, nodes []int) error
}

// Runner runs the steps of a scenario against a driver, remembering the
// pods it created.
type Runner struct {
	d      Driver
	pods   map[string]policy.Pod
	qos    map[string]string
	memory map[string]int64 // pod/container → memory limit
	// Report, if set, receives one line per step.
	Report func(string)
	// Verify, if set, is checked after every step, after the step's
	// expectations: what a driver checks beyond them (on a real runtime,
	// that every container's cgroup is what the checkpoint gives it).
	Verify func() error
	// Settle, if set, runs each step's check (its expectations, then
	// Verify) until it passes or Settle gives up, and returns the last
	// error: a driver over a real runtime sets it, since the plugin
	// applies some updates after the call returned (the shared
	// containers' growth after a shrink is sent when the runtime confirms
	// the shrink).
	Settle func(check func() error) error
}

// NewRunner returns a runner over d.
func NewRunner(d Driver) *Runner {
	return &Runner{d: d, pods: map[string]policy.Pod{}, qos: map[string]string{}, memory: map[string]int64{}}
}

// Run runs every step and returns the first mismatch.
func (r *Runner) Run(f *File) error {
	for i, s := range f.Steps {
		err := r.do(s)
		where := fmt.Sprintf("%s: step %d (%s)", f.Name, i+1, s.Action())
		switch {
		case s.Refused != "" && err == nil:
			return fmt.Errorf("%s: succeeded, want refused with %q", where, s.Refused)
		case s.Refused != "" && !strings.Contains(err.Error(), s.Refused):
			return fmt.Errorf("%s: refused with %q, want %q", where, err, s.Refused)
		case s.Refused == "" && err != nil:
			return fmt.Errorf("%s: %w", where, err)
		}
		check := func() error {
			if err := r.check(s); err != nil {
				return err
			}
			if r.Verify != nil {
				return r.Verify()
			}
			return nil
		}
		settle := r.Settle
		if settle == nil {
			settle = func(check func() error) error { return check() }
		}
		if err := settle(check); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if r.Report != nil {
			outcome := "ok"
			if err != nil {
				outcome = "refused: " + err.Error()
			}
			r.Report(fmt.Sprintf("step %d: %s → %s; shared pool %s", i+1, s.Action(), outcome, r.d.State().DefaultCPUSet()))
		}
	}
	return nil
}

func (r *Runner) pod(name string) (policy.Pod, error) {
	if p, ok := r.pods[name]; ok {
		return p, nil
	}
	return policy.Pod{}, fmt.Errorf("unknown pod %q", name)
}

func (r *Runner) do(s Step) error {
	switch {
	case s.Create != nil:
		c := s.Create
		qos := c.QoS
		if qos == "" {
			qos = "guaranteed"
		}
		pod, ok := r.pods[c.Pod]
		if !ok {
			var err error
			if pod, err = KubeletPod(c.Pod, qos); err != nil {
				return err
			}
			if c.PodCPU != "" {
				milli, err := MilliCPU(c.PodCPU)
				if err != nil {
					return err
				}
				pod.Resources = KubeletResources(qos, milli, milli, 0)
			}
			pod.SandboxID = "sandbox-" + pod.UID
			if err := r.d.RunPod(pod); err != nil {
				return err
			}
			r.pods[c.Pod], r.qos[c.Pod] = pod, qos
		}
		if c.Role != "" {
			role, err := ParseRole(c.Role)
			if err != nil {
				return err
			}
			pod.Roles = maps.Clone(pod.Roles)
			if pod.Roles == nil {
				pod.Roles = map[string]policy.Role{}
			}
			pod.Roles[c.Container] = role
			r.pods[c.Pod] = pod
		}
		res, err := resourcesOf(c, r.qos[c.Pod], 0)
		if err != nil {
			return err
		}
		if err := r.create(pod, c, res); err != nil {
			return err
		}
		r.memory[c.Pod+"/"+c.Container] = res.MemoryLimit
		return nil
	case s.Resize != nil:
		c := s.Resize
		pod, err := r.pod(c.Pod)
		if err != nil {
			return err
		}
		res, err := resourcesOf(c, r.qos[c.Pod], r.memory[c.Pod+"/"+c.Container])
		if err != nil {
			return err
		}
		return r.d.UpdateContainer(pod, c.Container, res)
	case s.Stop != nil:
		pod, err := r.pod(s.Stop.Pod)
		if err != nil {
			return err
		}
		return r.d.StopContainer(pod, s.Stop.Container, s.Stop.ExitCode)
	case s.Restart != nil:
		c := s.Restart
		pod, err := r.pod(c.Pod)
		if err != nil {
			return err
		}
		res, err := resourcesOf(c, r.qos[c.Pod], r.memory[c.Pod+"/"+c.Container])
		if err != nil {
			return err
		}
		return r.d.RestartContainer(pod, c.Container, res)
	case s.Remove != nil:
		pod, err := r.pod(s.Remove.Pod)
		if err != nil {
			return err
		}
		return r.d.RemoveContainer(pod, s.Remove.Container)
	case s.RemovePod != "":
		pod, err := r.pod(s.RemovePod)
		if err != nil {
			return err
		}
		delete(r.pods, s.RemovePod)
		return r.d.RemovePod(pod)
	case s.Pod != nil:
		return r.runPod(s.Pod)
	case s.UpdatePod != nil:
		pod, err := r.pod(s.UpdatePod.Pod)
		if err != nil {
			return err
		}
		milli, err := MilliCPU(s.UpdatePod.CPU)
		if err != nil {
			return err
		}
		mem, err := Bytes(s.UpdatePod.Memory)
		if err != nil {
			return err
		}
		return r.d.UpdatePod(pod, policy.PodResources{Resources: KubeletResources(r.qos[s.UpdatePod.Pod], milli, milli, mem)})
	}
	return fmt.Errorf("step without action")
}

// runPod runs the sandbox of a pod whose spec a step declares: the pod
// carries its spec (policy.Pod.Containers, Roles and GuaranteedCPUs, as
// the plugin reads them from the Kubernetes API), and its later steps
// name it.
func (r *Runner) runPod(ps *PodSpecStep) error {
	if _, ok := r.pods[ps.Name]; ok {
		return fmt.Errorf("pod %s: its sandbox runs already (a pod step comes before its containers)", ps.Name)
	}
	qos := ps.QoS
	if qos == "" {
		qos = "guaranteed"
	}
	pod, err := KubeletPod(ps.Name, qos)
	if err != nil {
		return err
	}
	pod.Roles = map[string]policy.Role{}
	pod.Containers = []policy.SpecContainer{}
	var inits, sidecars, long int64
	var initCPUs, sidecarCPUs, longCPUs int
	for _, c := range ps.Containers {
		role := policy.RoleApp
		if c.Role != "" {
			if role, err = ParseRole(c.Role); err != nil {
				return fmt.Errorf("pod %s container %s: %w", ps.Name, c.Name, err)
			}
		}
		milli, err := MilliCPU(c.CPU)
		if err != nil {
			return fmt.Errorf("pod %s container %s: %w", ps.Name, c.Name, err)
		}
		cpus := 0
		if qos == "guaranteed" && milli > 0 && milli%1000 == 0 {
			cpus = int(milli / 1000)
		}
		pod.Roles[c.Name] = role
		pod.Containers = append(pod.Containers, policy.SpecContainer{Name: c.Name, Role: role, CPUs: cpus})
		switch role {
		case policy.RoleInit:
			inits, initCPUs = max(inits, sidecars+milli), max(initCPUs, sidecarCPUs+cpus)
		case policy.RoleSidecar:
			sidecars, sidecarCPUs = sidecars+milli, sidecarCPUs+cpus
		default:
			long, longCPUs = long+milli, longCPUs+cpus
		}
	}
	pod.GuaranteedCPUs = max(initCPUs, sidecarCPUs+longCPUs)
	total := max(inits, sidecars+long)
	if ps.PodCPU != "" {
		if total, err = MilliCPU(ps.PodCPU); err != nil {
			return err
		}
	}
	limit := total
	if qos != "guaranteed" {
		limit = 0
	}
	pod.Resources = KubeletResources(qos, total, limit, 0)
	pod.SandboxID = "sandbox-" + pod.UID
	if err := r.d.RunPod(pod); err != nil {
		return err
	}
	r.pods[ps.Name], r.qos[ps.Name] = pod, qos
	return nil
}

// ParseRole reads a container's role as a scenario names it: init (an
// ordinary init container), sidecar (a restartable one) or app.
func ParseRole(name string) (policy.Role, error) {
	switch name {
	case "init":
		return policy.RoleInit, nil
	case "sidecar":
		return policy.RoleSidecar, nil
	case "app":
		return policy.RoleApp, nil
	}
	return policy.RoleUnknown, fmt.Errorf("unknown role %q (want init, sidecar or app)", name)
}

// target returns the container a step is about, if any.
func (s Step) target() *ContainerRef {
	switch {
	case s.Create != nil:
		return &s.Create.ContainerRef
	case s.Resize != nil:
		return &s.Resize.ContainerRef
	}
	return nil
}

func (r *Runner) check(s Step) error {
	e := s.Expect
	if e == nil {
		return nil
	}
	st := r.d.State()
	var errs []string
	want := func(what, wantText string, got cpuset.CPUSet) {
		if wantText == "" {
			return
		}
		w, err := cpuset.Parse(wantText)
		if err != nil {
			errs = append(errs, fmt.Sprintf("bad expectation %s %q: %v", what, wantText, err))
			return
		}
		if !cpumask.Equal(w, got) {
			errs = append(errs, fmt.Sprintf("%s is %q, want %q", what, got, w))
		}
	}
	if t := s.target(); t != nil {
		pod, err := r.pod(t.Pod)
		if err != nil {
			return err
		}
		cpus, ok := r.d.ContainerCPUs(pod, t.Container)
		if !ok {
			return fmt.Errorf("container %s/%s does not run", t.Pod, t.Container)
		}
		want("cpuset", e.CPUs, cpus)
		if e.Count != 0 && cpus.Size() != e.Count {
			errs = append(errs, fmt.Sprintf("cpuset %s has %d CPUs, want %d", cpus, cpus.Size(), e.Count))
		}
		if e.Within != "" {
			w, _ := cpuset.Parse(e.Within)
			if !cpus.IsSubsetOf(w) {
				errs = append(errs, fmt.Sprintf("cpuset %s is not within %s", cpus, w))
			}
		}
		if e.NUMANodes != 0 && r.d.NUMANodesOf(cpus) != e.NUMANodes {
			errs = append(errs, fmt.Sprintf("cpuset %s spans %d NUMA nodes, want %d", cpus, r.d.NUMANodesOf(cpus), e.NUMANodes))
		}
		a, _ := st.Assignment(pod.UID, t.Container)
		want("baseline", e.Baseline, a.Baseline)
		want("resized", e.Resized, a.Resized)
	}
	want("shared pool", e.Shared, st.DefaultCPUSet())
	for _, key := range slices.Sorted(maps.Keys(e.Containers)) {
		podName, name, _ := strings.Cut(key, "/")
		pod, err := r.pod(podName)
		if err != nil {
			return err
		}
		cpus, _ := r.d.ContainerCPUs(pod, name)
		want(key, e.Containers[key], cpus)
	}
	for _, key := range slices.Sorted(maps.Keys(e.Entries)) {
		podName, name, _ := strings.Cut(key, "/")
		pod, err := r.pod(podName)
		if err != nil {
			return err
		}
		a, ok := st.Assignment(pod.UID, name)
		switch {
		case e.Entries[key] == "" && ok:
			errs = append(errs, fmt.Sprintf("entry %s holds %s, want none", key, a.Assigned()))
		case e.Entries[key] != "":
			want("entry "+key, e.Entries[key], a.Assigned())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// create creates a step's container, given its devices when it has some.
func (r *Runner) create(pod policy.Pod, c *ContainerStep, res policy.Resources) error {
	if len(c.Devices) == 0 {
		return r.d.CreateContainer(pod, c.Container, res)
	}
	d, ok := r.d.(DeviceDriver)
	if !ok {
		return fmt.Errorf("%s/%s: this driver cannot give a container devices", c.Pod, c.Container)
	}
	return d.CreateContainerWithDevices(pod, c.Container, res, c.Devices)
}
