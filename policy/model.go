package policy

import (
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/pmap"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// Pod is what the policy needs to know of a pod sandbox.
type Pod struct {
	UID          string
	Namespace    string
	Name         string
	CgroupParent string
	// Resources are the pod-level resources the sandbox was created with
	// (NRI PodSandbox.Linux.PodResources: the runtime keeps them forever),
	// the pod's totals until an UpdatePodSandbox is accepted; zero when the
	// runtime gave none.
	Resources Resources
	// SandboxID is the id of the sandbox the event is about (a pod may
	// have several in its life: the kubelet re-creates a sandbox whose
	// pause container died, and every sandbox after a node reboot).
	SandboxID string
	// GuaranteedCPUs is the pod's exclusive CPU need as the kubelet
	// computes it from the pod's spec (its pod total of whole-CPU
	// containers: the largest of each init container's need and of the
	// sidecars' and app containers' sum); 0 when the spec is not known.
	GuaranteedCPUs int
	// Roles are what the pod's spec says its containers are, by name; nil
	// when the spec is not known.
	Roles map[string]Role
	// Containers are the containers of the pod's spec in the order the
	// kubelet admits them (spec.initContainers, then spec.containers),
	// with the exclusive CPUs each needs; nil when the spec is not known.
	// AdmitPod admits the pod from them.
	Containers []SpecContainer
}

// SpecContainer is a container of a pod's spec as the kubelet's admission
// sees it.
type SpecContainer struct {
	Name string
	Role Role
	// CPUs are the exclusive CPUs the kubelet's static policy gives it
	// (its guaranteedCPUs: the whole CPUs of a Guaranteed pod's
	// container with an integer CPU request, in a pod without pod-level
	// resources); 0 for a container of the shared pool.
	CPUs int
}

// PodInfo is what a pod's spec says of its containers.
type PodInfo struct {
	// Roles are the containers' roles by name.
	Roles map[string]Role
	// GuaranteedCPUs is the pod's exclusive CPU need as the kubelet
	// computes it (Pod.GuaranteedCPUs).
	GuaranteedCPUs int
	// Containers are the spec's containers in the kubelet's order
	// (Pod.Containers).
	Containers []SpecContainer
}

// WithInfo returns p with what its spec says of its containers.
func (p Pod) WithInfo(info PodInfo) Pod {
	p.Roles, p.GuaranteedCPUs, p.Containers = info.Roles, info.GuaranteedCPUs, info.Containers
	return p
}

// RoleOf returns what the pod's spec says container name is (RoleUnknown
// without the spec).
func (p Pod) RoleOf(name string) Role { return p.Roles[name] }

// QoS returns the pod's QoS class from its cgroup parent.
func (p Pod) QoS() QoSClass { return QoSFromCgroupParent(p.CgroupParent) }

// Container is a container as the runtime reports it.
type Container struct {
	ID   string
	Name string
	Pod  Pod
	// Resources are the container's CPU and memory values.
	Resources Resources
	// CPUs is the container's current cpuset as the runtime reports it
	// (Synchronize); empty when unknown.
	CPUs cpuset.CPUSet
	// Exited is true for a container whose process has stopped.
	Exited bool
	// Completed is true for a container that exited with code 0: the way
	// an init container ends (an exit the runtime reports without a code
	// counts as a failure).
	Completed bool
	// DeviceNodes are the NUMA nodes of its devices (cpuallocator/devices:
	// looked up once, when the container is created or first seen); 0 when
	// it has none with a known node. An exclusive container's assignment
	// records them (state.Assignment.DeviceNodes, deviceRecord).
	DeviceNodes cpuallocator.NodeMask
}

// deviceRecord is the checkpoint's record of the NUMA nodes of a
// container's devices: a state.NodeSet holds node n as bit n, as a
// cpuallocator.NodeMask does, and both hold nodes 0-63 only.
func deviceRecord(nodes cpuallocator.NodeMask) state.NodeSet { return state.NodeSet(nodes) }

// Role is what a container is to its pod, as the pod's spec says. The
// kubelet's static policy lets the containers a pod starts after an
// ordinary init container reuse the init container's CPUs; a sidecar (a
// restartable init container) and an app container keep theirs.
type Role int

// The roles.
const (
	// RoleUnknown: the pod's spec is not known. A container whose process
	// completed (exit code 0) before its pod created another container is
	// taken for an ordinary init container.
	RoleUnknown Role = iota
	RoleApp
	RoleInit
	RoleSidecar
)

// String names a role as the pod's spec does.
func (r Role) String() string {
	switch r {
	case RoleApp:
		return "container"
	case RoleInit:
		return "init container"
	case RoleSidecar:
		return "sidecar"
	}
	return "unknown"
}

// Tracked is the policy's record of a container the runtime runs.
type Tracked struct {
	ID     string
	PodUID string
	Name   string
	// Display names the container for humans: namespace/pod/container.
	Display string
	// Exclusive tells which pool the container runs on.
	Exclusive bool
	// CPULimitMilli is the container's CPU limit in milli-CPU as last
	// created or resized (0: none); UpdatePodSandbox compares the pod's
	// totals with the sum of them.
	CPULimitMilli int64
	// Stopped is set once the container's process is gone; it holds no
	// CPUs any more and is forgotten at RemoveContainer.
	Stopped bool
	// Completed is set when it stopped with exit code 0.
	Completed bool
	// SandboxID is the sandbox it runs in ("" when not known).
	SandboxID string
	// Role is what it is to its pod (RoleUnknown when not known).
	Role Role
	// DeviceNodes are the NUMA nodes of its devices (Container).
	DeviceNodes cpuallocator.NodeMask
	// RanBeside names the pod's containers that ran when it was created:
	// an init container's CPUs are not for them to reuse (a sidecar
	// started before it runs beside it again when the pod runs again).
	RanBeside []string
	// Seq is the order the model began to track it in: of two instances
	// of a name, the later one has the higher Seq (the runtime's ids say
	// nothing of their order). Set by Model.add.
	Seq uint64
}

// Sandbox is the policy's record of a pod sandbox the runtime has.
type Sandbox struct {
	PodUID string
	// Confirmed is set for a sandbox whose RunPodSandbox the plugin saw:
	// the runtime relays its StopPodSandbox and RemovePodSandbox. A
	// sandbox known only from a Synchronize may predate a restart of the
	// runtime, which then never relays its removal (containerd keeps the
	// sandboxes it relays events for in memory only).
	Confirmed bool
	// Stopped is set at its StopPodSandbox: the kubelet stops a sandbox
	// when it deletes its pod, re-creates it (a new one follows at once)
	// or the pod completed (and nothing follows).
	Stopped bool
}

// Model is everything the policy decides from: the persisted exclusive
// assignments and shared pool (State), the containers the runtime runs, and
// the CPUs released by shrinks the runtime has not confirmed yet. A Model is
// never changed in place by the policy: decisions carry a new one.
type Model struct {
	State *state.State
	// Containers maps container id → record, for every container known to
	// run (shared and exclusive).
	Containers pmap.Map[*Tracked]
	// Releasing maps the id of a container whose shrink is not confirmed yet
	// → the CPUs that shrink releases. Those CPUs belong to nobody until the
	// runtime confirms: they are neither allocated nor given to the shared
	// containers. In memory only: after a restart Synchronize sees the real
	// cpusets.
	Releasing map[string]cpuset.CPUSet
	// Lending are shared CPUs that an unsolicited update in flight gives to
	// shared containers. The runtime applies such an update whenever it gets
	// to it, possibly after a decision taken meanwhile, so these CPUs are
	// not handed out exclusively until the update has been delivered.
	Lending cpuset.CPUSet
	// Sandboxes maps sandbox id → record, for every sandbox known to
	// exist. A pod lives while one of its sandboxes does. Sandboxes, Ending
	// and Idle are shared between clones: a change copies the map first.
	Sandboxes pmap.Map[Sandbox]
	// Ending are the pods the Kubernetes API reports terminal or deleted
	// while some of their containers still run: their CPUs go back once
	// the last of those stops.
	Ending map[string]bool
	// Idle maps a pod that holds CPUs but none of whose containers runs,
	// and none of whose sandboxes the runtime would report removed, to
	// when it became so (ExpireOrphans).
	Idle map[string]time.Time
	// RemovedLimits keeps the CPU limit of a pod's container the runtime
	// removed (or, stopped, a Synchronize no longer lists: containerd
	// restarted) while its name holds an entry and no other container of
	// the name is known: the limit the kubelet last gave it, which a pod
	// resize compares with the spec (podMembers) as it would the tracked
	// container's. Shared between clones like Sandboxes; in memory only.
	RemovedLimits map[PodContainer]int64

	// recs are the records of Containers sorted by id (what walks every
	// container, Decision.Updates above all, reads them in order without a
	// lookup each). The slice is shared between clones and never changed
	// in place: adding, replacing or removing a container (add, edit,
	// remove) makes a new one.
	recs []*Tracked
	// seq is the last Tracked.Seq given.
	seq uint64
	// byPod indexes Containers and Sandboxes by pod UID (podIDs), so that
	// what a decision asks of one pod costs that pod's containers, not the
	// node's. Kept by add, remove, setSandbox and deleteSandbox; shared
	// between clones like Containers.
	byPod pmap.Map[podIDs]
}

// podIDs are the ids of a pod's tracked containers and known sandboxes,
// each sorted. The slices are never changed in place (a change stores new
// ones): clones share them.
type podIDs struct{ containers, sandboxes []string }

// podContainerIDs returns the ids of a pod's tracked containers, sorted
// (not to be changed).
func (m *Model) podContainerIDs(podUID string) []string { return m.byPod.Get(podUID).containers }

// podContainers yields a pod's tracked containers, by id in id order.
func (m *Model) podContainers(podUID string) iter.Seq2[string, *Tracked] {
	ids := m.podContainerIDs(podUID)
	return func(yield func(string, *Tracked) bool) {
		for _, id := range ids {
			if !yield(id, m.Containers.Get(id)) {
				return
			}
		}
	}
}

// indexPod changes the index entry of a pod with change, storing it (or
// dropping it when empty).
func (m *Model) indexPod(podUID string, change func(*podIDs)) {
	ids := m.byPod.Get(podUID)
	change(&ids)
	if len(ids.containers) == 0 && len(ids.sandboxes) == 0 {
		m.byPod.Delete(podUID)
		return
	}
	m.byPod.Set(podUID, ids)
}

// withID returns sorted ids with id in it (a new slice when it was not).
func withID(ids []string, id string) []string {
	i, found := slices.BinarySearch(ids, id)
	if found {
		return ids
	}
	return slices.Insert(slices.Clip(ids), i, id)
}

// withoutID returns sorted ids without id (a new slice when it was there).
func withoutID(ids []string, id string) []string {
	i, found := slices.BinarySearch(ids, id)
	if !found {
		return ids
	}
	return slices.Delete(slices.Clone(ids), i, i+1)
}

// setSandbox records sandbox id.
func (m *Model) setSandbox(id string, sb Sandbox) {
	if old, known := m.Sandboxes.Lookup(id); known && old.PodUID != sb.PodUID {
		m.indexPod(old.PodUID, func(p *podIDs) { p.sandboxes = withoutID(p.sandboxes, id) })
	}
	m.Sandboxes.Set(id, sb)
	m.indexPod(sb.PodUID, func(p *podIDs) { p.sandboxes = withID(p.sandboxes, id) })
}

// deleteSandbox forgets sandbox id.
func (m *Model) deleteSandbox(id string) {
	old, known := m.Sandboxes.Lookup(id)
	if !known {
		return
	}
	m.Sandboxes.Delete(id)
	m.indexPod(old.PodUID, func(p *podIDs) { p.sandboxes = withoutID(p.sandboxes, id) })
}

// NewModel returns a model over st with no known container.
func NewModel(st *state.State) *Model {
	return &Model{
		State:     st,
		Releasing: map[string]cpuset.CPUSet{},
		Lending:   cpuset.New(),
		Ending:    map[string]bool{},
		Idle:      map[string]time.Time{},
	}
}

// PodContainer names a container of a pod by the pod's UID and the
// container's name: what an entry of the state is about.
type PodContainer struct{ PodUID, Name string }

// Clone returns a copy that can be changed without changing m. The
// tracked containers are shared until changed: a change goes through edit,
// which gives the copy its own record (copy on write). cpusets are
// immutable values and always shared.
func (m *Model) Clone() *Model {
	return &Model{
		State:      m.State.Clone(),
		Containers: m.Containers,
		Releasing:  maps.Clone(m.Releasing),
		Lending:    m.Lending,
		// (Sandboxes, Ending and Idle change seldom: shared, each writer
		// copies the map first.)
		Sandboxes:     m.Sandboxes,
		byPod:         m.byPod,
		Ending:        m.Ending,
		Idle:          m.Idle,
		RemovedLimits: m.RemovedLimits,
		recs:          m.recs,
		seq:           m.seq,
	}
}

// CPUsOf returns the cpuset the model wants for a tracked container: its
// exclusive CPUs when it owns an assignment, the shared pool when it runs
// without one, none once stopped or when it is not tracked. (A container's
// cpuset follows from the model: it is not stored, so it cannot disagree.)
func (m *Model) CPUsOf(id string) cpuset.CPUSet {
	t := m.Containers.Get(id)
	if t == nil || t.Stopped {
		return cpuset.New()
	}
	if a, owns := m.ownAssignment(id); owns {
		return a.Held()
	}
	return m.SharedPool()
}

// CPUMaskOf is CPUsOf as a bitmap, which the caller must not change (a
// shared container's is the pool's): no set of the pool is built.
func (m *Model) CPUMaskOf(id string) cpumask.Mask {
	t := m.Containers.Get(id)
	if t == nil || t.Stopped {
		return nil
	}
	if a, owns := m.ownAssignment(id); owns {
		return maskOf(a.Held())
	}
	return m.sharedMask()
}

// add starts tracking a container, or replaces its record.
func (m *Model) add(t *Tracked) {
	if _, kept := m.RemovedLimits[PodContainer{t.PodUID, t.Name}]; kept {
		m.RemovedLimits = maps.Clone(m.RemovedLimits)
		delete(m.RemovedLimits, PodContainer{t.PodUID, t.Name})
	}
	old, known := m.Containers.Lookup(t.ID)
	if known {
		t.Seq = old.Seq
	} else {
		m.seq++
		t.Seq = m.seq
	}
	i, _ := m.recIndex(t.ID)
	if !known {
		m.recs = slices.Insert(slices.Clip(m.recs), i, t)
	} else {
		m.setRec(i, t)
	}
	if known && old.PodUID != t.PodUID {
		m.indexPod(old.PodUID, func(p *podIDs) { p.containers = withoutID(p.containers, t.ID) })
	}
	if !known || old.PodUID != t.PodUID {
		m.indexPod(t.PodUID, func(p *podIDs) { p.containers = withID(p.containers, t.ID) })
	}
	m.Containers.Set(t.ID, t)
}

// remove stops tracking a container.
func (m *Model) remove(id string) {
	t, known := m.Containers.Lookup(id)
	if !known {
		return
	}
	m.Containers.Delete(id)
	m.indexPod(t.PodUID, func(p *podIDs) { p.containers = withoutID(p.containers, id) })
	m.keepRemovedLimit(t)
	if i, found := m.recIndex(id); found {
		m.recs = slices.Delete(slices.Clone(m.recs), i, i+1)
	}
}

// recIndex returns where container id's record is, or would be, in recs.
func (m *Model) recIndex(id string) (int, bool) {
	return slices.BinarySearchFunc(m.recs, id, func(t *Tracked, id string) int { return strings.Compare(t.ID, id) })
}

// setRec replaces the record at index i of recs (a new slice: clones
// share the old one).
func (m *Model) setRec(i int, t *Tracked) {
	recs := slices.Clone(m.recs)
	recs[i] = t
	m.recs = recs
}

// keepRemovedLimit records the CPU limit of removed container t when its
// name holds an entry and no other container of the name is tracked
// (RemovedLimits), and forgets a limit kept for a name that no entry
// holds any more.
func (m *Model) keepRemovedLimit(t *Tracked) {
	key := PodContainer{t.PodUID, t.Name}
	_, entry := m.State.Assignment(t.PodUID, t.Name)
	if entry {
		for _, other := range m.podContainers(t.PodUID) {
			if other.PodUID == t.PodUID && other.Name == t.Name {
				return
			}
		}
	}
	if old, kept := m.RemovedLimits[key]; entry && kept && old == t.CPULimitMilli || !entry && !kept {
		return
	}
	limits := maps.Clone(m.RemovedLimits)
	if limits == nil {
		limits = map[PodContainer]int64{}
	}
	if entry {
		limits[key] = t.CPULimitMilli
	} else {
		delete(limits, key)
	}
	m.RemovedLimits = limits
}

// ranBesideOf returns what a container tracked by m ran beside at its
// creation (a Synchronize carries it over to the containers it lists).
func (m *Model) ranBesideOf(id string) []string {
	if t := m.Containers.Get(id); t != nil {
		return t.RanBeside
	}
	return nil
}

// keepRemovedLimitsOf carries over, for names that still hold an entry
// and are not tracked in m (a Synchronize of the same plugin's life), the
// limits prev kept for removed containers and those of prev's stopped
// containers, which a Synchronize does not list (a name's latest
// instance's, as podMembers reads a stopped name's). m is a model of its
// own (its RemovedLimits not shared).
func (m *Model) keepRemovedLimitsOf(prev *Model) {
	keep := func(key PodContainer, limit int64) {
		if _, entry := m.State.Assignment(key.PodUID, key.Name); !entry || m.tracksName(key) {
			return
		}
		if m.RemovedLimits == nil {
			m.RemovedLimits = map[PodContainer]int64{}
		}
		m.RemovedLimits[key] = limit
	}
	for key, limit := range prev.RemovedLimits {
		keep(key, limit)
	}
	stopped := latestInstances{}
	for _, t := range prev.recs {
		if t.Stopped {
			stopped.add(t)
		}
	}
	for key, t := range stopped {
		keep(key, t.CPULimitMilli)
	}
}

// latestInstances maps a pod's container name to its latest instance
// among those added: the one the kubelet started last (the highest Seq).
type latestInstances map[PodContainer]*Tracked

// add counts t among the instances of its name.
func (l latestInstances) add(t *Tracked) {
	key := PodContainer{t.PodUID, t.Name}
	if cur := l[key]; cur == nil || t.Seq > cur.Seq {
		l[key] = t
	}
}

// tracksName reports whether a container of the pod and name is tracked.
func (m *Model) tracksName(key PodContainer) bool {
	for _, t := range m.podContainers(key.PodUID) {
		if t.PodUID == key.PodUID && t.Name == key.Name {
			return true
		}
	}
	return false
}

// forgetRemovedLimits forgets the limits kept for a pod's removed
// containers (the pod ended).
func (m *Model) forgetRemovedLimits(podUID string) {
	for key := range m.RemovedLimits {
		if key.PodUID == podUID {
			m.RemovedLimits = maps.Clone(m.RemovedLimits)
			maps.DeleteFunc(m.RemovedLimits, func(k PodContainer, _ int64) bool { return k.PodUID == podUID })
			return
		}
	}
}

// edit returns the record of a tracked container that this model may
// change (nil if it is not tracked). Records are shared between clones:
// every change of a record goes through edit.
func (m *Model) edit(id string) *Tracked {
	t := m.Containers.Get(id)
	if t == nil {
		return nil
	}
	own := *t
	m.Containers.Set(id, &own)
	i, _ := m.recIndex(id)
	m.setRec(i, &own)
	return &own
}

// withLending returns a shallow copy of m for a change of Lending only: it
// shares m's state and maps, which neither changes (models are never
// changed once made; a decision clones).
func (m *Model) withLending() *Model {
	c := *m
	return &c
}

// Lend returns a copy of m in which cpus are lent to an unsolicited update
// in flight (see Lending).
func (m *Model) Lend(cpus cpuset.CPUSet) *Model {
	c := m.withLending()
	if m.Lending.IsEmpty() {
		c.Lending = cpus // cpusets are immutable: no copy of the usual case
	} else {
		c.Lending = m.Lending.Union(cpus)
	}
	return c
}

// Unlend returns a copy of m in which cpus are no longer lent: the update
// that carried them has been delivered (or has failed).
func (m *Model) Unlend(cpus cpuset.CPUSet) *Model {
	c := m.withLending()
	if cpumask.Equal(m.Lending, cpus) {
		c.Lending = cpuset.New() // the usual case: one update in flight
	} else {
		c.Lending = m.Lending.Difference(cpus)
	}
	return c
}

// lentNote names the CPUs lent to an unsolicited update in flight, for a
// refusal's list of free CPUs ("" when none are).
func (m *Model) lentNote() string {
	if m.Lending.IsEmpty() {
		return ""
	}
	return "; lent to shared containers by an update in flight: " + cpumask.Format(m.Lending)
}

// SharedPool returns the cpuset shared containers run on now: the
// checkpoint's shared pool minus CPUs whose release is not confirmed.
// It builds the set: a decision compares sharedMask first.
func (m *Model) SharedPool() cpuset.CPUSet { return m.sharedMask().CPUSet() }

// sharedMask is SharedPool as a bitmap, which the caller must not change.
func (m *Model) sharedMask() cpumask.Mask {
	pool := m.State.SharedMask()
	if len(m.Releasing) == 0 {
		return pool
	}
	var releasing cpumask.Mask
	for _, cpus := range m.Releasing {
		releasing.AddSet(cpus) // (a negative id is no CPU of the pool)
	}
	return pool.AndNot(releasing)
}

// SharedPoolSize returns SharedPool().Size() without building the pool.
func (m *Model) SharedPoolSize() int { return m.sharedMask().Count() }

// ownAssignment returns the assignment container id owns, if any.
func (m *Model) ownAssignment(id string) (state.Assignment, bool) {
	ref, ok := m.State.Container(id)
	if !ok {
		return state.Assignment{}, false
	}
	return m.State.Assignment(ref.PodUID, ref.Name)
}

// Desired returns the update that puts a tracked, running container on the
// cpuset the model wants for it.
func (p *Policy) Desired(m *Model, id string) (Update, bool) {
	updates, _ := p.DesiredUpdates(m, []string{id})
	if len(updates) == 0 {
		return Update{}, false
	}
	return updates[0], true
}

// DesiredUpdates returns Desired for each of ids that has an update, in
// the order of ids, and the ids that have none (not tracked, stopped, or
// on an empty pool). The shared pool's text is formatted once for all.
func (p *Policy) DesiredUpdates(m *Model, ids []string) (updates []Update, none []string) {
	var pool cpumask.Mask
	var poolList string
	built := false
	for _, id := range ids {
		t := m.Containers.Get(id)
		if t == nil || t.Stopped {
			none = append(none, id)
			continue
		}
		if a, owns := m.ownAssignment(id); owns {
			cpus := a.Held()
			updates = append(updates, Update{ContainerID: id, Display: t.Display, CPUs: maskOf(cpus), Mems: p.mems(cpus)})
			continue
		}
		if !built {
			pool = m.sharedMask()
			poolList, built = pool.String(), true
		}
		if pool.IsEmpty() {
			none = append(none, id)
			continue
		}
		updates = append(updates, Update{ContainerID: id, Display: t.Display, CPUs: pool, CPUList: poolList})
	}
	return updates, none
}

// SortedContainerIDs returns the ids of the tracked containers, sorted.
func (m *Model) SortedContainerIDs() []string {
	ids := make([]string, len(m.recs))
	for i, t := range m.recs {
		ids[i] = t.ID
	}
	return ids
}

// KnowsPod reports whether any container of pod podUID is tracked, or the
// pod holds exclusive CPUs or recorded resources: a pod update for any
// other pod is not stored (it would stay until the next Synchronize).
func (m *Model) KnowsPod(podUID string) bool {
	if podUID == "" {
		return false
	}
	if len(m.State.ContainersOfPod(podUID)) > 0 {
		return true
	}
	if _, ok := m.State.PodResources(podUID); ok {
		return true
	}
	for _, t := range m.podContainers(podUID) {
		if t.PodUID == podUID {
			return true
		}
	}
	return false
}

// Owns reports whether container id owns an exclusive assignment.
func (m *Model) Owns(id string) bool {
	_, ok := m.ownAssignment(id)
	return ok
}
