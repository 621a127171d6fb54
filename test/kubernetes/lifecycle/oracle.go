package lifecycle

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/kubernetes/placement"
)

// Oracle plays a life on the kubelet's CPU manager and on the plugin, and
// compares them after every action (the package comment says how).
type Oracle struct {
	t       testing.TB
	cfg     Config
	machine *placement.Machine
	kubelet *Kubelet
	node    *Node
	clock   *Clock
	pods    map[string]*pod
	// leftovers are the sandboxes of pods deleted while the node was
	// down, which the runtime keeps until the kubelet's GC removes them.
	leftovers []*sandbox
	// gone are the pods the kubelet ended and the life forgot whose CPUs
	// the plugin keeps (orphans), by UID.
	gone map[types.UID]*pod
	// epoch counts containerd's starts; syncs the plugin's
	// Synchronizes.
	epoch, syncs int
	// baselines are the kubelet's recorded baselines: each container's
	// entry as admitted (as the kubelet 1.37's V4 checkpoint keeps them).
	baselines map[ref]cpuset.CPUSet
	// orphans are the CPUs the plugin keeps for pods the kubelet ended,
	// by pod (rule orphan).
	orphans map[types.UID]cpuset.CPUSet
	// idle are the pods the plugin holds CPUs for that it should see as
	// idle, and since when (their orphan timeout runs).
	idle map[types.UID]time.Time
	// holds are the CPUs held for pods whose resize is in flight (rule
	// hold).
	holds map[types.UID]*hold
	// Counts count each rule's uses and the comparison's measures.
	Counts Counts
}

// ref names a container of a pod.
type ref struct {
	uid  types.UID
	name string
}

// hold is the CPUs held for a pod's resize in flight, since when.
type hold struct {
	cpus  cpuset.CPUSet
	since time.Time
}

// NewOracle plays lives on kubelet and node under cfg; clock is the
// plugin's.
func NewOracle(t testing.TB, cfg Config, m *placement.Machine, kubelet *Kubelet, node *Node, clock *Clock) *Oracle {
	return &Oracle{t: t, cfg: cfg, machine: m, kubelet: kubelet, node: node, clock: clock, pods: map[string]*pod{}, gone: map[types.UID]*pod{},
		baselines: map[ref]cpuset.CPUSet{}, orphans: map[types.UID]cpuset.CPUSet{}, idle: map[types.UID]time.Time{},
		holds: map[types.UID]*hold{}, Counts: Counts{}}
}

// actionStep is how long the node takes for an action: the only time
// that passes but a wait's.
const actionStep = time.Second

// Trace, when set, receives each action and the cpusets after it.
var Trace func(format string, args ...any)

// api reports whether the plugin watches the Kubernetes API.
func (o *Oracle) api() bool { return o.node.API != nil }

// Play runs one action on both sides and compares them.
func (o *Oracle) Play(a Action) error {
	o.Counts.Add("actions", 1)
	o.Counts.Add("action "+a.Op, 1)
	if Trace != nil {
		Trace("%s  (at %s)", a, o.clock.Now().Format("15:04:05"))
		defer o.trace()
	}
	err := o.passTo(o.clock.Now().Add(actionStep))
	if err == nil {
		err = o.play(a)
	}
	if err == nil {
		err = o.settle()
	}
	if err != nil {
		return err
	}
	return o.compare()
}

// play runs an action's events.
func (o *Oracle) play(a Action) error {
	p := o.pods[a.Pod]
	if a.Pod != "" && p == nil && a.Op != OpStart {
		return fmt.Errorf("no pod %s", a.Pod)
	}
	switch a.Op {
	case OpStart:
		return o.start(a.Spec, a.Interleave)
	case OpStep:
		return o.step(p)
	case OpExit:
		return o.exitAndWait(p, a.Container, a.Code)
	case OpCrash:
		return o.crash(p, a.Container, a.Code, a.RemoveFirst)
	case OpRecreateSandbox:
		return o.recreateSandbox(p)
	case OpCollect:
		return o.collect()
	case OpComplete:
		return o.complete(p)
	case OpDelete:
		return o.delete(p)
	case OpResize:
		return o.resize(p, a.Container, a.Milli)
	case OpReboot:
		return o.reboot(nil)
	case OpRebootDeleting:
		return o.reboot(p)
	case OpRestartContainerd:
		o.node.RestartContainerd()
		return o.synchronized(true, false)
	case OpRestartPlugin:
		o.node.StopPlugin()
		o.node.StartPlugin()
		return o.synchronized(false, true)
	case OpDeleteWhilePluginDown:
		return o.deleteWhilePluginDown(p)
	case OpRestartKubelet:
		return o.restartKubelet()
	case OpWait:
		d, err := a.duration()
		if err != nil {
			return err
		}
		end := o.clock.Now().Add(d)
		if !a.Pulling && d >= syncBackOff {
			// The kubelet's first sync takes the starts' next steps.
			if err := o.passTo(o.clock.Now().Add(syncBackOff)); err != nil {
				return err
			}
			for _, name := range sorted(o.pods) {
				if p := o.pods[name]; p.starting() && !p.completed && o.node.RT.Ready(p.current().sb) {
					if err := o.runSteps(p, true); err != nil {
						return err
					}
				}
			}
			o.node.Settle()
			o.markIdle()
		}
		return o.passTo(end)
	}
	return fmt.Errorf("unknown operation %q", a.Op)
}

