package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// UpdatePodSandbox admits and records a pod's new pod-level resources (NRI
// UpdatePodSandbox, from CRI UpdatePodSandboxResources; the runtime keeps
// only the creation values). The kubelet sends it before it writes the
// pod's cgroup for a resize and stops the resize when it fails, so a
// pod-level CPU change that the pod's exclusive containers could not get
// is refused here, with the refusal the container-level decision would
// give. The pod's totals only bound what its containers may ask for: the
// check is a necessary condition (docs/design.md, "UpdatePodSandbox") and
// UpdateContainer stays authoritative. A refusal changes nothing.
func (p *Policy) UpdatePodSandbox(m *Model, pod Pod, res PodResources) (Decision, error) {
	return p.UpdatePodSandboxWithSpec(m, pod, res, nil)
}

// PodSpec is what a pod's spec in the Kubernetes API asks for its
// containers: each container's resources, by name, in the runtime's terms.
type PodSpec map[string]Resources

// UpdatePodSandboxWithSpec is UpdatePodSandbox when the pod's spec is
// known (the plugin watches the Kubernetes API): the whole resize is
// decided here, exactly, before any container changes — every exclusive
// container's resize to what the spec asks for, decreases first, by the
// container-level rules — and refused entirely with the reason of the
// container that fails. A nil spec, or one that does not name every
// exclusive container, falls back to the pod totals alone.
func (p *Policy) UpdatePodSandboxWithSpec(m *Model, pod Pod, res PodResources, spec PodSpec) (Decision, error) {
	before, known := m.PodResources(pod)
	members := m.podMembers(pod.UID)
	curLimit := cpuLimitMilli(before)
	if !known {
		curLimit = members.limitSum
	}
	after, notes := m, []string(nil)
	if asked, ok := members.asked(spec); ok {
		if err := p.admitPodSpec(m.settled(), pod, members, asked); err != nil {
			return Decision{}, err
		}
		after, notes = p.resizeStopped(m, pod, members, asked, spec)
	} else if err := p.admitPodUpdate(m, pod, members, curLimit, cpuLimitMilli(res.Resources)); err != nil {
		return Decision{}, err
	}
	op := OpUnchanged
	if newLimit := cpuLimitMilli(res.Resources); newLimit != 0 && curLimit != 0 {
		op = resizeOperation(int(curLimit), int(newLimit))
	}
	d := Decision{Model: after, Operation: op, PodBefore: before, Notes: notes}
	if after != m {
		d.PoolChanged = poolChanged(m, after)
	}
	if old, ok := after.recordedPod(pod.UID); (!ok || old != res) && after.KnowsPod(pod.UID) {
		// (A pod none of whose containers is known is not recorded: it
		// would stay until the next Synchronize.)
		nm := after.shallow()
		nm.State = after.State.Clone()
		nm.State.SetPodResources(pod.UID, podRecord(res))
		d.Model = nm
		if note := p.settleHold(nm, pod); note != "" {
			d.Notes = append(d.Notes, note)
		}
		d.PoolChanged = poolChanged(m, nm)
	}
	for _, id := range d.Model.podContainerIDs(pod.UID) {
		if t := d.Model.Containers.Get(id); t.PodUID == pod.UID && !t.Stopped {
			d.PodCPUs = append(d.PodCPUs, ContainerCPUs{Name: t.Name, CPUs: d.Model.CPUsOf(id)})
		}
	}
	return d, nil
}

