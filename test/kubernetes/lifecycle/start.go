package lifecycle

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// start admits a pod on the kubelet and, when it is admitted, runs its
// sandbox; its steps follow in the same action, or later ones
// (interleave: other pods' events come between them).
func (o *Oracle) start(s *PodSpec, interleave bool) error {
	vpod := s.V1Pod()
	adm := o.kubelet.Admit(vpod)
	if !adm.Admitted {
		o.Counts.Add("pods the kubelet refused ("+adm.Reason+")", 1)
		return nil // the kubelet fails the pod; no sandbox is made
	}
	o.Counts.Add("pods the kubelet admitted", 1)
	p := &pod{spec: s, v1: vpod, uid: s.UID(), ctrs: map[string]*ctr{}, steps: startSteps(s), kubeletPick: o.kubelet.Entries(s.UID())}
	p.kubeletUnion = o.kubelet.Held(p.uid).Size()
	o.pods[s.Name] = p
	if o.api() {
		o.node.API.Set(vpod)
	}
	if err := o.runSandbox(p); err != nil {
		return err
	}
	if err := o.absorbAdmission(p); err != nil {
		return err
	}
	if interleave {
		return nil
	}
	return o.runSteps(p, true)
}

// overhead returns the pod's RuntimeClass overhead as the kubelet sends
// it apart from the pod resources (kuberuntime_sandbox_linux.go
// convertOverheadToLinuxResources: requests = limits).
func overhead(s *PodSpec) policy.Resources {
	if s.OverheadMilli == 0 {
		return policy.Resources{}
	}
	return scenario.KubeletResources("guaranteed", s.OverheadMilli, s.OverheadMilli, 0)
}

// runSandbox runs a new sandbox of p (RunPodSandbox): the plugin knows
// it, and it replaces the pod's other sandboxes in the plugin's view.
func (o *Oracle) runSandbox(p *pod) error {
	sb, err := o.node.RT.RunPodWithOverhead(sandboxPod(p.spec, p.v1), overhead(p.spec))
	if err != nil {
		return fmt.Errorf("run sandbox of %s: %w", p.spec.Name, err)
	}
	for _, old := range p.sandboxes {
		old.known = false
	}
	p.ghosts = nil
	p.sandboxes = append(p.sandboxes, &sandbox{sb: sb, epoch: o.epoch, known: true, confirmed: true, limit: kubeapi.PodCPULimitMilli(p.v1)})
	p.steps, p.next = startSteps(p.spec), 0
	o.clearIdle(p.uid)
	return nil
}

// step takes the next step of a pod's start.
func (o *Oracle) step(p *pod) error {
	if !p.starting() || p.completed {
		return nil
	}
	return o.runSteps(p, false)
}

// runSteps takes the next step of p's start, or (all) every step left;
// it stops at a creation the plugin refuses (the kubelet tries it again
// at its next sync).
func (o *Oracle) runSteps(p *pod, all bool) error {
	for p.starting() {
		s := p.steps[p.next]
		switch s.op {
		case stepCreate:
			ok, err := o.create(p, s.name)
			if err != nil {
				return err
			}
			if !ok {
				p.ctrs[s.name].retryAt = o.clock.Now().Add(syncBackOff)
				return nil
			}
		case stepExit:
			if err := o.exit(p, s.name, 0); err != nil {
				return err
			}
		case stepExitSidecars:
			// (The kubelet restarts them after their back-off, or at
			// stepCreateSidecars, whichever comes first.)
			for _, c := range p.spec.Containers {
				if c.Kind == KindSidecar && p.running(c.Name) {
					if err := o.exitAndWait(p, c.Name, 1); err != nil {
						return err
					}
				}
			}
		case stepCreateSidecars:
			for _, c := range p.spec.Containers {
				if c.Kind == KindSidecar && !p.running(c.Name) {
					if _, err := o.create(p, c.Name); err != nil {
						return err
					}
				}
			}
		}
		p.next++
		if !all {
			return nil
		}
	}
	return nil
}

// createPending is the kubelet's retry of a creation it owes: a step of
// the pod's start the plugin refused (then the start goes on), or the
// re-creation of a container that exited.
func (o *Oracle) createPending(p *pod, name string) error {
	if p.starting() && p.steps[p.next] == (step{stepCreate, name}) {
		return o.runSteps(p, false)
	}
	_, err := o.create(p, name)
	return err
}

