// Package fakeruntime plays containerd 2.4's side of NRI in-process, with
// NRI's own runtime library (github.com/containerd/nri/pkg/adaptation) over
// a real socket, for tests of a plugin. Its Runtime holds one lock while it
// delivers an event and applies the reply, applies the updates of other
// containers in the order given and the target's last, applies
// unsolicited updates under the same lock, and checks after every single
// applied update that no CPU is in two exclusive containers' cpusets nor
// in an exclusive and a shared one (see Violations). It plays a kubelet's
// pod lives as containerd relays them: several sandboxes per pod, exit
// codes, containerd's NRI state map, containerd's restart and the node's
// reboot.
package fakeruntime

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// Runtime plays containerd 2.4's NRI integration. Its methods are safe for
// concurrent use. The pods and containers it returns are its own: read
// only their ids, names and cgroups paths, or change them within Locked.
type Runtime struct {
	t      testing.TB
	online cpuset.CPUSet
	dir    string
	socket string
	// options are the caller's options of NRI's runtime library.
	options []adaptation.Option
	// life is containerd's current life (see nri.go), nri its NRI
	// adaptation. Both change under mu; nri is atomic for
	// BlockPluginSync, which must not take mu.
	life *life
	nri  atomic.Pointer[adaptation.Adaptation]

	// mu is containerd's NRI lock: held while an event is delivered and its
	// reply applied, and while unsolicited updates are applied.
	mu sync.Mutex
	// pods holds the pod sandboxes by id, containers the containers.
	pods       map[string]*api.PodSandbox
	containers map[string]*api.Container
	// sandboxes counts the sandboxes run for each pod UID; notReady names
	// the stopped ones.
	sandboxes map[string]int
	notReady  map[string]bool
	// relayed is containerd's NRI state map (see nri.go).
	relayed map[string]nriState
	// unsolicited counts updates that arrived outside of replies.
	unsolicited int
	// violations records every invariant violation seen.
	violations []string
	// log records every update applied, in order.
	log []Update
	// unchecked suspends the invariant check (while no plugin runs, as on a
	// node where the plugin is down, new containers get every CPU).
	// Atomic: it is turned off at the moment a plugin is killed, while a
	// request may hold mu.
	unchecked atomic.Bool
	// cgroupRoot, when set, is a cgroup tree where the runtime writes
	// every container's cpuset.cpus (see SetCgroupRoot).
	cgroupRoot string
	cgroupV2   bool
	// failing names containers whose updates fail (containerd logs such a
	// failure of another container and goes on).
	failing map[string]bool
	nextID  int

	// syncs counts the plugins' Synchronizes applied; synced is closed
	// and replaced at each.
	syncs  int
	synced chan struct{}
	// syncDelay is how long a plugin's Synchronize waits before it is
	// sent (see DelaySync), in nanoseconds.
	syncDelay atomic.Int64
	// inRequest counts the NRI requests in progress.
	inRequest atomic.Int32
	// ignoresFailurePolicies plays a runtime with NRI older than v0.12.5,
	// where a request goes on without a plugin that failed to answer it.
	ignoresFailurePolicies bool
	// stats, when not nil, records every request's round trip.
	stats *Stats

	// expectShared names containers the test expects on the shared pool
	// whatever their resources say (see ExpectShared).
	expectShared map[string]bool
	// The invariant check's counts and caches.
	overlaps *overlaps
	parsed   map[string]cpumask.Mask
	classes  map[classKey]bool
}

// New starts a runtime on a machine whose online CPUs are online, with its
// NRI socket in a test directory (Socket); t's cleanup stops it.
func New(t testing.TB, online cpuset.CPUSet) *Runtime {
	t.Helper()
	return NewWith(t, online)
}

