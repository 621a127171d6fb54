package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// fakeRuntime plays containerd 2.4's NRI integration.
type fakeRuntime struct {
	t      testing.TB
	online cpuset.CPUSet
	nri    *adaptation.Adaptation
	socket string

	// mu is containerd's NRI lock: held while an event is delivered and its
	// reply applied, and while unsolicited updates are applied.
	mu         sync.Mutex
	pods       map[string]*api.PodSandbox
	containers map[string]*api.Container
	// unsolicited counts updates that arrived outside of replies.
	unsolicited int
	// violations records every invariant violation seen.
	violations []string
	// log records every update applied, in order.
	log []appliedUpdate
	// unchecked suspends the invariant check (while no plugin runs, as on a
	// node where the plugin is down, new containers get every CPU).
	unchecked bool
	// cgroupRoot, when set, is a cgroup tree where the runtime writes
	// every container's cpuset.cpus, for the plugin's verification: a v1
	// tree (cpuset hierarchy at cgroupRoot/cpuset), or v2 when cgroupV2 is
	// set. A pod whose cgroup parent is a systemd slice gets the systemd
	// driver's paths (cgroupsPath, cgroupDir).
	cgroupRoot string
	cgroupV2   bool
	// failing names containers whose updates fail (containerd logs such a
	// failure of another container and goes on).
	failing map[string]bool
	nextID  int
}

func newFakeRuntime(t testing.TB, online cpuset.CPUSet) *fakeRuntime {
	t.Helper()
	dir := t.TempDir()
	r := &fakeRuntime{
		t:          t,
		online:     online,
		socket:     filepath.Join(dir, "nri.sock"),
		pods:       map[string]*api.PodSandbox{},
		containers: map[string]*api.Container{},
		failing:    map[string]bool{},
	}
	nri, err := adaptation.New("fake-containerd", "2.4.2", r.synchronize, r.updateContainers,
		adaptation.WithSocketPath(r.socket),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := nri.Start(); err != nil {
		t.Fatal(err)
	}
	r.nri = nri
	t.Cleanup(nri.Stop)
	return r
}

// synchronize hands every pod and container to a connecting plugin and
// applies its updates, as containerd's syncPlugin does.
func (r *fakeRuntime) synchronize(ctx context.Context, cb adaptation.SyncCB) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pods := slices.Collect(maps.Values(r.pods))
	var ctrs []*api.Container
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		ctrs = append(ctrs, r.containers[id])
	}
	updates, err := cb(ctx, pods, ctrs)
	if err != nil {
		return err
	}
	r.apply("Synchronize", updates)
	return nil
}

// updateContainers applies unsolicited updates under the NRI lock.
func (r *fakeRuntime) updateContainers(_ context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsolicited += len(updates)
	return r.apply("unsolicited", updates), nil
}

// appliedUpdate is one update as the runtime applied it.
type appliedUpdate struct {
	origin, container, cpus string
}

// Log returns the updates applied so far.
func (r *fakeRuntime) Log() []appliedUpdate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// SetChecking turns the invariant check on or off (and checks at once when
// turned on).
func (r *fakeRuntime) SetChecking(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unchecked = !on
	if on {
		r.check("checking resumed")
	}
}

// Unsolicited returns how many unsolicited updates were applied so far.
func (r *fakeRuntime) Unsolicited() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unsolicited
}

// apply applies updates one at a time, checking after each; it returns
// those naming unknown containers (containerd ignores them).
func (r *fakeRuntime) apply(origin string, updates []*api.ContainerUpdate) []*api.ContainerUpdate {
	var failed []*api.ContainerUpdate
	for _, u := range updates {
		c := r.containers[u.GetContainerId()]
		if c == nil || r.failing[c.Name] {
			failed = append(failed, u)
			continue
		}
		if cpus := u.GetLinux().GetResources().GetCpu().GetCpus(); cpus != "" {
			c.Linux.Resources.Cpu.Cpus = cpus
		}
		if mems := u.GetLinux().GetResources().GetCpu().GetMems(); mems != "" {
			c.Linux.Resources.Cpu.Mems = mems
		}
		r.log = append(r.log, appliedUpdate{origin, c.Name, c.Linux.Resources.Cpu.Cpus})
		r.writeCgroup(c)
		r.check(fmt.Sprintf("%s update of %s", origin, c.Name))
	}
	return failed
}