// create creates and starts container name of p in its current sandbox,
// with the CPUs the kubelet allocated for it (its spec: a resize the
// kubelet admitted is allocated). It reports whether the plugin accepted
// it; a refusal leaves it pending (the kubelet tries again at its next
// sync), and must be one a rule explains (judgeRefusal). An accepted
// creation is compared at once (init containers exit before the action
// ends): its cpuset is its entry, the same in the kubelet's state, or
// the shared pool.
func (o *Oracle) create(p *pod, name string) (bool, error) {
	c := p.container(name)
	if c.current != nil && c.current.running {
		return false, fmt.Errorf("create %s/%s while %s runs", p.spec.Name, name, c.current.c.Id)
	}
	again := c.current != nil
	want := p.spec.milli(name)
	ctr, err := o.node.RT.CreateContainer(p.current().sb, name, containerResources(p.spec, want))
	if err != nil {
		c.pending, c.retryAt = true, o.clock.Now().Add(syncBackOff)
		return false, o.judgeRefusal(p, name, again, err)
	}
	c.current = &instance{c: ctr, limit: want, running: true, tracked: true}
	c.pending = false
	o.clearIdle(p.uid)
	o.node.Settle()
	if err := o.absorbCreation(p, name, again, want); err != nil {
		return true, err
	}
	return true, o.checkCreated(p, name)
}

// checkCreated compares a container at its creation: the runtime runs it
// on its entry (the kubelet's, which the plugin's was written into) or,
// when the kubelet does not pin it, on the shared pool.
func (o *Oracle) checkCreated(p *pod, name string) error {
	c := p.ctrs[name]
	got, _ := o.node.RT.CPUs(c.current.c.Id)
	entry, pinned := o.kubelet.Entry(p.uid, name)
	if pinned {
		o.Counts.Add("containers compared at their creation, pinned", 1)
		if p.spec.kind(name) == KindInit {
			o.Counts.Add("init containers compared at their creation, pinned", 1)
		}
		if !got.Equals(entry) {
			return failf("%s/%s created on %s; its entry in the kubelet's state is %s", p.spec.Name, name, got, entry)
		}
		return nil
	}
	pool, _ := cpuset.Parse(o.node.Plugin().Snapshot().SharedPool)
	if !got.Equals(pool) {
		return failf("%s/%s is not pinned by the kubelet, and created on %s, not on the shared pool %s", p.spec.Name, name, got, pool)
	}
	return nil
}

// exit ends a container's process with code (a kill by the kubelet is
// 137).
func (o *Oracle) exit(p *pod, name string, code int32) error {
	in := p.ctrs[name].current
	var err error
	if code == 137 {
		err = o.node.RT.StopContainer(in.c)
	} else {
		err = o.node.RT.ExitContainer(in.c, code)
	}
	if err != nil {
		return fmt.Errorf("stop %s/%s: %w", p.spec.Name, name, err)
	}
	in.running, in.completed = false, code == 0
	p.ctrs[name].dead = append(p.ctrs[name].dead, in)
	return nil
}

// exitAndWait: a container exits and the kubelet re-creates it once its
// crash-loop back-off is over (kubeletSync), whatever its exit code: a
// sidecar, or an app container of a pod that restarts its containers.
func (o *Oracle) exitAndWait(p *pod, name string, code int32) error {
	if !p.running(name) {
		return nil
	}
	if err := o.exit(p, name, code); err != nil {
		return err
	}
	c := p.ctrs[name]
	c.pending, c.retryAt = true, o.clock.Now().Add(c.backOff(o.clock.Now()))
	return nil
}

// remove is the removal of a dead instance (the plugin forgets it).
func (o *Oracle) remove(p *pod, in *instance) error {
	if err := o.node.RT.RemoveContainer(in.c); err != nil {
		return fmt.Errorf("remove %s/%s: %w", p.spec.Name, in.c.Name, err)
	}
	c := p.ctrs[in.c.Name]
	c.limitKept = c.limitKept || in.tracked // (policy RemovedLimits)
	in.tracked = false
	c.dead = slices.DeleteFunc(c.dead, func(d *instance) bool { return d == in })
	return nil
}

// crash: a container exits by itself; the kubelet re-creates it in the
// same action with the resources it allocated, and the GC removes the
// dead instance before or after that.
func (o *Oracle) crash(p *pod, name string, code int32, removeFirst bool) error {
	if !p.running(name) {
		return nil
	}
	old := p.ctrs[name].current
	if err := o.exit(p, name, code); err != nil {
		return err
	}
	p.ctrs[name].backOff(o.clock.Now())
	if removeFirst {
		if err := o.remove(p, old); err != nil {
			return err
		}
	}
	if _, err := o.create(p, name); err != nil {
		return err
	}
	if !removeFirst {
		return o.remove(p, old)
	}
	return nil
}

