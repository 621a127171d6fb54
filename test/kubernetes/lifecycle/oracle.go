package lifecycle

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Oracle plays a life on the kubelet's CPU manager and on the plugin, and
// compares them after every action.
type Oracle struct {
	t       testing.TB
	kubelet *Kubelet
	node    *Node
	clock   *Clock
	pods    map[string]*pod
	// epoch counts containerd's starts: a sandbox of an earlier epoch is
	// one whose removal containerd no longer relays. syncs counts the
	// plugin's synchronizations: a sandbox it knows only from one is one
	// it cannot tell apart.
	epoch, syncs int
	// orphans are the CPUs the plugin keeps, until the orphan timeout,
	// of deleted pods it was not told of (no API, sandboxes of an earlier
	// epoch), by pod.
	orphans map[string]int
	// Stats count what the lives did.
	Stats Stats
}

// Stats count the actions played and what the comparison saw.
type Stats struct {
	Actions, Compared, Rejected, Refused int
	// Ops counts the actions by operation.
	Ops map[string]int
	// KubeletReusedLess counts comparisons where the kubelet's pool was
	// smaller than the pod totals say: its Allocate does not prefer an
	// init container's CPUs (takeByTopology over the free and reusable
	// CPUs together), the plugin takes them first.
	KubeletReusedLess int
}

// pod is a pod the life started, as the kubelet and the runtime have it.
type pod struct {
	spec *PodSpec
	v1   *v1.Pod
	// sandboxes are the pod's sandboxes in the runtime, the current one
	// last, and the epoch and plugin synchronization each was made in.
	sandboxes     []*api.PodSandbox
	epochs, syncs []int
	// known are the ids of the sandboxes the plugin knows of the pod:
	// those the last Synchronize listed, or the one it saw run since,
	// but those whose removal containerd relayed.
	known map[string]bool
	// current maps a container name to its latest instance.
	current map[string]*api.Container
	// running are the names whose latest instance runs.
	running map[string]bool
	// dead are exited instances the container GC has not removed yet.
	dead []*api.Container
	// completed: a Job whose containers all exited 0 (phase Succeeded).
	completed bool
	// endNeed is the CPUs the plugin held for it when it completed;
	// released once the plugin gave them back.
	endNeed  int
	released bool
	// resized is set once a container of it changed its CPU count: its
	// entries may then hold more than the kubelet's pod total says (a
	// running container keeps the CPUs it has), as the kubelet's do.
	resized bool
	// actuated maps a container name to the CPUs (milli) the runtime
	// has for it: the kubelet re-creates a container, and actuates a
	// resize, with those of the spec.
	actuated map[string]int64
	// baseline maps a name to the CPUs it started with on the kubelet,
	// for the kubelet's copy of a resize (the plugin's are its own:
	// pluginBaseline).
	baseline map[string]cpuset.CPUSet
}

// NewOracle plays lives on kubelet and node; clock is the plugin's.
func NewOracle(t testing.TB, kubelet *Kubelet, node *Node, clock *Clock) *Oracle {
	return &Oracle{t: t, kubelet: kubelet, node: node, clock: clock, pods: map[string]*pod{}, orphans: map[string]int{}}
}

// Clock is the plugin's clock: the oracle moves it to play the time the
// node spends between actions.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Trace, when set, receives each action and the cpusets after it.
var Trace func(format string, args ...any)

// Play runs one action on both sides and compares them.
func (o *Oracle) Play(a Action) error {
	o.Stats.Actions++
	if o.Stats.Ops == nil {
		o.Stats.Ops = map[string]int{}
	}
	o.Stats.Ops[a.Op]++
	if Trace != nil {
		Trace("%s", a)
		defer o.trace()
	}
	var err error
	switch a.Op {
	case OpStart:
		err = o.start(a.Spec)
	case OpCrash:
		err = o.crash(a)
	case OpRecreateSandbox:
		err = o.recreateSandbox(o.pods[a.Pod])
	case OpCollect:
		err = o.collect()
	case OpComplete:
		err = o.complete(o.pods[a.Pod])
	case OpDelete:
		err = o.delete(o.pods[a.Pod])
	case OpResize:
		err = o.resize(a)
	case OpReboot:
		err = o.reboot()
	case OpRestartContainerd:
		o.node.RestartContainerd()
		o.synchronized(true)
		err = o.caughtUp()
	case OpRestartPlugin:
		o.node.StopPlugin()
		o.node.StartPlugin()
		o.synchronized(false)
		err = o.caughtUp()
	default:
		err = fmt.Errorf("unknown operation %q", a.Op)
	}
	if err != nil {
		return err
	}
	o.kubelet.CatchUp()
	return o.compare()
}