// writeCgroup writes a container's cpuset where the plugin verifies it.
func (r *fakeRuntime) writeCgroup(c *api.Container) {
	if r.cgroupRoot == "" {
		return
	}
	dir := r.cgroupDir(c)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Error(err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte(c.Linux.Resources.Cpu.Cpus+"\n"), 0o644); err != nil {
		r.t.Error(err)
	}
}

// cgroupsPath is the cgroups path containerd 2.4 gives a container in the
// OCI spec, which NRI delivers (internal/cri/server/helpers.go
// getCgroupsPath): "<slice>:cri-containerd:<id>" when the pod's cgroup
// parent ends in a systemd slice, else "<parent>/<id>".
func cgroupsPath(parent, id string) string {
	if base := path.Base(parent); strings.HasSuffix(base, ".slice") {
		return base + ":cri-containerd:" + id
	}
	return path.Join(parent, id)
}

// cgroupDir is the directory runc gives a container's cgroup: under the
// systemd driver the scope cri-containerd-<id>.scope in the pod's slice
// (the kubelet's parent is the slice's full path), else its cgroups path.
func (r *fakeRuntime) cgroupDir(c *api.Container) string {
	base := r.cgroupRoot
	if !r.cgroupV2 {
		base = filepath.Join(base, "cpuset")
	}
	if pod := r.pods[c.PodSandboxId]; pod != nil && strings.HasSuffix(path.Base(pod.Linux.CgroupParent), ".slice") {
		return filepath.Join(base, pod.Linux.CgroupParent, "cri-containerd-"+c.Id+".scope")
	}
	return filepath.Join(base, c.Linux.CgroupsPath)
}

// SetFailing makes the updates of a container fail (or succeed again).
func (r *fakeRuntime) SetFailing(name string, failing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing[name] = failing
}

// exclusive tells whether a container holds exclusive CPUs: a Guaranteed
// container with whole CPUs (its pool never changes, the plugin refuses it).
func (r *fakeRuntime) exclusive(c *api.Container) bool {
	pod := r.pods[c.PodSandboxId]
	res := c.GetLinux().GetResources()
	return policy.Classify(policy.QoSFromCgroupParent(pod.GetLinux().GetCgroupParent()), state.Resources{
		CPUShares:   res.GetCpu().GetShares().GetValue(),
		CPUQuota:    res.GetCpu().GetQuota().GetValue(),
		CPUPeriod:   res.GetCpu().GetPeriod().GetValue(),
		MemoryLimit: res.GetMemory().GetLimit().GetValue(),
	}).Exclusive
}

// check records a violation of the no-overlap invariant among running
// containers.
func (r *fakeRuntime) check(after string) {
	if r.unchecked {
		return
	}
	applied := map[string]cpuset.CPUSet{}
	excl := map[string]bool{}
	for id, c := range r.containers {
		if c.State == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		cpus, err := cpuset.Parse(c.Linux.Resources.Cpu.Cpus)
		if err != nil {
			r.violations = append(r.violations, fmt.Sprintf("after %s: %s has invalid cpuset %q", after, c.Name, c.Linux.Resources.Cpu.Cpus))
			continue
		}
		applied[id] = cpus
		excl[id] = r.exclusive(c)
	}
	if err := policy.CheckApplied(applied, func(id string) bool { return excl[id] }); err != nil {
		r.violations = append(r.violations, fmt.Sprintf("after %s: %v", after, err))
	}
}

// Violations returns the invariant violations seen so far.
func (r *fakeRuntime) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.violations)
}

func (r *fakeRuntime) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// RunPod starts a pod sandbox (with p.Resources as its pod resources, when
// set).
func (r *fakeRuntime) RunPod(p policy.Pod) (*api.PodSandbox, error) {
	pod := &api.PodSandbox{Id: "sandbox-" + p.UID, Name: p.Name, Uid: p.UID, Namespace: p.Namespace,
		Linux: &api.LinuxPodSandbox{CgroupParent: p.CgroupParent}}
	if p.Resources != (state.Resources{}) {
		pod.Linux.PodResources = toNRIResources(p.Resources)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	if err := r.nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		return nil, err
	}
	r.pods[pod.Id] = pod
	return pod, nil
}