// resizeStopped applies, to the entries of a pod's members that do not
// run, the counts the spec asks (asked, by pm.exclusive's order) once
// the whole resize was admitted: the kubelet sends a container that does
// not run nothing (kuberuntime's computePodResizeAction skips it) and
// restarts it with the new count, so its CPUs are set aside now, as the
// kubelet's KEP-5554 CPU manager allocates a resize when it admits it. A
// growth the free CPUs cannot hold before the pod's running containers'
// decreases have released theirs is left to the container's re-creation
// (the whole resize was admitted with them). A member whose CPUs do not
// change records the limit spec gives it, the one the kubelet restarts it
// with. It returns the model and what it did.
func (p *Policy) resizeStopped(m *Model, pod Pod, pm podMembers, asked []Resources, spec PodSpec) (*Model, []string) {
	var notes []string
	for i, e := range pm.exclusive {
		class := Classify(pod.QoS(), asked[i])
		if e.running {
			continue
		}
		if class.CPUs == e.a.Assigned().Size() {
			// Its CPUs do not change, its limit may (one re-created with
			// a count the plugin could not give restarted on its CPUs
			// with the larger limit): the kubelet restarts it with the
			// spec's, which the pod's total counts. (asked says its CPUs'
			// count when the spec's limit is the one it has.)
			if limit := cpuLimitMilli(spec[e.name]); limit > 0 && !e.unknownLimit && m.stoppedLimitDiffers(pod.UID, e.name, limit) {
				m = m.Clone()
				m.setStoppedLimit(pod.UID, e.name, limit)
			}
			continue
		}
		next, err := p.resizeEntry(m, pod, e, class)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: does not run; its resize to %d CPUs is left to its re-creation: %v", displayName(pod, e.name), class.CPUs, err))
			continue
		}
		a, _ := next.State.Assignment(pod.UID, e.name)
		notes = append(notes, fmt.Sprintf("%s: does not run; resized %s → %s for its re-creation", displayName(pod, e.name), e.a.Assigned(), a.Assigned()))
		m = next
	}
	return m, notes
}

// stoppedLimitDiffers reports whether a stopped container of a pod's name
// records another CPU limit (milli-CPU) than limit.
func (m *Model) stoppedLimitDiffers(podUID, name string, limit int64) bool {
	for _, id := range m.podContainerIDs(podUID) {
		if t := m.Containers.Get(id); t.PodUID == podUID && t.Name == name && t.Stopped && t.CPULimitMilli != limit {
			return true
		}
	}
	return false
}

// setStoppedLimit records limit (milli-CPU) on the stopped containers of a
// pod's name, in a model the caller owns (a clone): the limit the kubelet
// restarts them with.
func (m *Model) setStoppedLimit(podUID, name string, limit int64) {
	for _, id := range m.podContainerIDs(podUID) {
		if t := m.Containers.Get(id); t.PodUID == podUID && t.Name == name && t.Stopped {
			m.edit(id).CPULimitMilli = limit
		}
	}
}

// PodResources returns the pod-level resources a pod has as far as the
// model knows: the last ones UpdatePodSandbox accepted, else those the
// sandbox was created with; false when neither is known.
func (m *Model) PodResources(pod Pod) (Resources, bool) {
	if r, ok := m.recordedPod(pod.UID); ok {
		return r.Resources, true
	}
	if pod.Resources != (Resources{}) {
		return pod.Resources, true
	}
	return Resources{}, false
}

// admitPodUpdate refuses a change of a pod's CPU limit from curLimit to
// newLimit (milli-CPU) that no set of container resizes the container
// level accepts could add up to. It checks only a pod whose current limit
// is exactly the sum of its running containers' limits (otherwise pod-level
// resources, an init container or a change the plugin missed make up the
// difference, and nothing can be attributed to a container), and whose
// exclusive containers hold the CPUs their limits say (one that restarted
// on its CPUs with another count is not resized by the kubelet, which
// takes it for done).
func (p *Policy) admitPodUpdate(m *Model, pod Pod, pm podMembers, curLimit, newLimit int64) error {
	if len(pm.exclusive) == 0 || newLimit == 0 || newLimit == curLimit || curLimit != pm.limitSum || pm.mismatched() {
		return nil
	}
	// Shrinks in flight are confirmed and loans come back before the
	// containers are resized: count those CPUs as free.
	view := m.settled()
	if pm.others == 0 && len(pm.exclusive) == 1 {
		// All of the change is the one container's: the container-level
		// decision itself, for the pod's new limit as the container's.
		asked := limitResources(int64(newLimit))
		_, err := p.decideMember(view, pod, pm.exclusive[0], asked)
		return err
	}
	return p.admitPodTotal(view, pod, pm, newLimit)
}