// view returns what the generator needs of the node.
func (o *Oracle) view() view {
	v := view{pods: map[string]*podView{}}
	for name, p := range o.pods {
		pv := &podView{spec: p.spec, completed: p.completed, starting: p.starting(), exclusive: map[string]int64{}}
		for _, c := range p.spec.Containers {
			if c.Kind == KindInit || !p.running(c.Name) {
				continue
			}
			pv.running = append(pv.running, c.Name)
			if _, ok := o.kubelet.Entry(p.uid, c.Name); ok {
				pv.exclusive[c.Name] = p.ctrs[c.Name].current.limit
			}
		}
		v.pods[name] = pv
	}
	now := o.clock.Now()
	for _, at := range o.deadlines() {
		if d := at.Sub(now); d > 0 {
			v.deadlines = append(v.deadlines, d)
		}
	}
	slices.Sort(v.deadlines)
	return v
}

// trace reports both sides' cpusets.
func (o *Oracle) trace() {
	snap := o.node.Plugin().Snapshot()
	Trace("  kubelet pool %s, plugin pool %s, held %v, idle %v; oracle: orphans %v, idle %v, holds %v",
		o.kubelet.Pool(), snap.SharedPool, snap.Held, snap.Idle, o.orphans, o.idle, o.holdsString())
	for _, name := range sorted(o.pods) {
		p := o.pods[name]
		var parts []string
		for _, c := range p.spec.Containers {
			k, _ := o.kubelet.Entry(p.uid, c.Name)
			state := "-"
			if cs := p.ctrs[c.Name]; cs != nil && cs.current != nil {
				state = "dead"
				if cs.current.running {
					state = "runs"
				}
				if cs.pending {
					state += "(pending)"
				}
			}
			var plugin string
			if a, ok := snap.Exclusive[string(p.uid)][c.Name]; ok {
				plugin = fmt.Sprintf("%s/%s init=%v", a.Baseline, a.Resized, a.Init)
			}
			if cs := p.ctrs[c.Name]; cs != nil && cs.current != nil {
				plugin += " on " + snap.Containers[cs.current.c.Id].CPUs
			}
			parts = append(parts, fmt.Sprintf("%s(%s %s %dm) kubelet %s plugin %s", c.Name, c.Kind, state, c.Milli, k, plugin))
		}
		var sbs []string
		for _, sb := range p.sandboxes {
			sbs = append(sbs, fmt.Sprintf("%s(e%d k%v c%v s%v)", sb.sb.Id, sb.epoch, sb.known, sb.confirmed, sb.stopped))
		}
		for _, sb := range p.ghosts {
			sbs = append(sbs, fmt.Sprintf("ghost %s(e%d k%v)", sb.sb.Id, sb.epoch, sb.known))
		}
		Trace("  %s completed=%v steps %d/%d sandboxes %v: %s", name, p.completed, p.next, len(p.steps), sbs, strings.Join(parts, "; "))
	}
}

// holdsString prints the predicted holds.
func (o *Oracle) holdsString() string {
	var parts []string
	for _, uid := range slices.Sorted(maps.Keys(o.holds)) {
		h := o.holds[uid]
		parts = append(parts, fmt.Sprintf("%s:%s since %s", uid, h.cpus, h.since.Format("15:04:05")))
	}
	return strings.Join(parts, " ")
}

// podByUID returns the pod of a UID (nil when none).
func (o *Oracle) podByUID(uid types.UID) *pod {
	for _, p := range o.pods {
		if p.uid == uid {
			return p
		}
	}
	return nil
}

// failf returns an error for a difference no rule explains.
func failf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// join joins errors (nil when none).
func join(errs []error) error { return errors.Join(errs...) }
