package integration

import (
	"context"
	"fmt"
	"maps"
	"math/bits"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
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
	// Atomic: it is turned off at the moment a plugin is killed, while a
	// request may hold mu.
	unchecked atomic.Bool
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

	// syncs counts the Synchronizes applied.
	syncs int
	// inRequest counts the NRI requests in progress.
	inRequest atomic.Int32
	// ignoresFailurePolicies plays a runtime with NRI older than v0.12.5,
	// where a request goes on without a plugin that failed to answer it.
	ignoresFailurePolicies bool
	// stats, when not nil, records every request's round trip.
	stats *runtimeStats

	// expectShared names containers the test expects on the shared pool
	// whatever their resources say (see ExpectShared).
	expectShared map[string]bool
	// The invariant check's counts and caches.
	overlaps *overlaps
	parsed   map[string]cpumask.Mask
	classes  map[classKey]bool
}

func newFakeRuntime(t testing.TB, online cpuset.CPUSet) *fakeRuntime {
	t.Helper()
	return newFakeRuntimeWith(t, online)
}

// newFakeRuntimeWith is newFakeRuntime with more options of NRI's runtime
// library (a default validator, say).
func newFakeRuntimeWith(t testing.TB, online cpuset.CPUSet, options ...adaptation.Option) *fakeRuntime {
	t.Helper()
	dir := t.TempDir()
	r := &fakeRuntime{
		t:          t,
		online:     online,
		socket:     filepath.Join(dir, "nri.sock"),
		pods:       map[string]*api.PodSandbox{},
		containers: map[string]*api.Container{},
		failing:    map[string]bool{},

		expectShared: map[string]bool{},
		overlaps:     newOverlaps(),
		parsed:       map[string]cpumask.Mask{},
		classes:      map[classKey]bool{},
	}
	nri, err := adaptation.New("fake-containerd", "2.4.2", r.synchronize, r.updateContainers,
		append([]adaptation.Option{
			adaptation.WithSocketPath(r.socket),
			adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
			adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		}, options...)...,
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
	r.syncs++
	return nil
}

// Syncs returns how many Synchronizes the runtime applied.
func (r *fakeRuntime) Syncs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncs
}

// runtimeStats are what a load run measures at the runtime: each
// request's round trip through NRI (request, the plugin's decision and
// commit, reply), and the updates of other containers applied.
type runtimeStats struct {
	latency map[string][]time.Duration
	// replyUpdates counts the updates of other containers that came with
	// replies; unsolicited those that came on their own.
	replyUpdates, unsolicited int
}

// RecordStats starts recording runtimeStats (from zero).
func (r *fakeRuntime) RecordStats() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats = &runtimeStats{latency: map[string][]time.Duration{}}
}

// Stats returns a copy of what was recorded since RecordStats.
func (r *fakeRuntime) Stats() runtimeStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := runtimeStats{latency: map[string][]time.Duration{},
		replyUpdates: r.stats.replyUpdates, unsolicited: r.stats.unsolicited}
	for k, v := range r.stats.latency {
		out.latency[k] = slices.Clone(v)
	}
	return out
}

// timed runs one NRI request and records its round trip. Called with mu
// held.
func (r *fakeRuntime) timed(event string, call func() error) error {
	start := time.Now()
	r.inRequest.Add(1)
	err := call()
	r.inRequest.Add(-1)
	if err != nil && r.ignoresFailurePolicies && strings.Contains(err.Error(), " request: ") &&
		strings.Contains(err.Error(), "failed to handle "+event) {
		// NRI before v0.12.5 (containerd 2.4.2): the request goes on
		// without a plugin that died, whatever its failure policy.
		err = nil
	}
	if r.stats != nil {
		r.stats.latency[event] = append(r.stats.latency[event], time.Since(start))
	}
	return err
}