// admitPodTotal is admitPodUpdate for a pod with several containers.
func (p *Policy) admitPodTotal(m *Model, pod Pod, pm podMembers, newLimit int64) error {
	who := podDisplay(pod)
	if pm.others > 0 {
		// The change may be the shared containers': only the floor holds,
		// each of them keeps some CPU (a Guaranteed container's limit is
		// at least 1m).
		if floor := int64(pm.baseline.Size())*milliCPUPerCPU + int64(pm.others); newLimit < floor {
			return refuse(Infeasible, ReasonProhibitedCPUAllocation,
				"pod %s cannot shrink to a CPU limit of %dm: its exclusive containers' baseline CPUs %s (%d CPUs) must be kept and its %d other containers need some CPU; they keep %s",
				who, newLimit, pm.baseline, pm.baseline.Size(), pm.others, pm.held)
		}
		return nil
	}
	n, held := int(min(newLimit/milliCPUPerCPU, math.MaxInt32)), pm.held.Size()
	switch {
	case newLimit%milliCPUPerCPU != 0:
		return refuse(Infeasible, ReasonInconsistentCPUAllocation,
			"pod %s would get a CPU limit of %dm, not a whole number of CPUs, so one of its exclusive containers (%s) would move to the shared pool; a resize cannot change the CPU pool",
			who, newLimit, pm.names())
	case n == held:
		return nil
	case !p.opts.InPlaceResize:
		return refuse(Infeasible, ReasonFeatureDisabled,
			"in-place resize of exclusive CPUs is disabled (inPlaceResize: false): the containers of pod %s keep their %d CPUs %s, requested %d",
			who, held, pm.held, n)
	case !p.smtAligned(n) && pm.aligned(p):
		return refuse(Infeasible, ReasonSMTAlignment,
			"pod %s requests %d CPUs, not a multiple of the %d threads per core that full-pcpus-only requires of each of its exclusive containers (%s); they keep %s",
			who, n, p.topo.ThreadsPerCore(), pm.names(), pm.held)
	case n < pm.baseline.Size():
		return refuse(Infeasible, ReasonProhibitedCPUAllocation,
			"pod %s cannot shrink to %d CPUs: its containers' baseline exclusive CPUs %s (%d CPUs) must be kept; they keep %s",
			who, n, pm.baseline, pm.baseline.Size(), pm.held)
	}
	if n > held {
		free, pool := p.availability(m)
		need, borrowed := n-held, m.heldFor(pod.UID).Count()
		if need > free.Count()+borrowed || pool-p.poolDrain(free, max(0, need-borrowed)) < 1 {
			return refuse(Infeasible, ReasonResizeAllocateCPUs,
				"cannot grow the exclusive CPUs of pod %s from %d to %d keeping %s: its containers (%s) need %d more CPUs, %d free (free: %s), and the shared pool (%d CPUs) keeps at least one",
				who, held, n, pm.held, pm.names(), need, free.Count(), describe(free.CPUSet()), pool)
		}
	}
	return p.admitPodSplits(m, pod, pm, n)
}

// maxPodSplits bounds the ways of dividing a pod's new CPU count among its
// exclusive containers that pod-level admission tries.
const maxPodSplits = 64

// admitPodSplits refuses a pod's new count of exclusive CPUs n that no
// division among its exclusive containers can satisfy: each container's
// share at least its baseline CPUs and aligned under full-pcpus-only, the
// decreases placed first, then the increases, each by the container-level
// rules (topology manager policy and scope, static options, the shared
// pool). The divisions closest to the current one come first; when there
// are more than maxPodSplits, those not tried could work, and the resize
// is admitted (the container level decides). The refusal is the first
// division's, in the pod's words.
func (p *Policy) admitPodSplits(m *Model, pod Pod, pm podMembers, n int) error {
	splits, complete := p.podSplits(pm, n, maxPodSplits)
	var first *Refusal
	verdict := Infeasible
	for _, split := range splits {
		err := p.tryPodSplit(m, pod, pm, split)
		if err == nil {
			return nil
		}
		r, ok := AsRefusal(err)
		if !ok {
			return nil // not a refusal: the container level will say
		}
		if first == nil {
			first = r
		}
		if r.Verdict == Deferred {
			verdict = Deferred
		}
	}
	if first == nil || !complete {
		return nil
	}
	return refuse(verdict, first.Reason, "pod %s cannot divide %d exclusive CPUs among its containers (%s) in any way: %s",
		podDisplay(pod), n, pm.names(), first.Message)
}