// killAll stops p's running containers, as the kubelet kills a pod.
func (o *Oracle) killAll(p *pod) error {
	for _, name := range p.names() {
		if p.running(name) {
			if err := o.exit(p, name, 137); err != nil {
				return err
			}
		}
		if c := p.ctrs[name]; c != nil {
			c.pending = false
		}
	}
	return nil
}

// stopSandbox stops a sandbox (StopPodSandbox, relayed when containerd
// ran it in its current life).
func (o *Oracle) stopSandbox(p *pod, sb *sandbox) error {
	if err := o.node.RT.StopPod(sb.sb); err != nil {
		return fmt.Errorf("stop sandbox %s of %s: %w", sb.sb.Id, p.spec.Name, err)
	}
	if sb.epoch == o.epoch && sb.known {
		sb.stopped = true
	}
	return nil
}

// purgeInit removes every dead instance of p's init containers, as the
// kubelet does before it runs a new sandbox (purgeInitContainers).
func (o *Oracle) purgeInit(p *pod) error {
	for _, in := range p.instances() {
		if !in.running && p.spec.kind(in.c.Name) == KindInit {
			if err := o.remove(p, in); err != nil {
				return err
			}
		}
	}
	return nil
}

// recreateSandbox: the pause container died. The kubelet stops the pod's
// containers and its sandbox, removes its init containers, runs a new
// sandbox and the containers again; the GC removes the old sandbox later
// (collect).
func (o *Oracle) recreateSandbox(p *pod) error {
	if err := o.killAll(p); err != nil {
		return err
	}
	if err := o.stopSandbox(p, p.current()); err != nil {
		return err
	}
	if err := o.purgeInit(p); err != nil {
		return err
	}
	if err := o.runSandbox(p); err != nil {
		return err
	}
	return o.runSteps(p, true)
}

// removeSandbox removes one of p's sandboxes with its dead containers;
// containerd relays the removal of those it ran in its current life, and
// the plugin ends a pod whose last sandbox it knows goes.
func (o *Oracle) removeSandbox(p *pod, sb *sandbox) error {
	for _, in := range p.instances() {
		if in.c.PodSandboxId == sb.sb.Id && !in.running {
			if err := o.remove(p, in); err != nil {
				return err
			}
		}
	}
	if err := o.node.RT.RemovePod(sb.sb); err != nil {
		return fmt.Errorf("remove sandbox %s of %s: %w", sb.sb.Id, p.spec.Name, err)
	}
	p.sandboxes = slices.DeleteFunc(p.sandboxes, func(s *sandbox) bool { return s == sb })
	if !sb.known {
		return nil
	}
	if sb.epoch != o.epoch {
		p.ghosts = append(p.ghosts, sb)
		return nil
	}
	sb.known = false
	for _, s := range append(slices.Clone(p.sandboxes), p.ghosts...) {
		if s.known {
			return nil
		}
	}
	return o.pluginEnds(p, "its last sandbox is removed")
}

// pluginEnds records that the plugin ends a pod now: its CPUs go back,
// which the kubelet must have done already.
func (o *Oracle) pluginEnds(p *pod, why string) error {
	delete(o.idle, p.uid)
	delete(o.holds, p.uid)
	if _, ok := o.orphans[p.uid]; ok {
		o.Counts.Add(RuleOrphan, 1)
		o.Counts.Add("orphan: ended as "+why, 1)
		delete(o.orphans, p.uid)
	}
	delete(o.gone, p.uid)
	if o.kubelet.Active(p.uid) && o.pluginHolds(p.uid) {
		o.forget(p)
		return failf("the plugin ends pod %s (%s) while the kubelet runs it", p.spec.Name, why)
	}
	o.forget(p)
	return nil
}