// updateContainers applies unsolicited updates under the NRI lock.
func (r *fakeRuntime) updateContainers(_ context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsolicited += len(updates)
	if r.stats != nil {
		r.stats.unsolicited += len(updates)
	}
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
// turned on). Turning it off does not wait for a request in progress.
func (r *fakeRuntime) SetChecking(on bool) {
	if !on {
		r.unchecked.Store(true)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unchecked.Store(false)
	r.resync()
	r.check("checking resumed")
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
	if r.stats != nil && origin != "unsolicited" {
		r.stats.replyUpdates += len(updates)
	}
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
		r.track(c)
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
	// Written to a temp file and renamed: a read never sees a half-written
	// file (a cgroup file changes atomically).
	tmp := filepath.Join(dir, ".cpuset.cpus.tmp")
	if err := os.WriteFile(tmp, []byte(c.Linux.Resources.Cpu.Cpus+"\n"), 0o644); err != nil {
		r.t.Error(err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(dir, "cpuset.cpus")); err != nil {
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
// container with whole CPUs (its pool never changes, the plugin refuses it)
// that the test does not expect on the shared pool (see ExpectShared). Each
// distinct cgroup parent and resources is classified once.
func (r *fakeRuntime) exclusive(c *api.Container) bool {
	if r.expectShared[c.Id] {
		return false
	}
	pod := r.pods[c.PodSandboxId]
	res := c.GetLinux().GetResources()
	key := classKey{parent: pod.GetLinux().GetCgroupParent(), res: policy.Resources{
		CPUShares:   res.GetCpu().GetShares().GetValue(),
		CPUQuota:    res.GetCpu().GetQuota().GetValue(),
		CPUPeriod:   res.GetCpu().GetPeriod().GetValue(),
		MemoryLimit: res.GetMemory().GetLimit().GetValue(),
	}}
	excl, ok := r.classes[key]
	if !ok {
		excl = policy.Classify(policy.QoSFromCgroupParent(key.parent), key.res).Exclusive
		r.classes[key] = excl
	}
	return excl
}

// classKey is what decides a container's class.
type classKey struct {
	parent string
	res    policy.Resources
}

// ExpectShared says that a container the test knows the plugin cannot pin
// (no pod UID, say) runs on the shared pool, though its resources ask for
// exclusive CPUs.
func (r *fakeRuntime) ExpectShared(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expectShared[id] = true
	if c := r.containers[id]; c != nil {
		r.track(c)
	}
}

// check records a violation of the no-overlap invariant among running
// containers. It runs after every single applied update, so it reads the
// per-CPU counts that track keeps (see overlaps) and only looks closer
// when they show an overlap: a check costs nothing, an update as many
// steps as CPUs change.
func (r *fakeRuntime) check(after string) {
	if r.unchecked.Load() || r.overlaps.bad == 0 {
		return
	}
	r.explain(after)
}

// track brings the invariant check's counts up to date with container c
// (its cpuset, resources and state, and whether it still exists), after
// any change of it. Called with mu held.
func (r *fakeRuntime) track(c *api.Container) {
	running := c.State != api.ContainerState_CONTAINER_STOPPED && r.containers[c.Id] == c
	m, ok := r.parse(c.Linux.Resources.Cpu.Cpus)
	if !ok {
		if running && !r.unchecked.Load() {
			r.violations = append(r.violations, fmt.Sprintf("%s has invalid cpuset %q", c.Name, c.Linux.Resources.Cpu.Cpus))
		}
		m = nil
	}
	r.overlaps.set(c.Id, m, r.exclusive(c), running)
}

// untrack drops a removed container from the invariant check's counts.
func (r *fakeRuntime) untrack(id string) {
	r.overlaps.set(id, nil, false, false)
}

// resync rebuilds the invariant check's counts from every container.
func (r *fakeRuntime) resync() {
	r.overlaps = newOverlaps()
	for _, c := range r.containers {
		r.track(c)
	}
}

// overlaps counts, for every CPU, the running exclusive and shared
// containers whose cpuset holds it, and how many CPUs are held by two
// exclusive containers or by an exclusive and a shared one.
type overlaps struct {
	sets              map[string]countedSet
	exclusive, shared []int32
	bad               int
}

// countedSet is a container's cpuset as counted.
type countedSet struct {
	mask      cpumask.Mask
	exclusive bool
}

func newOverlaps() *overlaps { return &overlaps{sets: map[string]countedSet{}} }

// set makes container id count with mask (nothing when not running).
func (o *overlaps) set(id string, mask cpumask.Mask, exclusive, running bool) {
	old, had := o.sets[id]
	if had && running && old.exclusive == exclusive {
		// Only the CPUs that change: a shared container's update moves a
		// few CPUs of a pool of thousands.
		for w := 0; w < max(len(old.mask), len(mask)); w++ {
			var a, b uint64
			if w < len(old.mask) {
				a = old.mask[w]
			}
			if w < len(mask) {
				b = mask[w]
			}
			for x := a ^ b; x != 0; x &= x - 1 {
				bit := bits.TrailingZeros64(x)
				if a&(1<<bit) != 0 {
					o.count(w*64+bit, exclusive, -1)
				} else {
					o.count(w*64+bit, exclusive, 1)
				}
			}
		}
		o.sets[id] = countedSet{mask: mask, exclusive: exclusive}
		return
	}
	if had {
		for cpu := range old.mask.All() {
			o.count(cpu, old.exclusive, -1)
		}
		delete(o.sets, id)
	}
	if running {
		for cpu := range mask.All() {
			o.count(cpu, exclusive, 1)
		}
		o.sets[id] = countedSet{mask: mask, exclusive: exclusive}
	}
}

// count adds delta to the exclusive or shared holders of cpu.
func (o *overlaps) count(cpu int, exclusive bool, delta int32) {
	if cpu >= len(o.exclusive) {
		n := max(cpu+1, 2*len(o.exclusive))
		o.exclusive = append(o.exclusive, make([]int32, n-len(o.exclusive))...)
		o.shared = append(o.shared, make([]int32, n-len(o.shared))...)
	}
	was := o.overlapping(cpu)
	if exclusive {
		o.exclusive[cpu] += delta
	} else {
		o.shared[cpu] += delta
	}
	if now := o.overlapping(cpu); now != was {
		if now {
			o.bad++
		} else {
			o.bad--
		}
	}
}

func (o *overlaps) overlapping(cpu int) bool {
	return o.exclusive[cpu] >= 2 || (o.exclusive[cpu] >= 1 && o.shared[cpu] >= 1)
}

// explain records which containers overlap (the slow, precise check, run
// only once check found an overlap).
func (r *fakeRuntime) explain(after string) {
	applied := map[string]cpuset.CPUSet{}
	excl := map[string]bool{}
	for id, c := range r.containers {
		if c.State == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		cpus, err := cpuset.Parse(c.Linux.Resources.Cpu.Cpus)
		if err != nil {
			continue
		}
		applied[id] = cpus
		excl[id] = r.exclusive(c)
	}
	if err := policy.CheckApplied(applied, func(id string) bool { return excl[id] }); err != nil {
		r.violations = append(r.violations, fmt.Sprintf("after %s: %v", after, err))
	}
}

// parse returns the bitmap of a cpuset text, parsed once per distinct text.
func (r *fakeRuntime) parse(text string) (cpumask.Mask, bool) {
	if m, ok := r.parsed[text]; ok {
		return m, m != nil
	}
	cpus, err := cpumask.Parse(text, cpumask.MaxID)
	var m cpumask.Mask
	if err == nil {
		m, _ = cpumask.Of(cpus)
		if m == nil {
			m = cpumask.Mask{}
		}
	}
	if len(r.parsed) > 1<<16 { // a long run: start over rather than grow without bound
		clear(r.parsed)
	}
	r.parsed[text] = m
	return m, m != nil
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

// waitPluginGone waits until the runtime has noticed that the plugin's
// connection closed. It notices asynchronously, as containerd does: a
// request relayed to the plugin meanwhile fails with "ttrpc: closed". The
// probe is the removal of a pod nobody knows, which a live plugin ignores
// and a runtime without plugins does not relay.
func (r *fakeRuntime) waitPluginGone(t testing.TB) {
	t.Helper()
	probe := &api.PodSandbox{Id: "sandbox-probe", Name: "probe", Uid: "probe-uid", Namespace: "probe",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/besteffort/podprobe-uid"}}
	waitFor(t, "the runtime to drop the stopped plugin", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		ctx, cancel := r.ctx()
		defer cancel()
		return r.nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: probe}) == nil
	})
}

// RunPod starts a pod sandbox (with p.Resources as its pod resources, when
// set).
func (r *fakeRuntime) RunPod(p policy.Pod) (*api.PodSandbox, error) {
	pod := &api.PodSandbox{Id: "sandbox-" + p.UID, Name: p.Name, Uid: p.UID, Namespace: p.Namespace,
		Linux: &api.LinuxPodSandbox{CgroupParent: p.CgroupParent}}
	if p.Resources != (policy.Resources{}) {
		pod.Linux.PodResources = toNRIResources(p.Resources)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	if err := r.timed("RunPodSandbox", func() error { return r.nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}) }); err != nil {
		return nil, err
	}
	r.pods[pod.Id] = pod
	return pod, nil
}

// CreateContainer creates and starts a container: CreateContainer (other
// containers' updates applied first, then the container created with its
// adjusted cpuset), PostCreateContainer, StartContainer, PostStartContainer.
func (r *fakeRuntime) CreateContainer(pod *api.PodSandbox, name string, res policy.Resources) (*api.Container, error) {
	r.mu.Lock()
	r.nextID++
	id := fmt.Sprintf("%s-%s-%d", pod.Name, name, r.nextID)
	r.mu.Unlock()
	return r.CreateContainerWithID(pod, id, name, res)
}

// CreateContainerWithID is CreateContainer with a container id of the
// caller's: a runtime bug that reuses an id, or gives none.
func (r *fakeRuntime) CreateContainerWithID(pod *api.PodSandbox, id, name string, res policy.Resources) (*api.Container, error) {
	r.mu.Lock()
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
	var rpl *api.CreateContainerResponse
	err := r.timed("CreateContainer", func() (err error) {
		rpl, err = r.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
		return err
	})
	if err != nil {
		// containerd undoes a failed creation: StopContainer and
		// RemoveContainer with the refused container's pod and id
		// (internal/cri/nri UndoCreateContainer), whose reply is not
		// applied.
		undo := &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_STOPPED}
		_, _ = r.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: undo})
		_ = r.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: undo})
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
	r.track(c)
	r.check("creation of " + name)
	err = r.timed("PostCreateContainer", func() error {
		return r.nri.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: c})
	})
	if err == nil {
		err = r.timed("StartContainer", func() error {
			return r.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: c})
		})
	}
	c.State = api.ContainerState_CONTAINER_RUNNING
	if err == nil {
		err = r.timed("PostStartContainer", func() error {
			return r.nri.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: c})
		})
	}
	r.mu.Unlock()
	return c, err
}