// trace reports both sides' cpusets.
func (o *Oracle) trace() {
	snap := o.node.plugin.Snapshot()
	Trace("  kubelet pool %s, plugin pool %s, sandboxes %v, idle %v", o.kubelet.Pool(), snap.SharedPool, snap.Sandboxes, snap.Idle)
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		var parts []string
		for _, c := range p.spec.Containers {
			k, _ := o.kubelet.Entry(p.spec.UID(), c.Name)
			state := "dead"
			if p.running[c.Name] {
				state = "runs"
			}
			var plugin string
			if a, ok := snap.Exclusive[string(p.spec.UID())][c.Name]; ok {
				plugin = fmt.Sprintf("%s/%s init=%v", a.Baseline, a.Resized, a.Init)
			}
			if ctr := p.current[c.Name]; ctr != nil {
				plugin += " on " + snap.Containers[ctr.Id].CPUs
			}
			parts = append(parts, fmt.Sprintf("%s(%s %s) kubelet %s plugin %s", c.Name, c.Kind, state, k, plugin))
		}
		Trace("  %s completed=%v: %s", name, p.completed, strings.Join(parts, "; "))
	}
}

// synchronized records a Synchronize of the plugin, after containerd
// started again (restarted) or the plugin did: the runtime no longer
// lists the deleted pods the plugin kept (orphans), which it drops, and
// the plugin knows every sandbox the runtime lists.
func (o *Oracle) synchronized(restarted bool) {
	if restarted {
		o.epoch++
	}
	o.syncs++
	clear(o.orphans)
	for _, p := range o.pods {
		p.known = map[string]bool{}
		for _, sb := range p.sandboxes {
			p.known[sb.Id] = true
		}
	}
}