// collect is the kubelet's container GC: dead containers of pods still
// running go (but the latest of each name), then the sandboxes a pod
// replaced, and those of pods deleted while the node was down. (Those of
// completed pods stay until the pod is deleted.)
func (o *Oracle) collect() error {
	for _, name := range sorted(o.pods) {
		p := o.pods[name]
		if p.completed {
			continue
		}
		for _, in := range p.instances() {
			if !in.running && p.ctrs[in.c.Name].current != in {
				if err := o.remove(p, in); err != nil {
					return err
				}
			}
		}
		for len(p.sandboxes) > 1 {
			if err := o.removeSandbox(p, p.sandboxes[0]); err != nil {
				return err
			}
		}
	}
	for _, sb := range o.leftovers {
		// (Of an earlier life of containerd: the removal is not relayed.)
		if err := o.node.RT.RemovePod(sb.sb); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", sb.sb.Id, err)
		}
		for _, p := range o.gone {
			if slices.Contains(p.sandboxes, sb) {
				p.sandboxes = slices.DeleteFunc(p.sandboxes, func(s *sandbox) bool { return s == sb })
				if sb.known {
					p.ghosts = append(p.ghosts, sb)
				}
			}
		}
	}
	o.leftovers = nil
	return nil
}

// complete: a Job's containers exit 0 and it turns Succeeded; the kubelet
// stops its sandbox and gives its CPUs back at the reconcile (and the API
// says so); its sandbox and dead containers stay until it is deleted.
func (o *Oracle) complete(p *pod) error {
	if p.completed || p.starting() {
		return nil
	}
	for _, name := range p.names() {
		if p.running(name) {
			if err := o.exit(p, name, 0); err != nil {
				return err
			}
		}
		if c := p.ctrs[name]; c != nil {
			c.pending = false
		}
	}
	if err := o.stopSandbox(p, p.current()); err != nil {
		return err
	}
	p.completed = true
	return o.kubeletEnds(p)
}

// kubeletEnds ends a pod on the kubelet (removeStaleState) and in the
// API; the plugin ends it at once when the API tells it, else keeps its
// CPUs (rule orphan) until something it sees ends it.
func (o *Oracle) kubeletEnds(p *pod) error {
	kept := o.pluginCPUs(p)
	o.kubelet.End(p.uid)
	if o.api() {
		o.node.API.Ended(string(p.uid))
		if !p.runs() {
			return o.pluginEnds(p, "the API reports it ended")
		}
	}
	if !kept.IsEmpty() {
		o.orphans[p.uid] = kept
	}
	return nil
}

// pluginCPUs returns the CPUs the plugin's entries hold for p, as
// absorbed.
func (o *Oracle) pluginCPUs(p *pod) cpuset.CPUSet {
	all := cpuset.New()
	for _, c := range p.ctrs {
		if c.absorbed {
			all = all.Union(c.synced)
		}
	}
	return all
}

// delete: the kubelet kills the pod, the CPU manager drops it, the GC
// removes its containers and sandboxes.
func (o *Oracle) delete(p *pod) error {
	if err := o.killAll(p); err != nil {
		return err
	}
	if !p.completed {
		if err := o.kubeletEnds(p); err != nil {
			return err
		}
	} else if o.api() {
		o.node.API.Ended(string(p.uid))
	}
	delete(o.pods, p.spec.Name)
	if _, kept := o.orphans[p.uid]; kept {
		o.gone[p.uid] = p
	}
	for len(p.sandboxes) > 0 {
		if err := o.removeSandbox(p, p.sandboxes[0]); err != nil {
			return err
		}
	}
	return nil
}

// deleteWhilePluginDown: the plugin stops, the kubelet deletes the pod
// (kills and removes its containers and sandboxes: the runtime relays
// nothing, no plugin is connected), the plugin starts again: its
// Synchronize no longer lists the pod.
func (o *Oracle) deleteWhilePluginDown(p *pod) error {
	o.node.StopPlugin()
	for _, name := range p.names() {
		if p.running(name) {
			in := p.ctrs[name].current
			if err := o.node.RT.StopContainer(in.c); err != nil {
				return fmt.Errorf("stop %s/%s: %w", p.spec.Name, name, err)
			}
			in.running = false
		}
	}
	for _, sb := range p.sandboxes {
		if err := o.node.RT.RemovePod(sb.sb); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", sb.sb.Id, err)
		}
	}
	p.sandboxes = nil
	if !p.completed {
		o.kubelet.End(p.uid)
	}
	if o.api() {
		o.node.API.Ended(string(p.uid)) // (no plugin to tell)
	}
	delete(o.pods, p.spec.Name)
	if kept := o.pluginCPUs(p); !kept.IsEmpty() || o.orphans[p.uid].Size() > 0 {
		o.orphans[p.uid] = kept.Union(o.orphans[p.uid])
		o.gone[p.uid] = p
	}
	o.node.StartPlugin()
	return o.synchronized(false, true)
}