// CreateContainerFailing plays a creation that fails after the plugins
// answered (runc refuses the spec, say): the reply's updates are applied,
// the container never exists, and containerd sends StopContainer and
// RemoveContainer for it.
func (r *fakeRuntime) CreateContainerFailing(pod *api.PodSandbox, name string, res policy.Resources) error {
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
func (r *fakeRuntime) UpdateContainer(c *api.Container, res policy.Resources) error {
	_, err := r.updateContainer(c, res)
	return err
}

// updateContainer is UpdateContainer; it also returns how long the NRI
// request itself took (request, plugin decision and commit, reply).
func (r *fakeRuntime) updateContainer(c *api.Container, res policy.Resources) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.pods[c.PodSandboxId]
	ctx, cancel := r.ctx()
	defer cancel()
	start := time.Now()
	var rpl *api.UpdateContainerResponse
	err := r.timed("UpdateContainer", func() (err error) {
		rpl, err = r.nri.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: c, LinuxResources: toNRIResources(res)})
		return err
	})
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	r.applyUpdateReply(c, res, rpl.GetUpdate())
	return took, r.timed("PostUpdateContainer", func() error {
		return r.nri.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: c})
	})
}

// applyUpdateReply applies an UpdateContainer reply: the other
// containers' updates in order, then the target with the requested
// resources and the cpuset the plugin chose.
func (r *fakeRuntime) applyUpdateReply(c *api.Container, res policy.Resources, updates []*api.ContainerUpdate) {
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
	r.track(c)
	r.check("update of " + c.Name)
}