// NewWith is New with more options of NRI's runtime library (a default
// validator, say).
func NewWith(t testing.TB, online cpuset.CPUSet, options ...adaptation.Option) *Runtime {
	t.Helper()
	dir := t.TempDir()
	r := &Runtime{
		t:          t,
		online:     online,
		dir:        dir,
		socket:     filepath.Join(dir, "nri.sock"),
		options:    options,
		synced:     make(chan struct{}),
		pods:       map[string]*api.PodSandbox{},
		containers: map[string]*api.Container{},
		sandboxes:  map[string]int{},
		notReady:   map[string]bool{},
		failing:    map[string]bool{},

		expectShared: map[string]bool{},
		overlaps:     newOverlaps(),
		parsed:       map[string]cpumask.Mask{},
		classes:      map[classKey]bool{},
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startNRI()
	t.Cleanup(func() { r.nri.Load().Stop() })
	return r
}

// Socket returns the path of the runtime's NRI socket.
func (r *Runtime) Socket() string { return r.socket }

// SetCgroupRoot makes the runtime write every container's cpuset.cpus,
// as runc does, into a cgroup tree at dir, for the plugin to verify: a
// cgroup v1 tree (the cpuset hierarchy at dir/cpuset), or v2 when v2 is
// set. A pod whose cgroup parent is a systemd slice gets the systemd
// driver's paths. Set it before the first container is created.
func (r *Runtime) SetCgroupRoot(dir string, v2 bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cgroupRoot, r.cgroupV2 = dir, v2
}

// CgroupRoot returns the cgroup tree's root ("" when none is written).
func (r *Runtime) CgroupRoot() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cgroupRoot
}

// CgroupDir returns the directory of a container's cgroup in the tree
// (see SetCgroupRoot).
func (r *Runtime) CgroupDir(c *api.Container) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cgroupDir(c)
}

// SetIgnoresFailurePolicies plays a runtime with NRI older than v0.12.5
// (containerd 2.4.2 carries v0.12.3): a request goes on without a plugin
// that failed to answer it, whatever the plugin's failure policy.
func (r *Runtime) SetIgnoresFailurePolicies(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ignoresFailurePolicies = on
}

// InRequest reports whether an NRI request is in progress.
func (r *Runtime) InRequest() bool { return r.inRequest.Load() > 0 }

// BlockPluginSync waits for a plugin's Synchronize in progress to end and
// blocks the next ones until Unblock. NRI delivers events to a plugin only
// once its Synchronize returned: BlockPluginSync().Unblock() waits for
// that, as containerd does before it relays a CRI request.
func (r *Runtime) BlockPluginSync() *adaptation.PluginSyncBlock {
	return r.nri.Load().BlockPluginSync()
}

// synchronize hands the pods and containers to a connecting plugin and
// applies its updates, as containerd's syncPlugin does: every pod sandbox,
// ready or not, with the pod resources it was run with, and every
// container that has not stopped, with its current resources
// (containerd's ListContainers leaves out the exited ones). The first
// call of a life is NRI's start synchronizing its pre-installed plugins
// (none), within startNRI, which holds mu.
func (r *Runtime) synchronize(ctx context.Context, l *life, cb adaptation.SyncCB) error {
	starting := l.started.CompareAndSwap(false, true)
	if !starting {
		if d := time.Duration(r.syncDelay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if l != r.life {
			return errors.New("containerd restarted")
		}
	}
	pods := slices.Collect(maps.Values(r.pods))
	var ctrs []*api.Container
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		if c := r.containers[id]; c.State != api.ContainerState_CONTAINER_STOPPED {
			ctrs = append(ctrs, c)
		}
	}
	r.syncState(ctrs)
	updates, err := cb(ctx, pods, ctrs)
	if err != nil {
		return err
	}
	r.apply("Synchronize", updates)
	if !starting {
		r.syncs++
		close(r.synced)
		r.synced = make(chan struct{})
	}
	return nil
}

// DelaySync makes every later Synchronize of a connecting plugin wait d
// after the plugin was configured, as containerd's does while its sync
// lock waits for the creations and removals in flight.
func (r *Runtime) DelaySync(d time.Duration) { r.syncDelay.Store(int64(d)) }

// Syncs returns how many times a plugin synchronized with the runtime.
func (r *Runtime) Syncs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncs
}