// CreateContainer creates and starts a container: CreateContainer (other
// containers' updates applied first, then the container created with its
// adjusted cpuset), PostCreateContainer, StartContainer.
func (r *fakeRuntime) CreateContainer(pod *api.PodSandbox, name string, res state.Resources) (*api.Container, error) {
	r.mu.Lock()
	r.nextID++
	id := fmt.Sprintf("%s-%s-%d", pod.Name, name, r.nextID)
	c := &api.Container{
		Id: id, PodSandboxId: pod.Id, Name: name,
		State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{
			Resources:   toNRIResources(res),
			CgroupsPath: cgroupsPath(pod.Linux.CgroupParent, id),
		},
	}
	ctx, cancel := r.ctx()
	defer cancel()
	rpl, err := r.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	r.apply("pre-create", rpl.GetUpdate())
	r.mu.Unlock()

	// The container is created after the NRI lock is released, with the
	// adjusted spec.
	cpus := rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus()
	if cpus == "" {
		cpus = r.online.String()
	}
	r.mu.Lock()
	c.Linux.Resources.Cpu.Cpus = cpus
	c.Linux.Resources.Cpu.Mems = rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetMems()
	r.containers[c.Id] = c
	r.writeCgroup(c)
	r.check("creation of " + name)
	err = r.nri.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: c})
	if err == nil {
		err = r.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: c})
	}
	c.State = api.ContainerState_CONTAINER_RUNNING
	r.mu.Unlock()
	return c, err
}

// CreateContainerFailing plays a creation that fails after the plugins
// answered (runc refuses the spec, say): the reply's updates are applied,
// the container never exists, and containerd sends StopContainer and
// RemoveContainer for it.
func (r *fakeRuntime) CreateContainerFailing(pod *api.PodSandbox, name string, res state.Resources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	id := fmt.Sprintf("%s-%s-%d", pod.Name, name, r.nextID)
	c := &api.Container{
		Id: id, PodSandboxId: pod.Id, Name: name,
		State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{Resources: toNRIResources(res), CgroupsPath: cgroupsPath(pod.Linux.CgroupParent, id)},
	}
	ctx, cancel := r.ctx()
	defer cancel()
	rpl, err := r.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
	if err != nil {
		return err
	}
	r.apply("pre-create", rpl.GetUpdate())
	c.State = api.ContainerState_CONTAINER_STOPPED
	stop, err := r.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: c})
	if err != nil {
		return err
	}
	r.apply("post-stop", stop.GetUpdate())
	return r.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: c})
}

// UpdateContainer resizes a container like CRI UpdateContainerResources:
// UpdateContainer (others first, then the target with the resources the
// plugins returned), then PostUpdateContainer.
func (r *fakeRuntime) UpdateContainer(c *api.Container, res state.Resources) error {
	_, err := r.updateContainer(c, res)
	return err
}

// updateContainer is UpdateContainer; it also returns how long the NRI
// request itself took (request, plugin decision and commit, reply).
func (r *fakeRuntime) updateContainer(c *api.Container, res state.Resources) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.pods[c.PodSandboxId]
	ctx, cancel := r.ctx()
	defer cancel()
	start := time.Now()
	rpl, err := r.nri.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: c, LinuxResources: toNRIResources(res)})
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	r.applyUpdateReply(c, res, rpl.GetUpdate())
	return took, r.nri.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: c})
}