// StopContainer stops a container and applies the reply's updates.
func (r *fakeRuntime) StopContainer(c *api.Container) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	c.State = api.ContainerState_CONTAINER_STOPPED
	r.track(c)
	var rpl *api.StopContainerResponse
	err := r.timed("StopContainer", func() (err error) {
		rpl, err = r.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: r.pods[c.PodSandboxId], Container: c})
		return err
	})
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
	r.untrack(c.Id)
	return r.timed("RemoveContainer", func() error {
		return r.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: r.pods[c.PodSandboxId], Container: c})
	})
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
	if err := r.timed("StopPodSandbox", func() error { return r.nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod}) }); err != nil {
		return err
	}
	delete(r.pods, pod.Id)
	return r.timed("RemovePodSandbox", func() error { return r.nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}) })
}

// UpdatePod relays CRI UpdatePodSandboxResources.
func (r *fakeRuntime) UpdatePod(pod *api.PodSandbox, res policy.PodResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	err := r.timed("UpdatePodSandbox", func() error {
		_, err := r.nri.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: pod,
			OverheadLinuxResources: toNRIResources(res.Overhead), LinuxResources: toNRIResources(res.Resources)})
		return err
	})
	if err != nil {
		return err
	}
	return r.timed("PostUpdatePodSandbox", func() error {
		return r.nri.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: pod})
	})
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