// Stats are what a load run measures at the runtime: each request's round
// trip through NRI (request, the plugin's decision and commit, reply), and
// the updates of other containers applied.
type Stats struct {
	// Latency holds the round trips by event, in order.
	Latency map[string][]time.Duration
	// ReplyUpdates counts the updates of other containers that came with
	// replies; Unsolicited those that came on their own.
	ReplyUpdates, Unsolicited int
}

// RecordStats starts recording Stats (from zero).
func (r *Runtime) RecordStats() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats = &Stats{Latency: map[string][]time.Duration{}}
}

// Stats returns a copy of what was recorded since RecordStats.
func (r *Runtime) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stats == nil {
		return Stats{}
	}
	out := Stats{Latency: map[string][]time.Duration{},
		ReplyUpdates: r.stats.ReplyUpdates, Unsolicited: r.stats.Unsolicited}
	for k, v := range r.stats.Latency {
		out.Latency[k] = slices.Clone(v)
	}
	return out
}

// timed runs one NRI request and records its round trip. Called with mu
// held.
func (r *Runtime) timed(event string, call func() error) error {
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
		r.stats.Latency[event] = append(r.stats.Latency[event], time.Since(start))
	}
	return err
}

// updateContainers applies unsolicited updates under the NRI lock (none
// that reach a containerd that restarted since).
func (r *Runtime) updateContainers(_ context.Context, l *life, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l != r.life {
		return updates, nil
	}
	r.unsolicited += len(updates)
	if r.stats != nil {
		r.stats.Unsolicited += len(updates)
	}
	return r.apply("unsolicited", updates), nil
}

// Update is one update as the runtime applied it.
type Update struct {
	// Origin is where it came from: "Synchronize", "pre-create",
	// "pre-update" (another container's, in an UpdateContainer reply),
	// "target" (the updated container's), "post-stop" or "unsolicited".
	Origin string
	// Container is the container's name, CPUs its cpuset after the update.
	Container, CPUs string
}

// Log returns the updates applied so far.
func (r *Runtime) Log() []Update {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// SetChecking turns the invariant check on or off (and checks at once when
// turned on). Turning it off does not wait for a request in progress.
func (r *Runtime) SetChecking(on bool) {
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
func (r *Runtime) Unsolicited() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unsolicited
}

// apply applies updates one at a time, checking after each; it returns
// those naming unknown containers (containerd ignores them).
func (r *Runtime) apply(origin string, updates []*api.ContainerUpdate) []*api.ContainerUpdate {
	if r.stats != nil && origin != "unsolicited" {
		r.stats.ReplyUpdates += len(updates)
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
		r.log = append(r.log, Update{origin, c.Name, c.Linux.Resources.Cpu.Cpus})
		r.writeCgroup(c)
		r.track(c)
		r.check(fmt.Sprintf("%s update of %s", origin, c.Name))
	}
	return failed
}

// writeCgroup writes a container's cpuset where the plugin verifies it.
func (r *Runtime) writeCgroup(c *api.Container) {
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
func (r *Runtime) cgroupDir(c *api.Container) string {
	base := r.cgroupRoot
	if !r.cgroupV2 {
		base = filepath.Join(base, "cpuset")
	}
	if pod := r.pods[c.PodSandboxId]; pod != nil && strings.HasSuffix(path.Base(pod.Linux.CgroupParent), ".slice") {
		return filepath.Join(base, pod.Linux.CgroupParent, "cri-containerd-"+c.Id+".scope")
	}
	return filepath.Join(base, c.Linux.CgroupsPath)
}

// SetFailing makes the updates of the containers named name fail (or
// succeed again).
func (r *Runtime) SetFailing(name string, failing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing[name] = failing
}

// ExpectShared says that a container the test knows the plugin cannot pin
// (no pod UID, say) runs on the shared pool, though its resources ask for
// exclusive CPUs.
func (r *Runtime) ExpectShared(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expectShared[id] = true
	if c := r.containers[id]; c != nil {
		r.track(c)
	}
}

// Violations returns the invariant violations seen so far.
func (r *Runtime) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.violations)
}