// applyUpdateReply applies an UpdateContainer reply: the other
// containers' updates in order, then the target with the requested
// resources and the cpuset the plugin chose.
func (r *fakeRuntime) applyUpdateReply(c *api.Container, res state.Resources, updates []*api.ContainerUpdate) {
	if n := len(updates); n > 0 {
		r.apply("pre-update", updates[:n-1])
	}
	merged := policy.MergeResources(fromNRIResources(c.Linux.Resources), res)
	cpus, mems := c.Linux.Resources.Cpu.Cpus, c.Linux.Resources.Cpu.Mems
	if n := len(updates); n > 0 && updates[n-1] != nil {
		if v := updates[n-1].GetLinux().GetResources().GetCpu().GetCpus(); v != "" {
			cpus = v
		}
		if v := updates[n-1].GetLinux().GetResources().GetCpu().GetMems(); v != "" {
			mems = v
		}
	}
	c.Linux.Resources = toNRIResources(merged)
	c.Linux.Resources.Cpu.Cpus, c.Linux.Resources.Cpu.Mems = cpus, mems
	r.log = append(r.log, appliedUpdate{"target", c.Name, cpus})
	r.writeCgroup(c)
	r.check("update of " + c.Name)
}

// StopContainer stops a container and applies the reply's updates.
func (r *fakeRuntime) StopContainer(c *api.Container) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	c.State = api.ContainerState_CONTAINER_STOPPED
	rpl, err := r.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: r.pods[c.PodSandboxId], Container: c})
	if err != nil {
		return err
	}
	r.apply("post-stop", rpl.GetUpdate())
	return nil
}

// RemoveContainer removes a container.
func (r *fakeRuntime) RemoveContainer(c *api.Container) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	delete(r.containers, c.Id)
	return r.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: r.pods[c.PodSandboxId], Container: c})
}

// RemovePod stops and removes a pod sandbox (its containers first).
func (r *fakeRuntime) RemovePod(pod *api.PodSandbox) error {
	for _, c := range r.containersOf(pod) {
		if c.State != api.ContainerState_CONTAINER_STOPPED {
			if err := r.StopContainer(c); err != nil {
				return err
			}
		}
		if err := r.RemoveContainer(c); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	if err := r.nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod}); err != nil {
		return err
	}
	delete(r.pods, pod.Id)
	return r.nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod})
}

// UpdatePod relays CRI UpdatePodSandboxResources.
func (r *fakeRuntime) UpdatePod(pod *api.PodSandbox, res state.PodResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	_, err := r.nri.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: pod,
		OverheadLinuxResources: toNRIResources(res.Overhead), LinuxResources: toNRIResources(res.Resources)})
	if err != nil {
		return err
	}
	return r.nri.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: pod})
}

func (r *fakeRuntime) containersOf(pod *api.PodSandbox) []*api.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*api.Container
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		if c := r.containers[id]; c.PodSandboxId == pod.Id {
			out = append(out, c)
		}
	}
	return out
}

// CPUs returns a container's applied cpuset.
func (r *fakeRuntime) CPUs(id string) (cpuset.CPUSet, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil || c.State == api.ContainerState_CONTAINER_STOPPED {
		return cpuset.New(), false
	}
	cpus, err := cpuset.Parse(c.Linux.Resources.Cpu.Cpus)
	return cpus, err == nil
}

// Applied returns every running container's cpuset.
func (r *fakeRuntime) Applied() map[string]cpuset.CPUSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]cpuset.CPUSet{}
	for id, c := range r.containers {
		if c.State == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		cpus, _ := cpuset.Parse(c.Linux.Resources.Cpu.Cpus)
		out[id] = cpus
	}
	return out
}

func toNRIResources(r state.Resources) *api.LinuxResources {
	out := &api.LinuxResources{Cpu: &api.LinuxCPU{}, Memory: &api.LinuxMemory{}}
	if r.CPUShares != 0 {
		out.Cpu.Shares = api.UInt64(r.CPUShares)
	}
	if r.CPUQuota != 0 {
		out.Cpu.Quota = api.Int64(r.CPUQuota)
	}
	if r.CPUPeriod != 0 {
		out.Cpu.Period = api.UInt64(r.CPUPeriod)
	}
	if r.MemoryLimit != 0 {
		out.Memory.Limit = api.Int64(r.MemoryLimit)
	}
	return out
}

func fromNRIResources(r *api.LinuxResources) state.Resources {
	return state.Resources{
		CPUShares:   r.GetCpu().GetShares().GetValue(),
		CPUQuota:    r.GetCpu().GetQuota().GetValue(),
		CPUPeriod:   r.GetCpu().GetPeriod().GetValue(),
		MemoryLimit: r.GetMemory().GetLimit().GetValue(),
	}
}