// caughtUp checks what a Synchronize did to the running containers whose
// CPU count differs from what the runtime has for them (a container that
// restarted on its CPUs with a count the plugin could not give it): the
// plugin gives them that count when the resize rules allow it now, else
// they keep their CPUs; the kubelet's state follows.
func (o *Oracle) caughtUp() error {
	o.node.Settle()
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		for c, running := range p.running {
			entry, exclusive := o.kubelet.Entry(p.spec.UID(), c)
			if !running || !exclusive || p.kind(c) == KindInit {
				continue
			}
			got, _ := o.node.RT.CPUs(p.current[c].Id)
			have := entry.Size() + o.kubelet.Short(p.spec.UID(), c)
			if got.Size() == have {
				continue
			}
			if want := p.actuated[c]; want%1000 != 0 || got.Size() != int(want/1000) {
				return fmt.Errorf("%s/%s runs on %s after a Synchronize, with %dm in the runtime and %d CPUs before", name, c, got, want, have)
			}
			p.resized = true
			if err := o.kubelet.Resize(p.spec.UID(), c, got.Size(), p.baseline[c]); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeSandbox removes one of p's sandboxes; containerd relays the
// removal of those it ran since it started.
func (o *Oracle) removeSandbox(p *pod, i int) error {
	sb := p.sandboxes[i]
	if err := o.node.RT.RemovePod(sb); err != nil {
		return fmt.Errorf("remove sandbox %s of %s: %w", sb.Id, p.spec.Name, err)
	}
	if p.epochs[i] == o.epoch {
		delete(p.known, sb.Id)
	}
	p.sandboxes = slices.Delete(p.sandboxes, i, i+1)
	p.epochs = slices.Delete(p.epochs, i, i+1)
	p.syncs = slices.Delete(p.syncs, i, i+1)
	return nil
}

// views returns what the generator needs of the pods.
func (o *Oracle) views() map[string]*podView {
	out := map[string]*podView{}
	for name, p := range o.pods {
		v := &podView{spec: p.spec, completed: p.completed, exclusive: map[string]int64{}}
		for _, c := range p.spec.Containers {
			if c.Kind == KindInit || !p.running[c.Name] {
				continue
			}
			v.crashable = append(v.crashable, c.Name)
			if cpus, ok := o.kubelet.Entry(p.spec.UID(), c.Name); ok && c.Kind == KindApp {
				v.exclusive[c.Name] = int64(cpus.Size()) * 1000
			}
		}
		out[name] = v
	}
	return out
}

// start admits a pod on the kubelet and, when it is admitted, starts it
// as the kubelet does: its sandbox, each init container until it exits 0
// (a sidecar is started and left running), then the app containers.
func (o *Oracle) start(s *PodSpec) error {
	vpod := s.V1Pod()
	if err := o.kubelet.Admit(vpod); err != nil {
		o.Stats.Rejected++
		return nil // the kubelet fails the pod; no sandbox is made
	}
	p := &pod{spec: s, v1: vpod, current: map[string]*api.Container{}, running: map[string]bool{}, baseline: map[string]cpuset.CPUSet{},
		actuated: map[string]int64{}}
	o.pods[s.Name] = p
	if o.node.API != nil {
		o.node.API.Set(vpod)
	}
	if err := o.runSandbox(p); err != nil {
		return err
	}
	for _, c := range s.Containers {
		if cpus, ok := o.kubelet.Entry(s.UID(), c.Name); ok {
			p.baseline[c.Name] = cpus
		}
	}
	return nil
}

// runSandbox runs a new sandbox of p and its containers in order.
func (o *Oracle) runSandbox(p *pod) error {
	sb, err := o.node.RT.RunPod(sandboxPod(p.spec, p.v1))
	if err != nil {
		return fmt.Errorf("run sandbox of %s: %w", p.spec.Name, err)
	}
	p.sandboxes, p.epochs, p.syncs = append(p.sandboxes, sb), append(p.epochs, o.epoch), append(p.syncs, o.syncs)
	p.known = map[string]bool{sb.Id: true}
	var sidecars []string
	for _, c := range p.spec.Containers {
		switch c.Kind {
		case KindInit:
			ctr, err := o.create(p, c.Name)
			if err != nil {
				return err
			}
			if err := o.exit(p, ctr, 0); err != nil {
				return err
			}
		case KindSidecar:
			if _, err := o.create(p, c.Name); err != nil {
				return err
			}
			sidecars = append(sidecars, c.Name)
		}
	}
	crashing := p.spec.SidecarCrashesAtStart && len(sidecars) > 0
	if crashing {
		for _, name := range sidecars {
			if err := o.exit(p, p.current[name], 1); err != nil {
				return err
			}
		}
	}
	for _, c := range p.spec.Containers {
		if c.Kind == KindApp {
			if _, err := o.create(p, c.Name); err != nil {
				return err
			}
		}
	}
	if crashing {
		for _, name := range sidecars {
			if _, err := o.create(p, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// create creates and starts container name of p in its current sandbox,
// with the resources of its spec. A container re-created with another CPU
// count than its entry holds (a resize the plugin refused, which the
// kubelet allocated) gets that count when the resize rules allow it now
// (the kubelet retries a pending resize until it is applied; the
// re-creation applies it), else keeps its CPUs (KEP-5554: a restart never
// takes CPUs away); the kubelet's state follows.
func (o *Oracle) create(p *pod, name string) (*api.Container, error) {
	sb := p.sandboxes[len(p.sandboxes)-1]
	want := p.milli(name)
	again := p.current[name] != nil
	if old := p.current[name]; old != nil && p.running[name] {
		return nil, fmt.Errorf("create %s/%s while %s runs", p.spec.Name, name, old.Id)
	}
	ctr, err := o.node.RT.CreateContainer(sb, name, containerResources(p.spec, want))
	if err != nil && strings.Contains(err.Error(), "Deferred: allocateCPUsError") && o.releasing() {
		// The kubelet gave back CPUs the plugin keeps until time passes:
		// the kubelet retries the creation until it succeeds.
		o.passTime()
		ctr, err = o.node.RT.CreateContainer(sb, name, containerResources(p.spec, want))
	}
	if err != nil {
		return nil, fmt.Errorf("create %s/%s: %w", p.spec.Name, name, err)
	}
	p.current[name] = ctr
	p.running[name] = true
	p.actuated[name] = want
	entry, exclusive := o.kubelet.Entry(p.spec.UID(), name)
	got, _ := o.node.RT.CPUs(ctr.Id)
	if !again || !exclusive || got.Size() == entry.Size() || p.kind(name) == KindInit {
		return ctr, nil // (compare says what is wrong with a first creation)
	}
	if n := int(want / 1000); got.Size() != n || want%1000 != 0 || n < o.pluginBaseline(p, name).Size() {
		return nil, fmt.Errorf("%s/%s re-created asking for %dm runs on %s; the kubelet's entry holds %s (baseline %s): a restart either applies the count the resize rules allow or keeps its CPUs",
			p.spec.Name, name, want, got, entry, o.pluginBaseline(p, name))
	}
	p.resized = true
	return ctr, o.kubelet.Resize(p.spec.UID(), name, got.Size(), p.baseline[name])
}

// milli returns a container's CPUs in the spec.
func (p *pod) milli(name string) int64 {
	for _, c := range p.spec.Containers {
		if c.Name == name {
			return c.Milli
		}
	}
	return 0
}

// exit ends a container's process with code (a kill by the kubelet is
// 137).
func (o *Oracle) exit(p *pod, ctr *api.Container, code int32) error {
	var err error
	if code == 137 {
		err = o.node.RT.StopContainer(ctr)
	} else {
		err = o.node.RT.ExitContainer(ctr, code)
	}
	if err != nil {
		return fmt.Errorf("stop %s/%s: %w", p.spec.Name, ctr.Name, err)
	}
	if p.current[ctr.Name] == ctr {
		p.running[ctr.Name] = false
	}
	p.dead = append(p.dead, ctr)
	return nil
}

// remove is the removal of a dead instance.
func (o *Oracle) remove(p *pod, ctr *api.Container) error {
	if err := o.node.RT.RemoveContainer(ctr); err != nil {
		return fmt.Errorf("remove %s/%s: %w", p.spec.Name, ctr.Name, err)
	}
	p.dead = slices.DeleteFunc(p.dead, func(c *api.Container) bool { return c == ctr })
	return nil
}

// crash: a container exits by itself; the kubelet re-creates it with the
// resources it accepted last, and the GC removes the dead instance before
// or after that.
func (o *Oracle) crash(a Action) error {
	p := o.pods[a.Pod]
	ctr := p.current[a.Container]
	if err := o.exit(p, ctr, a.Code); err != nil {
		return err
	}
	if a.RemoveFirst {
		if err := o.remove(p, ctr); err != nil {
			return err
		}
	}
	if _, err := o.create(p, a.Container); err != nil {
		return err
	}
	if !a.RemoveFirst {
		return o.remove(p, ctr)
	}
	return nil
}

// recreateSandbox: the pause container died. The kubelet stops the pod's
// containers and its sandbox, removes its init containers
// (purgeInitContainers), runs a new sandbox and the containers again; the
// GC removes the old sandbox later (collect).
func (o *Oracle) recreateSandbox(p *pod) error {
	if err := o.killAll(p); err != nil {
		return err
	}
	old := p.sandboxes[len(p.sandboxes)-1]
	if err := o.node.RT.StopPod(old); err != nil {
		return fmt.Errorf("stop sandbox of %s: %w", p.spec.Name, err)
	}
	if err := o.purgeInit(p); err != nil {
		return err
	}
	return o.runSandbox(p)
}

// killAll stops p's running containers, as the kubelet kills a pod.
func (o *Oracle) killAll(p *pod) error {
	for _, name := range slices.Sorted(maps.Keys(p.running)) {
		if p.running[name] {
			if err := o.exit(p, p.current[name], 137); err != nil {
				return err
			}
		}
	}
	return nil
}

// purgeInit removes every dead instance of p's init containers.
func (o *Oracle) purgeInit(p *pod) error {
	for _, c := range slices.Clone(p.dead) {
		if kind := p.kind(c.Name); kind == KindInit {
			if err := o.remove(p, c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *pod) kind(name string) string {
	for _, c := range p.spec.Containers {
		if c.Name == name {
			return c.Kind
		}
	}
	return ""
}

// collect is the kubelet's container GC: dead containers of pods still
// running go (but the latest of each name), then the sandboxes a pod
// replaced. (Those of completed pods stay until the pod is deleted.) It
// comes after a while: the plugin's clock moves past its orphan timeout,
// and the pods it was not told of and that have been idle since give
// their CPUs back.
func (o *Oracle) collect() error {
	o.passTime()
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		if p.completed {
			continue
		}
		for _, c := range slices.Clone(p.dead) {
			if p.current[c.Name] != c {
				if err := o.remove(p, c); err != nil {
					return err
				}
			}
		}
		for len(p.sandboxes) > 1 {
			old := p.sandboxes[0]
			for _, c := range slices.Clone(p.dead) {
				if c.PodSandboxId == old.Id {
					if err := o.remove(p, c); err != nil {
						return err
					}
				}
			}
			if err := o.removeSandbox(p, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// passTime moves the plugin's clock past its orphan timeout, as the time
// a node spends between the kubelet's actions: the pods the plugin was
// not told ended (no API) give their CPUs back — those deleted with a
// sandbox of an earlier containerd, and the completed ones, whose sandbox
// the kubelet stopped — and so do the holds of resizes that did not
// complete.
func (o *Oracle) passTime() {
	o.clock.Advance(policy.DefaultOrphanTimeout + time.Second)
	gone := func(name string) func() bool {
		uid := string((&PodSpec{Name: name}).UID())
		return func() bool {
			_, held := o.node.Plugin().Snapshot().Exclusive[uid]
			return !held
		}
	}
	for name := range o.orphans {
		o.node.WaitFor("the plugin to give back the CPUs of deleted pod "+name, gone(name))
		delete(o.orphans, name)
	}
	for name, p := range o.pods {
		if p.completed && o.node.API == nil && !p.released {
			o.node.WaitFor("the plugin to give back the CPUs of completed pod "+name, gone(name))
			p.released = true
		}
	}
	o.node.WaitFor("the plugin to end the holds past their timeout", func() bool { return len(o.node.Plugin().Snapshot().Held) == 0 })
	o.node.Settle() // (an update that lends the CPUs to shared containers returns)
}

// releasing reports whether the plugin keeps CPUs the kubelet gave back,
// until time passes.
func (o *Oracle) releasing() bool {
	if len(o.orphans) > 0 || len(o.node.Plugin().Snapshot().Held) > 0 {
		return true // (CPUs held for a resize in flight go after the hold timeout)
	}
	for _, p := range o.pods {
		if p.completed && o.node.API == nil && !p.released {
			return true
		}
	}
	return false
}

// complete: a Job's containers exit 0 and it turns Succeeded; the kubelet
// stops its sandbox and gives its CPUs back at the reconcile; its sandbox
// and dead containers stay until it is deleted.
func (o *Oracle) complete(p *pod) error {
	for _, name := range slices.Sorted(maps.Keys(p.running)) {
		if p.running[name] {
			if err := o.exit(p, p.current[name], 0); err != nil {
				return err
			}
		}
	}
	if err := o.node.RT.StopPod(p.sandboxes[len(p.sandboxes)-1]); err != nil {
		return err
	}
	p.completed = true
	p.endNeed = o.pluginUnion(p).Size()
	o.kubelet.End(p.spec.UID())
	if o.node.API != nil {
		o.node.API.Ended(string(p.spec.UID()))
	}
	return nil
}

// delete: the kubelet kills the pod, the CPU manager drops it, the GC
// removes its containers and sandboxes.
func (o *Oracle) delete(p *pod) error {
	if err := o.killAll(p); err != nil {
		return err
	}
	need := o.pluginUnion(p).Size()
	o.kubelet.End(p.spec.UID())
	if o.node.API != nil {
		o.node.API.Ended(string(p.spec.UID()))
	}
	for _, c := range slices.Clone(p.dead) {
		if err := o.remove(p, c); err != nil {
			return err
		}
	}
	for len(p.sandboxes) > 0 {
		if err := o.removeSandbox(p, 0); err != nil {
			return err
		}
	}
	if o.node.API == nil && len(p.known) > 0 && !p.released && need > 0 {
		// The plugin was not told of the removal of every sandbox it
		// knows of the pod (containerd restarted since they ran): it
		// gives the pod's CPUs back after the orphan timeout.
		o.orphans[p.spec.Name] = need
	}
	delete(o.pods, p.spec.Name)
	return nil
}

// reboot: every process dies, containerd and the plugin start again with
// what is on disk, the kubelet re-admits its pods (their entries are in
// its checkpoint) and re-creates the sandbox of every pod that is not
// completed; the GC removes the old ones later (collect), and containerd
// relays the removal of their containers but not of the old sandboxes.
func (o *Oracle) reboot() error {
	o.node.StopPlugin()
	o.node.RT.Reboot()
	o.synchronized(true)
	o.node.StartPlugin()
	for _, p := range o.pods {
		for name, running := range p.running {
			if running {
				p.dead = append(p.dead, p.current[name])
				p.running[name] = false
			}
		}
	}
	if err := o.kubelet.Readmit(); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		if p.completed {
			continue
		}
		if err := o.purgeInit(p); err != nil {
			return err
		}
		if err := o.runSandbox(p); err != nil {
			return err
		}
	}
	return nil
}

// resize is an in-place resize: the spec of one app container changes,
// and the kubelet actuates every container whose spec differs from what
// the runtime has (doPodResizeAction, KEP-1287's order): the pod's totals
// first when they grow, the decreases, then the increases, the totals
// last when they shrink (none when they do not change), and it stops at
// the first refusal, keeping what it applied. The kubelet v1.36 has no
// part in it; KEP-5554's rules are checked: an accepted resize gives a
// container the CPUs asked, keeping its baseline; a refusal is
// prohibitedCPUAllocationError when a container asks for fewer than its
// baseline CPUs, else resizeAllocateCPUsError, Infeasible both, and
// changes nothing. The kubelet's state follows what was applied, so that
// both pools stay comparable.
func (o *Oracle) resize(a Action) error {
	p := o.pods[a.Pod]
	next := *p.spec
	next.Containers = slices.Clone(p.spec.Containers)
	for i := range next.Containers {
		if next.Containers[i].Name == a.Container {
			next.Containers[i].Milli = a.Milli
		}
	}
	// The spec changes first: the kubelet reads it from the API.
	p.spec, p.v1 = &next, next.V1Pod()
	if o.node.API != nil {
		o.node.API.Set(p.v1)
	}
	return o.actuate(p)
}

// actuate is the kubelet's doPodResizeAction for p.
func (o *Oracle) actuate(p *pod) error {
	actual := *p.spec
	actual.Containers = slices.Clone(p.spec.Containers)
	var decreases, increases []string
	for i, c := range actual.Containers {
		if c.Kind == KindInit || !p.running[c.Name] || p.actuated[c.Name] == c.Milli {
			continue
		}
		if c.Milli < p.actuated[c.Name] {
			decreases = append(decreases, c.Name)
		} else {
			increases = append(increases, c.Name)
		}
		actual.Containers[i].Milli = p.actuated[c.Name]
	}
	if len(decreases)+len(increases) == 0 {
		return nil
	}
	sb := p.sandboxes[len(p.sandboxes)-1]
	before, after := podTotals(&actual, actual.V1Pod()), podTotals(p.spec, p.v1)
	grows, shrinks := policy.CPULimitMilli(after) > policy.CPULimitMilli(before), policy.CPULimitMilli(after) < policy.CPULimitMilli(before)
	refused := func(err error) error {
		o.Stats.Refused++
		msg := err.Error()
		below := false
		for _, name := range append(slices.Clone(decreases), increases...) {
			if int(p.milli(name)/1000) < o.pluginBaseline(p, name).Size() {
				below = true
			}
		}
		switch {
		case below && strings.Contains(msg, "Infeasible: prohibitedCPUAllocationError"):
		case strings.Contains(msg, "Infeasible: resizeAllocateCPUsError"):
		default:
			return fmt.Errorf("resize of %s (decreases %v, increases %v) refused with %q: want prohibitedCPUAllocationError below a baseline, else resizeAllocateCPUsError", p.spec.Name, decreases, increases, msg)
		}
		return nil // the kubelet keeps the spec, and retries
	}
	if grows {
		if err := o.node.RT.UpdatePod(sb, policy.PodResources{Resources: after}); err != nil {
			return refused(err)
		}
	}
	for _, name := range append(decreases, increases...) {
		want := p.milli(name)
		if err := o.node.RT.UpdateContainer(p.current[name], containerResources(p.spec, want)); err != nil {
			return refused(err)
		}
		p.actuated[name] = want
		n := int(want / 1000)
		if _, exclusive := o.kubelet.Entry(p.spec.UID(), name); !exclusive {
			continue
		}
		p.resized = true
		baseline := o.pluginBaseline(p, name)
		if n < baseline.Size() {
			return fmt.Errorf("resize of %s/%s to %d CPUs below its %d baseline CPUs was accepted", p.spec.Name, name, n, baseline.Size())
		}
		if got, _ := o.node.RT.CPUs(p.current[name].Id); got.Size() != n || !baseline.IsSubsetOf(got) {
			return fmt.Errorf("resize of %s/%s to %d CPUs keeping its baseline %s: it runs on %s", p.spec.Name, name, n, baseline, got)
		}
		if err := o.kubelet.Resize(p.spec.UID(), name, n, p.baseline[name]); err != nil {
			return err
		}
	}
	if shrinks {
		if err := o.node.RT.UpdatePod(sb, policy.PodResources{Resources: after}); err != nil {
			return refused(err)
		}
	}
	return nil
}

// pluginUnion returns every CPU the plugin's entries of p hold.
func (o *Oracle) pluginUnion(p *pod) cpuset.CPUSet {
	all := cpuset.New()
	for _, a := range o.node.Plugin().Snapshot().Exclusive[string(p.spec.UID())] {
		set := a.Resized
		if set == "" {
			set = a.Baseline
		}
		cpus, _ := cpuset.Parse(set)
		delayed, _ := cpuset.Parse(a.Delayed)
		all = all.Union(cpus).Union(delayed)
	}
	return all
}

// short returns by how many CPUs the kubelet's entries of p are short of
// the plugin's resizes.
func (o *Oracle) short(p *pod) int {
	n := 0
	for _, c := range p.spec.Containers {
		n += o.kubelet.Short(p.spec.UID(), c.Name)
	}
	return n
}

// pluginBaseline returns the baseline CPUs the plugin keeps for a
// container.
func (o *Oracle) pluginBaseline(p *pod, name string) cpuset.CPUSet {
	a := o.node.Plugin().Snapshot().Exclusive[string(p.spec.UID())][name]
	cpus, _ := cpuset.Parse(a.Baseline)
	return cpus
}

// compare checks both sides once the plugin's updates are applied.
func (o *Oracle) compare() error {
	o.Stats.Compared++
	snap := o.node.Settle()
	applied := o.node.RT.Applied()
	var errs []error
	if v := o.node.RT.Violations(); len(v) > 0 {
		errs = append(errs, fmt.Errorf("the runtime saw CPUs in two exclusive sets: %s", strings.Join(v, "; ")))
	}
	if snap.Invariants != "ok" {
		errs = append(errs, fmt.Errorf("the plugin's invariants: %s", snap.Invariants))
	}
	pool, _ := cpuset.Parse(snap.SharedPool)
	want := o.kubelet.Pool().Size() // the pool as the pods' totals make it
	for _, n := range o.orphans {
		want -= n
	}
	for _, h := range snap.Held {
		// KEP-5554: a decrease's CPUs are held for its pod while the
		// pod's resize is in flight (the kubelet's copy gave them back).
		held, _ := cpuset.Parse(h.CPUs)
		want -= held.Size()
	}
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		uid := p.spec.UID()
		need := o.need(p)
		if p.completed {
			if o.node.API == nil && !p.released {
				// Without the API the plugin cannot know the pod is
				// terminal: it gives its CPUs back with its sandbox (or,
				// when containerd no longer relays that, after the
				// orphan timeout).
				want -= p.endNeed
			}
			continue
		}
		kubelet := o.kubelet.Held(uid).Size() + o.short(p)
		expect := need
		if p.resized {
			// The plugin's entries hold the pod's total or more, never
			// more than the kubelet's.
			if got := o.pluginUnion(p).Size(); got < need || got > max(need, kubelet) {
				errs = append(errs, fmt.Errorf("pod %s: the plugin holds %d CPUs for it (%s), its total is %d, the kubelet holds %d",
					name, got, o.pluginUnion(p), need, kubelet))
			} else {
				expect = got
			}
		}
		want -= expect - kubelet + o.short(p)
		if kubelet > need {
			o.Stats.KubeletReusedLess++
		}
		for _, c := range p.spec.Containers {
			if !p.running[c.Name] {
				continue
			}
			ctr := p.current[c.Name]
			kcpus, kExclusive := o.kubelet.Entry(uid, c.Name)
			view, tracked := snap.Containers[ctr.Id]
			got := applied[ctr.Id]
			what := describe(name, c.Name)
			switch {
			case !tracked:
				errs = append(errs, fmt.Errorf("%s (%s) runs but the plugin does not track it", what, ctr.Id))
			case kExclusive != view.Exclusive:
				errs = append(errs, fmt.Errorf("%s: the kubelet pins it %v (%s), the plugin %v (%s)", what, kExclusive, kcpus, view.Exclusive, got))
			case kExclusive && kcpus.Size()+o.kubelet.Short(uid, c.Name) != got.Size():
				errs = append(errs, fmt.Errorf("%s: the kubelet gives it %d CPUs (%s, short %d of a resize), the plugin %d (%s)",
					what, kcpus.Size(), kcpus, o.kubelet.Short(uid, c.Name), got.Size(), got))
			case !kExclusive && !got.Equals(pool):
				errs = append(errs, fmt.Errorf("%s: shared, but runs on %s, not the shared pool %s", what, got, pool))
			}
		}
	}
	if pool.Size() != want {
		errs = append(errs, fmt.Errorf("the plugin's shared pool %s has %d CPUs, the kubelet's pod totals leave %d (the kubelet's pool: %s)", pool, pool.Size(), want, o.kubelet.Pool()))
	}
	return errors.Join(errs...)
}

// need is a pod's exclusive CPUs as its containers' counts make them, the
// way the kubelet totals a pod (podGuaranteedCPUs), on the kubelet's
// current entries (with what a resize's copy could not give them): the
// largest of each init container's with the sidecars before it, and of
// the sidecars' and app containers' sum.
func (o *Oracle) need(p *pod) int {
	count := func(name string) int {
		cpus, _ := o.kubelet.Entry(p.spec.UID(), name)
		return cpus.Size() + o.kubelet.Short(p.spec.UID(), name)
	}
	var inits, sidecars, long int
	for _, c := range p.spec.Containers {
		switch c.Kind {
		case KindInit:
			inits = max(inits, sidecars+count(c.Name))
		case KindSidecar:
			sidecars += count(c.Name)
		default:
			long += count(c.Name)
		}
	}
	return max(inits, sidecars+long)
}