func (r *Runtime) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// Locked runs f with the runtime's lock held: for a test that changes a
// pod or a container the runtime holds (its UID, its cpuset) behind the
// runtime's back, without racing its requests.
func (r *Runtime) Locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// Send runs f with the runtime's lock held and its NRI adaptation: for
// requests containerd would not send (malformed payloads, duplicate ids).
// Nothing f sends changes what the runtime holds, nor is applied.
func (r *Runtime) Send(f func(ctx context.Context, nri *adaptation.Adaptation) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	return f(ctx, r.nri.Load())
}

// WaitPluginGone waits until the runtime has noticed that the plugin's
// connection closed. It notices asynchronously, as containerd does: a
// request relayed to the plugin meanwhile fails with "ttrpc: closed". The
// probe is the removal of a pod nobody knows, which a live plugin ignores
// and a runtime without plugins does not relay.
func (r *Runtime) WaitPluginGone() {
	r.t.Helper()
	probe := &api.PodSandbox{Id: "sandbox-probe", Name: "probe", Uid: "probe-uid", Namespace: "probe",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/besteffort/podprobe-uid"}}
	r.waitFor("the runtime to drop the stopped plugin", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		ctx, cancel := r.ctx()
		defer cancel()
		return r.nri.Load().RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: probe}) == nil
	})
}

// waitFor polls cond for up to 5 s, and fails the test when it does not
// hold by then.
func (r *Runtime) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// RunPod starts a pod sandbox (with p.Resources as its pod resources, when
// set), as CRI RunPodSandbox does. Each sandbox has an id of its own,
// sandbox-<UID>-<n> for the pod's nth: the kubelet runs a new sandbox for
// a pod whose sandbox died.
func (r *Runtime) RunPod(p policy.Pod) (*api.PodSandbox, error) {
	return r.RunPodWithOverhead(p, policy.Resources{})
}

// RunPodWithOverhead is RunPod of a pod whose RuntimeClass has an overhead
// (overhead, when set): the sandbox carries it in Linux.PodOverhead, as
// containerd passes on the kubelet's LinuxPodSandboxConfig.Overhead, apart
// from the pod resources (which the kubelet computes without it).
func (r *Runtime) RunPodWithOverhead(p policy.Pod, overhead policy.Resources) (*api.PodSandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes[p.UID]++
	pod := &api.PodSandbox{Id: fmt.Sprintf("sandbox-%s-%d", p.UID, r.sandboxes[p.UID]),
		Name: p.Name, Uid: p.UID, Namespace: p.Namespace,
		Linux: &api.LinuxPodSandbox{CgroupParent: p.CgroupParent}}
	if p.Resources != (policy.Resources{}) {
		pod.Linux.PodResources = NRIResources(p.Resources)
	}
	if overhead != (policy.Resources{}) {
		pod.Linux.PodOverhead = NRIResources(overhead)
	}
	ctx, cancel := r.ctx()
	defer cancel()
	if err := r.runPodSandbox(ctx, pod); err != nil {
		return nil, err
	}
	r.pods[pod.Id] = pod
	return pod, nil
}

// NextContainerID returns the id the next container CreateContainer
// creates will have.
func (r *Runtime) NextContainerID(pod *api.PodSandbox, name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%s-%s-%d", pod.Name, name, r.nextID+1)
}

// CreateContainer creates and starts a container: CreateContainer (other
// containers' updates applied first, then the container created with its
// adjusted cpuset), PostCreateContainer, StartContainer, PostStartContainer.
// In a sandbox that is not ready it fails, as containerd's does.
func (r *Runtime) CreateContainer(pod *api.PodSandbox, name string, res policy.Resources) (*api.Container, error) {
	r.mu.Lock()
	r.nextID++
	id := fmt.Sprintf("%s-%s-%d", pod.Name, name, r.nextID)
	r.mu.Unlock()
	return r.CreateContainerWithID(pod, id, name, res)
}