// reboot: every process dies, containerd and the plugin start again with
// what is on disk, the kubelet starts again (its CPU manager admits its
// pods again from its checkpoint) and re-creates the sandbox of every pod
// that is not completed; the GC removes the old ones later (collect), and
// containerd relays the removal of their containers but not of the old
// sandboxes. deleted, when set, is a pod deleted while the node is down:
// the kubelet never admits it again, containerd still lists its sandbox.
func (o *Oracle) reboot(deleted *pod) error {
	o.node.StopPlugin()
	o.node.RT.Reboot()
	for _, p := range o.allPods() {
		for _, in := range p.instances() {
			in.running = false
		}
		for _, c := range p.ctrs {
			if c.current != nil && !slices.Contains(c.dead, c.current) {
				c.dead = append(c.dead, c.current)
			}
			c.pending = false
		}
	}
	if deleted != nil {
		if !deleted.completed {
			o.kubelet.End(deleted.uid)
		}
		if o.api() {
			o.node.API.Ended(string(deleted.uid)) // (no plugin to tell)
		}
		delete(o.pods, deleted.spec.Name)
		o.leftovers = append(o.leftovers, deleted.sandboxes...)
		if kept := o.pluginCPUs(deleted); !kept.IsEmpty() || o.orphans[deleted.uid].Size() > 0 {
			o.orphans[deleted.uid] = kept.Union(o.orphans[deleted.uid])
			o.gone[deleted.uid] = deleted
		}
	}
	o.node.StartPlugin()
	if err := o.synchronized(true, true); err != nil {
		return err
	}
	if err := o.restartKubelet(); err != nil {
		return err
	}
	for _, name := range sorted(o.pods) {
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
		if err := o.runSteps(p, true); err != nil {
			return err
		}
	}
	return nil
}

// allPods returns the pods of the life and those gone the plugin keeps.
func (o *Oracle) allPods() []*pod {
	var out []*pod
	for _, name := range sorted(o.pods) {
		out = append(out, o.pods[name])
	}
	for _, uid := range sortedUIDs(o.gone) {
		out = append(out, o.gone[uid])
	}
	return out
}

// restartKubelet: the kubelet restarts; its CPU manager admits its pods
// again from its checkpoint (Kubelet.Restart). The plugin sees nothing,
// and nothing may change: the same entries, the same pool.
func (o *Oracle) restartKubelet() error {
	pool, entries := o.kubelet.Snapshot()
	for _, p := range o.pods {
		if !p.completed && o.kubelet.Active(p.uid) && o.kubelet.allocated(p.v1).String() != p.v1.String() {
			o.Counts.Add(RuleReadmitAllocated, 1)
		}
	}
	refused, err := o.kubelet.Restart(func(uid types.UID, reason, message string) bool {
		// Rule restart SMT check: v1.36.3's Allocate checks full-pcpus-only's
		// free cores before it finds the container "already present"
		// (kubernetes/kubernetes#129078, fixed by #129079): it would
		// reject a pod it runs; it keeps it, as the fixed kubelet does.
		if reason == "SMTAlignmentError" && strings.Contains(message, "not enough free physical CPUs") {
			o.Counts.Add(RuleRestartSMT, 1)
			return true
		}
		// Rule no spec: without the API the kubelet's state is the
		// plugin's per-container decisions (and the entries of
		// containers it has not created, moved off the CPUs it gave
		// others), not an allocation of the kubelet's admission, which
		// its topology manager may not admit again.
		if !o.api() {
			o.Counts.Add(RuleNoSpec, 1)
			o.Counts.Add("no spec: pods the restarted kubelet would refuse on the plugin's decisions", 1)
			return true
		}
		// Rule refused pod waits: a pod the plugin refused to admit, and
		// has not admitted since, holds nothing in the plugin; the
		// kubelet's state, brought along with the plugin's, no longer
		// holds what it admitted the pod on, so its topology manager
		// refuses it again, as the plugin does. It keeps waiting.
		if p := o.podByUID(uid); p != nil && p.refused && len(pluginEntries(o.node.Plugin().Snapshot(), p.uid)) == 0 {
			o.Counts.Add(RuleRefusedWaits, 1)
			o.Counts.Add("refused pod waits: the restarted kubelet refuses it too, on the plugin's state", 1)
			return true
		}
		return false
	})
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		return failf("the restarted kubelet refuses pods it ran: %v", refused)
	}
	pool2, entries2 := o.kubelet.Snapshot()
	if !pool.Equals(pool2) || fmt.Sprint(entries) != fmt.Sprint(entries2) {
		return failf("the kubelet's state changed at its restart: pool %s → %s, entries %v → %v", pool, pool2, entries, entries2)
	}
	return nil
}