func toNRIResources(r policy.Resources) *api.LinuxResources {
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

func fromNRIResources(r *api.LinuxResources) policy.Resources {
	return policy.Resources{
		CPUShares:   r.GetCpu().GetShares().GetValue(),
		CPUQuota:    r.GetCpu().GetQuota().GetValue(),
		CPUPeriod:   r.GetCpu().GetPeriod().GetValue(),
		MemoryLimit: r.GetMemory().GetLimit().GetValue(),
	}
}

// TestRuntimeCheckFindsOverlaps checks the checker: without a plugin every
// container gets every CPU, so a second pinned container overlaps the first
// and a shared one both; removing them clears the counts.
func TestRuntimeCheckFindsOverlaps(t *testing.T) {
	rt := newFakeRuntime(t, cpuset.New(0, 1, 2, 3))
	g1 := mustCreate(t, rt, pod(t, rt, "g1", "guaranteed"), "app", guaranteed(1))
	if v := rt.Violations(); len(v) != 0 {
		t.Fatalf("one container: %v", v)
	}
	mustCreate(t, rt, pod(t, rt, "g2", "guaranteed"), "app", guaranteed(1))
	v := rt.Violations()
	if len(v) != 1 || !strings.Contains(v[0], "is applied to exclusive containers") {
		t.Fatalf("two pinned containers on every CPU: %v", v)
	}
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(100))
	if v := rt.Violations(); len(v) != 2 || !strings.Contains(v[1], "and to a shared container") {
		t.Fatalf("and a shared one: %v", v)
	}
	for _, c := range []*api.Container{g1, web} {
		if err := rt.StopContainer(c); err != nil {
			t.Fatal(err)
		}
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.overlaps.bad != 0 {
		t.Errorf("%d CPUs still counted overlapping with one container left", rt.overlaps.bad)
	}
}