// CreateContainerWithID is CreateContainer with a container id of the
// caller's: a runtime bug that reuses an id, or gives none.
func (r *Runtime) CreateContainerWithID(pod *api.PodSandbox, id, name string, res policy.Resources) (*api.Container, error) {
	return r.createWith(pod, id, name, res, nil)
}

// CreateContainerWithDevices is CreateContainer of a container given
// device nodes (a device plugin's, CDI's, a privileged container's).
func (r *Runtime) CreateContainerWithDevices(pod *api.PodSandbox, name string, res policy.Resources, devices []*api.LinuxDevice) (*api.Container, error) {
	r.mu.Lock()
	r.nextID++
	id := fmt.Sprintf("%s-%s-%d", pod.Name, name, r.nextID)
	r.mu.Unlock()
	return r.createWith(pod, id, name, res, devices)
}

func (r *Runtime) createWith(pod *api.PodSandbox, id, name string, res policy.Resources, devices []*api.LinuxDevice) (*api.Container, error) {
	r.mu.Lock()
	if err := r.ready(pod); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	c := &api.Container{
		Id: id, PodSandboxId: pod.Id, Name: name,
		State: api.ContainerState_CONTAINER_CREATED, CreatedAt: time.Now().UnixNano(),
		Linux: &api.LinuxContainer{
			Resources:   NRIResources(res),
			CgroupsPath: cgroupsPath(pod.Linux.CgroupParent, id),
			Devices:     devices,
		},
	}
	ctx, cancel := r.ctx()
	defer cancel()
	rpl, err := r.createContainer(ctx, pod, c)
	if err != nil {
		// containerd undoes a failed creation: StopContainer and
		// RemoveContainer with the refused container's pod and id
		// (internal/cri/nri UndoCreateContainer).
		undo := &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_STOPPED}
		_ = r.stopContainer(ctx, pod, undo)
		_ = r.removeContainer(ctx, pod, undo)
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
		return r.nri.Load().PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: c})
	})
	if err == nil {
		err = r.startContainer(ctx, pod, c)
	}
	c.State, c.StartedAt = api.ContainerState_CONTAINER_RUNNING, time.Now().UnixNano()
	if err == nil {
		err = r.timed("PostStartContainer", func() error {
			return r.nri.Load().PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: c})
		})
	}
	r.mu.Unlock()
	return c, err
}

// CreateContainerFailing plays a creation that fails after the plugins
// answered (runc refuses the spec, say): the reply's updates are applied,
// the container never exists, and containerd sends StopContainer and
// RemoveContainer for it.
func (r *Runtime) CreateContainerFailing(pod *api.PodSandbox, name string, res policy.Resources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ready(pod); err != nil {
		return err
	}
	r.nextID++
	id := fmt.Sprintf("%s-%s-%d", pod.Name, name, r.nextID)
	c := &api.Container{
		Id: id, PodSandboxId: pod.Id, Name: name,
		State: api.ContainerState_CONTAINER_CREATED, CreatedAt: time.Now().UnixNano(),
		Linux: &api.LinuxContainer{Resources: NRIResources(res), CgroupsPath: cgroupsPath(pod.Linux.CgroupParent, id)},
	}
	ctx, cancel := r.ctx()
	defer cancel()
	rpl, err := r.createContainer(ctx, pod, c)
	if err != nil {
		return err
	}
	r.apply("pre-create", rpl.GetUpdate())
	c.State = api.ContainerState_CONTAINER_STOPPED
	if err := r.stopContainer(ctx, pod, c); err != nil {
		return err
	}
	return r.removeContainer(ctx, pod, c)
}

// UpdateContainer resizes a container like CRI UpdateContainerResources:
// UpdateContainer (others first, then the target with the resources the
// plugins returned), then PostUpdateContainer.
func (r *Runtime) UpdateContainer(c *api.Container, res policy.Resources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.pods[c.PodSandboxId]
	ctx, cancel := r.ctx()
	defer cancel()
	var rpl *api.UpdateContainerResponse
	err := r.timed("UpdateContainer", func() (err error) {
		rpl, err = r.nri.Load().UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: c, LinuxResources: NRIResources(res)})
		return err
	})
	if err != nil {
		return err
	}
	r.applyUpdateReply(c, res, rpl.GetUpdate())
	return r.timed("PostUpdateContainer", func() error {
		return r.nri.Load().PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: c})
	})
}