// podSplits returns up to limit divisions of n CPUs among a pod's
// exclusive containers (in pm.exclusive's order), closest to their current
// counts first, and whether those are all there are.
func (p *Policy) podSplits(pm podMembers, n, limit int) ([][]int, bool) {
	k := len(pm.exclusive)
	step := 1
	if p.alloc.Options().FullPCPUsOnly {
		step = p.topo.ThreadsPerCore()
	}
	low, cur := make([]int, k), make([]int, k)
	for i, e := range pm.exclusive {
		low[i], cur[i] = e.a.Baseline.Size(), e.a.Assigned().Size()
	}
	var all [][]int
	complete := true
	split := make([]int, k)
	var walk func(i, left int)
	walk = func(i, left int) {
		if len(all) >= 16*limit {
			complete = false
			return
		}
		if i == k-1 {
			if left >= low[i] && left%step == 0 {
				split[i] = left
				all = append(all, slices.Clone(split))
			}
			return
		}
		for v := low[i]; v <= left; v += step {
			if v%step != 0 {
				continue
			}
			split[i] = v
			walk(i+1, left-v)
		}
	}
	walk(0, n)
	distance := func(s []int) int {
		d := 0
		for i := range s {
			d += abs(s[i] - cur[i])
		}
		return d
	}
	slices.SortStableFunc(all, func(a, b []int) int { return distance(a) - distance(b) })
	if len(all) > limit {
		all, complete = all[:limit], false
	}
	return all, complete
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// tryPodSplit decides the container-level resizes of one division of a
// pod's CPUs, decreases first, each on the model the previous left once
// settled; it returns the first refusal.
func (p *Policy) tryPodSplit(m *Model, pod Pod, pm podMembers, split []int) error {
	asked := make([]Resources, len(split))
	for i, n := range split {
		milli := int64(n) * milliCPUPerCPU
		asked[i] = limitResources(milli)
		asked[i].MemoryLimit = 1
	}
	_, err := p.tryPodResize(m, pod, pm, asked)
	return err
}

// tryPodResize decides the resizes of a pod's exclusive containers to the
// resources asked (by pm.exclusive's order), decreases first, each on the
// model the previous left once settled. It returns the first refusal, and
// the container it refused.
func (p *Policy) tryPodResize(m *Model, pod Pod, pm podMembers, asked []Resources) (string, error) {
	counts := make([]int, len(asked))
	for i, r := range asked {
		counts[i] = Classify(pod.QoS(), r).CPUs
	}
	order := make([]int, 0, len(asked))
	for i, e := range pm.exclusive {
		if counts[i] < e.a.Assigned().Size() {
			order = append(order, i)
		}
	}
	for i, e := range pm.exclusive {
		if counts[i] >= e.a.Assigned().Size() {
			order = append(order, i)
		}
	}
	for _, i := range order {
		e := pm.exclusive[i]
		next, err := p.decideMember(m, pod, e, asked[i])
		if err != nil {
			return e.name, err
		}
		m = next.settled()
	}
	return "", nil
}

// decideMember decides the resize of one exclusive member of a pod to
// the resources asked, and returns the model it leaves: a running
// container's as UpdateContainer decides it, a stopped container's (one
// in crash back-off, or one its pod's admission placed that has not run)
// on its entry by the same rules (KEP-5554: its baseline kept, a growth
// placed on free CPUs), as its re-creation with the new count would be.
func (p *Policy) decideMember(m *Model, pod Pod, e podMember, asked Resources) (*Model, error) {
	if e.running {
		d, err := p.decideResize(m, Container{ID: e.id, Name: e.name, Pod: pod, Resources: Resources{MemoryLimit: 1}}, asked)
		return d.Model, err
	}
	return p.resizeEntry(m, pod, e, Classify(pod.QoS(), asked))
}

// resizeEntry resizes the entry of a pod's member that does not run to
// the CPUs class asks for, by the resize rules: refused below its
// baseline, a count full-pcpus-only cannot align, a change of pool, a
// growth the free CPUs cannot hold (Infeasible: resizeAllocateCPUsError).
// The stopped container of the name, if tracked, records the new limit.
func (p *Policy) resizeEntry(m *Model, pod Pod, e podMember, class Class) (*Model, error) {
	display := displayName(pod, e.name) + " (not running)"
	assigned := e.a.Assigned()
	if !class.Exclusive {
		return nil, refuse(Infeasible, ReasonInconsistentCPUAllocation,
			"container %s would move from its exclusive CPUs %s to the shared pool because %s; a resize cannot change the CPU pool",
			display, assigned, class.Why)
	}
	n := class.CPUs
	if n == assigned.Size() {
		return m, nil
	}
	if err := p.admitResize(display, e.a, n); err != nil {
		return nil, err
	}
	nm := m.Clone()
	nm.setStoppedLimit(pod.UID, e.name, int64(n)*milliCPUPerCPU)
	resized := e.a
	if n < assigned.Size() {
		kept, err := p.shrinkTo(nm, pod.UID, e.name, display, e.a, n)
		if err != nil {
			return nil, err
		}
		resized.Resized = kept
		nm.State.SetAssignment(pod.UID, e.name, resized)
		// Held for the pod while its resize is in flight, as a running
		// container's decrease.
		if released := assigned.Difference(kept).Difference(nm.podHeld(pod.UID, "")); !p.hold(nm, pod, released) {
			p.returnToPool(nm, released)
		}
	} else {
		pl := p.growth(nm, pod, e.name, assigned, n)
		free, poolLeft := p.availability(nm)
		cpus, err := p.placeGrowth(pl, free, poolLeft)
		if err != nil {
			return nil, refuse(Infeasible, ReasonResizeAllocateCPUs,
				"cannot grow container %s from %d to %d exclusive CPUs keeping %s (free: %s%s): %v",
				display, assigned.Size(), n, assigned, describe(free.CPUSet()), m.lentNote(), err)
		}
		resized.Resized = cpus
		nm.State.SetAssignment(pod.UID, e.name, resized)
		p.tookGrowth(nm, pod.UID, e.name, assigned, cpus)
	}
	return nm, nil
}

// asked returns what spec asks for each exclusive member, in pm.exclusive's
// order; false when spec is nil or leaves one out. A member whose CPU
// limit in the runtime is already the spec's keeps its CPUs: the kubelet
// resizes only the containers whose resources differ from the spec (a
// container re-created with a count the plugin did not give it, which
// restarted on its CPUs, is one of those it considers done).
func (pm podMembers) asked(spec PodSpec) ([]Resources, bool) {
	if spec == nil || len(pm.exclusive) == 0 {
		return nil, false
	}
	out := make([]Resources, len(pm.exclusive))
	for i, e := range pm.exclusive {
		r, ok := spec[e.name]
		if !ok {
			return nil, false
		}
		if cpuLimitMilli(r) == e.limit || e.unknownLimit {
			milli := int64(e.a.Assigned().Size()) * milliCPUPerCPU
			r = limitResources(milli)
		}
		if r.MemoryLimit == 0 {
			r.MemoryLimit = 1 // a Guaranteed container has one; only CPUs are decided here
		}
		out[i] = r
	}
	return out, true
}

// admitPodSpec refuses a pod resize whose containers' resizes, to what
// the pod's spec asks, are not all accepted.
func (p *Policy) admitPodSpec(m *Model, pod Pod, pm podMembers, asked []Resources) error {
	name, err := p.tryPodResize(m, pod, pm, asked)
	r, ok := AsRefusal(err)
	if !ok {
		return err
	}
	return refuse(r.Verdict, r.Reason, "pod %s's resize is refused as a whole, its containers unchanged: container %s: %s",
		podDisplay(pod), name, r.Message)
}

// podMembers is what UpdatePodSandbox knows of a pod's members: its
// sidecars and app containers, running or not, as the kubelet totals a
// pod (its ordinary init containers, which have completed by the time a
// pod is resized, are not members).
type podMembers struct {
	// exclusive are the members that hold an entry: the running
	// containers that own one, and the entries of names none of whose
	// containers runs (a container in crash back-off, or one its pod's
	// admission placed that has not started); others counts the rest
	// (shared containers, running or stopped, and exclusive ones whose
	// CPUs are not known).
	exclusive []podMember
	others    int
	// limitSum is the pod's total as its containers' CPU limits make it
	// (milli-CPU, Model.podLimitMilli).
	limitSum int64
	// held and baseline are the exclusive members' assigned and baseline
	// CPUs.
	held, baseline cpuset.CPUSet
}

// podMember is one exclusive member of a pod.
type podMember struct {
	name string
	// id is its running container's id; "" when none of its name runs.
	id      string
	running bool
	a       state.Assignment
	// limit is its CPU limit in milli-CPU: its container's as last
	// created or resized, kept once the runtime removed it
	// (RemovedLimits), or for an entry the plugin knows no container of
	// (it restarted since), its assigned CPUs'.
	limit int64
	// unknownLimit is set for a member none of whose containers the
	// plugin knows: what the kubelet last started it with is not known
	// (its entry may hold another count: a restart on its own CPUs after
	// a refused resize), so a resize leaves it to its re-creation.
	unknownLimit bool
}

// podMembers returns what the model knows of a pod's members, the
// exclusive ones in the order of their names: the runtime's ids are
// random, and the divisions tried, and so the refusals' text, must not
// depend on them.
func (m *Model) podMembers(podUID string) podMembers {
	pm := podMembers{held: cpuset.New(), baseline: cpuset.New(), limitSum: m.podLimitMilli(podUID)}
	running := map[string]bool{}
	stoppedShared := map[string]bool{}
	stopped := latestInstances{}
	for _, id := range m.podContainerIDs(podUID) {
		t := m.Containers.Get(id)
		if t.PodUID != podUID {
			continue
		}
		if t.Stopped {
			stopped.add(t)
			if !t.Exclusive {
				stoppedShared[t.Name] = true
			}
			continue
		}
		running[t.Name] = true
		a, owns := m.ownAssignment(id)
		if !owns {
			pm.others++
			continue
		}
		pm.add(podMember{name: t.Name, id: id, running: true, a: a, limit: t.CPULimitMilli})
	}
	for _, name := range m.State.ContainersOfPod(podUID) {
		a, _ := m.State.Assignment(podUID, name)
		if running[name] || a.Init {
			continue
		}
		var limit int64
		t, known := stopped[PodContainer{podUID, name}]
		if known {
			limit = t.CPULimitMilli
		} else {
			limit, known = m.RemovedLimits[PodContainer{podUID, name}]
		}
		if !known {
			limit = int64(a.Assigned().Size()) * milliCPUPerCPU
		}
		delete(stoppedShared, name)
		pm.add(podMember{name: name, a: a, limit: limit, unknownLimit: !known})
	}
	for name := range stoppedShared {
		if !running[name] && m.roleOf(podUID, name) != RoleInit {
			pm.others++
		}
	}
	slices.SortStableFunc(pm.exclusive, func(a, b podMember) int { return strings.Compare(a.name, b.name) })
	return pm
}

// add adds an exclusive member.
func (pm *podMembers) add(e podMember) {
	pm.exclusive = append(pm.exclusive, e)
	pm.held = pm.held.Union(e.a.Assigned())
	pm.baseline = pm.baseline.Union(e.a.Baseline)
}

// mismatched reports whether an exclusive member holds another count of
// CPUs than its CPU limit says.
func (pm podMembers) mismatched() bool {
	for _, e := range pm.exclusive {
		if e.limit != int64(e.a.Assigned().Size())*milliCPUPerCPU {
			return true
		}
	}
	return false
}

// names lists the exclusive containers by name.
func (pm podMembers) names() string {
	names := make([]string, 0, len(pm.exclusive))
	for _, e := range pm.exclusive {
		names = append(names, e.name)
	}
	return strings.Join(names, ", ")
}

// aligned reports whether every exclusive container holds whole cores
// under full-pcpus-only (then any resize the container level accepts
// keeps each of them, and so their sum, a multiple of the core size).
func (pm podMembers) aligned(p *Policy) bool {
	for _, e := range pm.exclusive {
		if !p.smtAligned(e.a.Assigned().Size()) {
			return false
		}
	}
	return true
}

// shallow returns a copy of m that shares its state and maps, for a change
// that replaces (never modifies) one of them.
func (m *Model) shallow() *Model {
	c := *m
	return &c
}

// settled returns m as it will be once the shrinks in flight are confirmed
// and the CPUs on loan are back, for decisions that are never committed.
func (m *Model) settled() *Model {
	c := m.shallow()
	c.Releasing = map[string]cpuset.CPUSet{}
	c.Lending = cpuset.New()
	return c
}

// withCPULimit returns after with container id's CPU limit recorded as
// limit; before is the model the decision started from, which is never
// changed.
func withCPULimit(before, after *Model, id string, limit int64) *Model {
	t := after.Containers.Get(id)
	if t == nil || t.CPULimitMilli == limit {
		return after
	}
	if after == before {
		after = before.shallow()
	}
	after.edit(id).CPULimitMilli = limit
	return after
}

// podDisplay names a pod for humans.
func podDisplay(pod Pod) string {
	if pod.Name == "" {
		return pod.UID
	}
	return pod.Namespace + "/" + pod.Name
}

// limitResources is what the kubelet sends the runtime for a CPU limit
// (and request) of milli milli-CPUs.
func limitResources(milli int64) Resources {
	return Resources{CPUShares: sharesFromMilli(milli), CPUQuota: milli, CPUPeriod: milliCPUPerCPU}
}