// applyUpdateReply applies an UpdateContainer reply: the other
// containers' updates in order, then the target with the requested
// resources and the cpuset the plugin chose.
func (r *Runtime) applyUpdateReply(c *api.Container, res policy.Resources, updates []*api.ContainerUpdate) {
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
	c.Linux.Resources = NRIResources(merged)
	c.Linux.Resources.Cpu.Cpus, c.Linux.Resources.Cpu.Mems = cpus, mems
	r.log = append(r.log, Update{"target", c.Name, cpus})
	r.writeCgroup(c)
	r.track(c)
	r.check("update of " + c.Name)
}

// ExitCodeKilled is the exit code of a container killed by SIGKILL.
const ExitCodeKilled = 128 + 9

// StopContainer stops a container as CRI StopContainer does: its process
// is killed (exit code ExitCodeKilled), NRI StopContainer is sent, and the
// reply's updates are applied.
func (r *Runtime) StopContainer(c *api.Container) error {
	return r.ExitContainer(c, ExitCodeKilled)
}

// ExitContainer plays a container's process exiting by itself with exit
// code code (a crash, an init container that completed): containerd's
// task-exit handler sends NRI StopContainer with the container stopped,
// its exit code and the time it finished, and applies the reply's
// updates. A container that stopped before keeps its exit code, and no
// second StopContainer is sent (see nri.go).
func (r *Runtime) ExitContainer(c *api.Container, code int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	r.exited(c, code)
	return r.stopContainer(ctx, r.podFor(c), c)
}

// exited marks a container's process gone, unless it was. Called with mu
// held.
func (r *Runtime) exited(c *api.Container, code int32) {
	if c.State == api.ContainerState_CONTAINER_STOPPED {
		return
	}
	c.State = api.ContainerState_CONTAINER_STOPPED
	c.ExitCode, c.FinishedAt = code, time.Now().UnixNano()
	r.track(c)
}

// podFor returns a container's pod sandbox, or one with only its id when
// the runtime has none, as containerd sends it.
func (r *Runtime) podFor(c *api.Container) *api.PodSandbox {
	if pod := r.pods[c.PodSandboxId]; pod != nil {
		return pod
	}
	return &api.PodSandbox{Id: c.PodSandboxId}
}

// RemoveContainer removes a container as CRI RemoveContainer does: one
// still running is killed first (ExitCodeKilled), then NRI RemoveContainer
// is sent (after StopContainer when containerd's NRI state map holds the
// container as running, see nri.go). Removing an unknown container sends
// nothing.
func (r *Runtime) RemoveContainer(c *api.Container) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.containers[c.Id] == nil {
		return nil
	}
	ctx, cancel := r.ctx()
	defer cancel()
	r.exited(c, ExitCodeKilled)
	delete(r.containers, c.Id)
	r.untrack(c.Id)
	return r.removeContainer(ctx, r.podFor(c), c)
}

// ready returns why no container can be created in a pod sandbox (nil
// when one can). Called with mu held.
func (r *Runtime) ready(pod *api.PodSandbox) error {
	switch {
	case r.pods[pod.GetId()] == nil:
		return fmt.Errorf("sandbox %q not found", pod.GetId())
	case r.notReady[pod.GetId()]:
		return fmt.Errorf("sandbox container %q is not running", pod.GetId())
	}
	return nil
}

// StopPod stops a pod sandbox as CRI StopPodSandbox does: its running
// containers are stopped (StopContainer), then NRI StopPodSandbox is sent
// when containerd's NRI state map holds the sandbox as running (see
// nri.go). The sandbox stays, not ready: no container can be created in
// it. StopPod returns the errors of the NRI requests, which containerd
// logs and goes on.
func (r *Runtime) StopPod(pod *api.PodSandbox) error {
	var errs []error
	for _, c := range r.containersOf(pod) {
		if r.isRunning(c) {
			errs = append(errs, r.StopContainer(c))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pods[pod.Id] == nil {
		return errors.Join(errs...)
	}
	r.notReady[pod.Id] = true
	ctx, cancel := r.ctx()
	defer cancel()
	errs = append(errs, r.stopPodSandbox(ctx, pod))
	return errors.Join(errs...)
}

// RemovePod removes a pod sandbox as CRI RemovePodSandbox does: it is
// stopped (StopPod), each of its containers removed (RemoveContainer),
// then NRI RemovePodSandbox is sent when the state map holds the sandbox.
// The pod's other sandboxes stay. Removing an unknown sandbox sends
// nothing. RemovePod returns the errors of the NRI requests, which
// containerd logs and goes on.
func (r *Runtime) RemovePod(pod *api.PodSandbox) error {
	errs := []error{r.StopPod(pod)}
	for _, c := range r.containersOf(pod) {
		errs = append(errs, r.RemoveContainer(c))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pods[pod.Id] == nil {
		return errors.Join(errs...)
	}
	delete(r.pods, pod.Id)
	delete(r.notReady, pod.Id)
	ctx, cancel := r.ctx()
	defer cancel()
	errs = append(errs, r.removePodSandbox(ctx, pod))
	return errors.Join(errs...)
}

// Ready reports whether a pod sandbox runs: it was run, and neither
// stopped (StopPod) nor rebooted since.
func (r *Runtime) Ready(pod *api.PodSandbox) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready(pod) == nil
}

// isRunning reports whether a container has not stopped.
func (r *Runtime) isRunning(c *api.Container) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return c.State != api.ContainerState_CONTAINER_STOPPED
}

// UpdatePod relays CRI UpdatePodSandboxResources.
func (r *Runtime) UpdatePod(pod *api.PodSandbox, res policy.PodResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	err := r.timed("UpdatePodSandbox", func() error {
		_, err := r.nri.Load().UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: pod,
			OverheadLinuxResources: NRIResources(res.Overhead), LinuxResources: NRIResources(res.Resources)})
		return err
	})
	if err != nil {
		return err
	}
	return r.timed("PostUpdatePodSandbox", func() error {
		return r.nri.Load().PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: pod})
	})
}

func (r *Runtime) containersOf(pod *api.PodSandbox) []*api.Container {
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

// CPUs returns a running container's applied cpuset (false when it does
// not run, or its cpuset does not parse).
func (r *Runtime) CPUs(id string) (cpuset.CPUSet, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil || c.State == api.ContainerState_CONTAINER_STOPPED {
		return cpuset.New(), false
	}
	cpus, err := cpuset.Parse(c.Linux.Resources.Cpu.Cpus)
	return cpus, err == nil
}

// Applied returns every running container's cpuset, by container id.
func (r *Runtime) Applied() map[string]cpuset.CPUSet {
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

// Pods returns the runtime's pod sandboxes, by id.
func (r *Runtime) Pods() []*api.PodSandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*api.PodSandbox
	for _, id := range slices.Sorted(maps.Keys(r.pods)) {
		out = append(out, r.pods[id])
	}
	return out
}

// Running returns the running containers, by id.
func (r *Runtime) Running() []*api.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*api.Container
	for _, id := range slices.Sorted(maps.Keys(r.containers)) {
		if c := r.containers[id]; c.State != api.ContainerState_CONTAINER_STOPPED {
			out = append(out, c)
		}
	}
	return out
}

// PodOf returns a container's pod sandbox (nil when the runtime has none).
func (r *Runtime) PodOf(c *api.Container) *api.PodSandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[c.PodSandboxId]
}

// Exclusive reports whether the invariant check counts a container as
// holding exclusive CPUs: a Guaranteed container with whole CPUs that is
// not expected on the shared pool (ExpectShared).
func (r *Runtime) Exclusive(c *api.Container) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exclusive(c)
}

// NRIResources returns resources as NRI carries them (CRI's Linux
// container resources, without a cpuset).
func NRIResources(r policy.Resources) *api.LinuxResources {
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
