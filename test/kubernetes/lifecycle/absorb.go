package lifecycle

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/plugin"
)

// entry is a container's exclusive CPUs as the plugin has them.
type entry struct {
	assigned, baseline cpuset.CPUSet
	init               bool
}

// pluginEntries returns the plugin's entries of a pod, by name.
func pluginEntries(snap plugin.Snapshot, uid types.UID) map[string]entry {
	out := map[string]entry{}
	for name, a := range snap.Exclusive[string(uid)] {
		baseline, _ := cpuset.Parse(a.Baseline)
		assigned := baseline
		if a.Resized != "" {
			assigned, _ = cpuset.Parse(a.Resized)
		}
		out[name] = entry{assigned: assigned, baseline: baseline, init: a.Init}
	}
	return out
}

// absorbAdmission checks what the plugin did at a pod's sandbox: with the
// Kubernetes API it admits the whole pod there, as the kubelet did (every
// container's CPUs, in the kubelet's order), or refuses it for a reason a
// rule explains (judged as the kubelet's code would on the plugin's free
// CPUs); without it, it decides nothing before a container's creation.
func (o *Oracle) absorbAdmission(p *pod) error {
	snap := o.node.Settle()
	if len(snap.Exclusive[string(p.uid)]) > 0 {
		return o.absorbNew(p, snap)
	}
	if !o.api() || len(o.kubelet.Entries(p.uid)) == 0 {
		return nil
	}
	why, err := o.judgeOnPlugin(p, "", snap)
	if err != nil {
		return err
	}
	if why == "" {
		return failf("the plugin did not admit pod %s at its sandbox (RunPodSandbox, with the pod's spec known); the kubelet admitted it (%v), and its code admits it on the plugin's free CPUs %s",
			p.spec.Name, o.kubelet.Entries(p.uid), snap.SharedPool)
	}
	return o.explainRefusal(p, "", "the pod's admission at its sandbox", why)
}

// absorbCreation absorbs what the plugin's entries of p became at the
// creation of container name: new entries (an admission: the pod's with
// the API at its first creation when not at its sandbox, this
// container's without it) must be a choice the kubelet could have made;
// a re-created container (again) keeps its entry, or changes it by the
// resize rules when it asks another count (want).
func (o *Oracle) absorbCreation(p *pod, name string, again bool, want int64) error {
	snap := o.node.Plugin().Snapshot()
	c := p.ctrs[name]
	before, had := c.synced, c.absorbed
	if err := o.absorbNew(p, snap); err != nil {
		return err
	}
	if !again || !had {
		return nil
	}
	e, ok := pluginEntries(snap, p.uid)[name]
	if !ok {
		return failf("%s/%s re-created: the plugin has no entry for it any more (it had %s)", p.spec.Name, name, before)
	}
	if !e.baseline.Equals(o.baselines[ref{p.uid, name}]) {
		return o.absorbMoved(p, name, e)
	}
	n := p.spec.exclusiveCPUs(want)
	if n == 0 || n == before.Size() {
		if !e.assigned.Equals(before) {
			return failf("%s/%s re-created with its count (%dm): its CPUs changed %s → %s", p.spec.Name, name, want, before, e.assigned)
		}
		return nil
	}
	reason := o.resizeVerdict(p, name, n)
	if reason != "" {
		// Rule restart on own CPUs: the count is one the resize rules
		// refuse; the container restarts on the CPUs it held.
		if !e.assigned.Equals(before) {
			return failf("%s/%s re-created asking %d CPUs, which the resize rules refuse (%s): it must keep %s, it has %s",
				p.spec.Name, name, n, reason, before, e.assigned)
		}
		o.Counts.Add(RuleRestartOnOwnCPUs, 1)
		return nil
	}
	if e.assigned.Equals(before) {
		return failf("%s/%s re-created asking %d CPUs, which the resize rules allow on the kubelet's state: it keeps %s",
			p.spec.Name, name, n, before)
	}
	o.Counts.Add("resize: applied at a re-creation", 1)
	return o.absorbResize(p, name, n, e.assigned, false)
}

// absorbNew writes the plugin's entries of p that are new (an admission)
// into the kubelet's state, once it checked that they are a choice the
// kubelet could have made (rule same CPUs): in the spec's order, each
// container gets as many CPUs as the kubelet's entry (the spec's count
// when it has none), each CPU free in the kubelet's state — its own free
// CPUs, the kubelet's entries of the pod's containers not absorbed yet
// and, without the API, of other pods' (rule no spec) — or reusable for
// the pod (an init container's CPUs for the containers after it, not a
// sidecar's or an app container's), the CPUs held for the pod, on NUMA
// nodes a hint the topology manager admits covers, whole cores under
// full-pcpus-only; the pod holds no more CPUs than the kubelet's own
// allocation did (rule init reuse counts by how many fewer).
func (o *Oracle) absorbNew(p *pod, snap plugin.Snapshot) error {
	entries := pluginEntries(snap, p.uid)
	var news []string
	for _, name := range p.names() {
		if _, ok := entries[name]; ok && !p.container(name).absorbed {
			news = append(news, name)
		}
	}
	if len(news) == 0 {
		return nil
	}
	kentries := o.kubelet.Entries(p.uid)
	free := o.kubelet.Free().Union(o.floatingCPUs(nil)).Union(o.heldFor(p))
	reuse, podCPUs := cpuset.New(), cpuset.New()
	var noSpecReuse cpuset.CPUSet
	for _, name := range p.names() {
		c := p.ctrs[name]
		if c == nil || !c.absorbed {
			continue
		}
		podCPUs = podCPUs.Union(c.synced)
		if p.spec.kind(name) == KindInit {
			reuse = reuse.Union(c.synced)
		} else {
			reuse = reuse.Difference(c.synced)
		}
		if !o.api() && !p.running(name) {
			// Without the spec the plugin infers which of a pod's
			// containers that do not run are init containers (by their
			// exit and the pod's total, policy lendersFor), and lends
			// their CPUs (rule no spec).
			noSpecReuse = noSpecReuse.Union(c.synced)
		}
	}
	for _, name := range p.names() {
		if c := p.ctrs[name]; p.running(name) && c.absorbed {
			noSpecReuse = noSpecReuse.Difference(c.synced)
		}
	}
	var errs []error
	newCPUs := cpuset.New()
	podTotal := o.podGuaranteedCPUs(p)
	for _, name := range news {
		e := entries[name]
		n := p.spec.exclusiveCPUs(p.spec.milli(name))
		if k, ok := kentries[name]; ok {
			n = k.Size()
		}
		what := p.spec.Name + "/" + name
		allowed := free.Union(reuse)
		if !e.assigned.Equals(e.baseline) {
			errs = append(errs, failf("%s: admitted with CPUs %s other than its baseline %s", what, e.assigned, e.baseline))
		}
		switch {
		case e.assigned.IsSubsetOf(allowed):
		case e.assigned.IsSubsetOf(allowed.Union(noSpecReuse)):
			o.Counts.Add(RuleNoSpec, 1)
			o.Counts.Add("no spec: took the CPUs of a container that does not run for an init container's", 1)
		default:
			errs = append(errs, failf("%s: the plugin gave it %s, but %s are neither free nor reusable for the pod in the kubelet's state (free %s, reusable %s)",
				what, e.assigned, e.assigned.Difference(allowed), free, reuse))
		}
		if why := o.placementError(e.assigned, n, podCPUs.Union(newCPUs), podTotal); why != "" {
			errs = append(errs, failf("%s: the plugin gave it %s: %s (the kubelet's entry: %s)", what, e.assigned, why, kentries[name]))
		}
		if k, ok := kentries[name]; ok {
			if d := e.assigned.Difference(k).Size(); d > 0 {
				o.Counts.Add("same CPUs: CPUs other than the kubelet's pick", d)
			}
			if aff := o.kubelet.Affinity(p.uid, name); aff != nil && !o.nodesOf(e.assigned).IsSubsetOf(cpuset.New(aff.GetBits()...)) {
				o.Counts.Add("same CPUs: NUMA nodes other than the kubelet's merged hint", 1)
			}
		}
		if p.spec.kind(name) == KindInit {
			reuse = reuse.Union(e.assigned)
		} else {
			reuse = reuse.Difference(e.assigned)
			free = free.Difference(e.assigned)
		}
		newCPUs = newCPUs.Union(e.assigned)
	}
	union := podCPUs.Union(newCPUs)
	if bound := max(p.kubeletUnion, o.kubelet.Held(p.uid).Size()); union.Size() > bound {
		if o.api() {
			errs = append(errs, failf("pod %s: the plugin holds %d CPUs for it (%s), more than the %d of the kubelet's allocation (%v)",
				p.spec.Name, union.Size(), union, bound, kentries))
		} else {
			// Without the spec the plugin tells an init container by
			// its exit, and decides each container when it comes.
			o.Counts.Add(RuleNoSpec, 1)
			o.Counts.Add("no spec: the plugin holds more CPUs for a pod than the kubelet's allocation", 1)
		}
	}
	if len(errs) > 0 {
		return join(errs)
	}
	for _, name := range news {
		e := entries[name]
		o.kubelet.SetEntry(p.uid, name, e.assigned)
		c := p.container(name)
		c.absorbed, c.synced = true, e.assigned
		o.baselines[ref{p.uid, name}] = e.baseline
		o.Counts.Add(RuleSameCPUs, 1)
	}
	o.takeHeld(p, newCPUs)
	if !p.initReuseCounted && o.allAbsorbed(p) {
		p.initReuseCounted = true
		if d := p.kubeletUnion - union.Size(); d > 0 {
			o.Counts.Add(RuleInitReuse, 1)
			o.Counts.Add("init reuse: CPUs the kubelet's own allocation held more", d)
		}
	}
	o.alignFloating(p, cpuset.New())
	return o.relocateFloating(newCPUs)
}

// allAbsorbed reports whether every container the kubelet pins of p has
// its entry absorbed.
func (o *Oracle) allAbsorbed(p *pod) bool {
	for name := range o.kubelet.Entries(p.uid) {
		if c := p.ctrs[name]; c == nil || !c.absorbed {
			return false
		}
	}
	return true
}

// absorbMoved absorbs the entry of a re-created container whose CPUs the
// plugin moved, its baseline with them: without the API, a container
// that did not run when another container of its pod was created can be
// taken for an init container, and that container took its CPUs (rule no
// spec). Anything else that moves a baseline fails.
func (o *Oracle) absorbMoved(p *pod, name string, e entry) error {
	c := p.ctrs[name]
	if o.api() {
		return failf("%s/%s re-created: its baseline moved %s → %s", p.spec.Name, name, o.baselines[ref{p.uid, name}], e.baseline)
	}
	busy := cpuset.New()
	for other, oc := range p.ctrs {
		if other != name && oc.absorbed && p.running(other) {
			busy = busy.Union(oc.synced)
		}
	}
	free := o.kubelet.Free().Union(o.floatingCPUs(nil)).Union(c.synced.Difference(busy))
	if e.assigned.Size() != c.synced.Size() || !e.assigned.IsSubsetOf(free) || c.synced.Intersection(busy).IsEmpty() {
		return failf("%s/%s re-created on %s (baseline %s): it held %s, of which its pod's running containers hold %s; the kubelet's free CPUs are %s",
			p.spec.Name, name, e.assigned, e.baseline, c.synced, c.synced.Intersection(busy), o.kubelet.Free())
	}
	o.Counts.Add(RuleNoSpec, 1)
	o.Counts.Add("no spec: a container taken for an init container moved", 1)
	o.kubelet.SetEntry(p.uid, name, e.assigned)
	c.synced = e.assigned
	o.baselines[ref{p.uid, name}] = e.baseline
	return o.relocateFloating(e.assigned)
}

// floatingCPUs returns the CPUs of the kubelet's entries that the plugin
// has not absorbed (containers it has not created without the API, pods
// it refused to admit with it), but those of except, and but the CPUs
// absorbed entries hold: the plugin has them in its shared pool.
func (o *Oracle) floatingCPUs(except *pod) cpuset.CPUSet {
	floating, absorbed := cpuset.New(), cpuset.New()
	for _, p := range o.pods {
		for name, cpus := range o.kubelet.Entries(p.uid) {
			if c := p.ctrs[name]; c != nil && c.absorbed {
				absorbed = absorbed.Union(c.synced)
			} else if p != except {
				floating = floating.Union(cpus)
			}
		}
	}
	return floating.Difference(absorbed)
}

// relocateFloating moves the kubelet's entries the plugin has not
// absorbed off CPUs the plugin gave to others (taken): in the container
// scope the kubelet allocates each again (its static policy's Allocate,
// with the affinity its topology manager gave it); in the pod scope the
// pod's are placed again together (alignFloating). One the kubelet cannot
// place any more on its affinity stays where it was: its CPUs are then
// another container's too, and neither pool has them (rule no spec; the
// plugin may refuse the container later).
func (o *Oracle) relocateFloating(taken cpuset.CPUSet) error {
	for _, name := range sorted(o.pods) {
		p := o.pods[name]
		if o.cfg.PodScope() {
			o.alignFloating(p, taken)
			continue
		}
		for _, cname := range p.names() {
			cpus, ok := o.kubelet.Entry(p.uid, cname)
			if c := p.ctrs[cname]; !ok || (c != nil && c.absorbed) || cpus.Intersection(taken).IsEmpty() {
				continue
			}
			o.kubelet.SetEntry(p.uid, cname, cpuset.New())
			pod := o.kubelet.allocated(o.kubelet.Pod(p.uid))
			err := fmt.Errorf("%s is not in the pod's spec", cname)
			for _, vc := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
				if vc.Name == cname {
					err = o.kubelet.hints.Policy.Allocate(logr.Discard(), o.kubelet.state, pod, &vc)
				}
			}
			if got, ok := o.kubelet.Entry(p.uid, cname); err == nil && ok && o.placementError(got, got.Size(), cpuset.New(), 0) != "" {
				// (allocateCPUs takes what its affinity lacks
				// elsewhere: the topology manager checked the room at
				// admission, not now.)
				err = fmt.Errorf("placed on %s, off its affinity", got)
			}
			if err != nil {
				o.kubelet.SetEntry(p.uid, cname, cpus)
				o.Counts.Add("no spec: floating entries the kubelet could not place again", 1)
				continue
			}
			o.Counts.Add("no spec: floating entries the kubelet placed again", 1)
		}
	}
	return o.kubelet.Rebuild()
}

// alignFloating places again, in the pod scope, the kubelet's entries of
// p the plugin has not absorbed (no spec) that are off the pod's NUMA
// nodes or on CPUs taken by another: the pod's nodes are those of the
// CPUs the plugin gave its containers (its first container chose them),
// else the kubelet's pod affinity. Each goes on free CPUs of an
// admissible mask covering them (whole cores under full-pcpus-only),
// else on any CPUs there (its CPUs are then another container's too:
// neither pool has them).
func (o *Oracle) alignFloating(p *pod, taken cpuset.CPUSet) {
	if !o.cfg.PodScope() {
		return
	}
	nodes := o.nodesOf(o.pluginCPUs(p))
	if nodes.IsEmpty() {
		for _, name := range p.names() {
			if aff := o.kubelet.Affinity(p.uid, name); aff != nil {
				nodes = cpuset.New(aff.GetBits()...)
				break
			}
		}
	}
	var mask cpuset.CPUSet
	for _, m := range o.admissibleMasks(o.podGuaranteedCPUs(p)) {
		if nodes.IsSubsetOf(m) {
			mask = o.cpusIn(m)
			break
		}
	}
	if mask.IsEmpty() {
		return
	}
	var moving []string
	for _, name := range p.names() {
		cpus, ok := o.kubelet.Entry(p.uid, name)
		if c := p.ctrs[name]; !ok || (c != nil && c.absorbed) || (cpus.IsSubsetOf(mask) && cpus.Intersection(taken).IsEmpty()) {
			continue
		}
		moving = append(moving, name)
	}
	sizes := map[string]int{}
	for _, name := range moving {
		cpus, _ := o.kubelet.Entry(p.uid, name)
		sizes[name] = cpus.Size()
		o.kubelet.SetEntry(p.uid, name, cpuset.New())
	}
	for _, name := range moving {
		free := o.usable(o.kubelet.Free().Intersection(mask)).List()
		if len(free) < sizes[name] {
			free = append(free, mask.Difference(o.cfg.Reserved).Difference(cpuset.New(free...)).List()...)
		}
		o.kubelet.SetEntry(p.uid, name, cpuset.New(free[:sizes[name]]...))
		o.Counts.Add("no spec: floating entries placed again on their pod's NUMA nodes", 1)
	}
}

// heldFor returns the CPUs held for p's resize in flight.
func (o *Oracle) heldFor(p *pod) cpuset.CPUSet {
	if h := o.holds[p.uid]; h != nil {
		return h.cpus
	}
	return cpuset.New()
}

// takeHeld records that p's containers took cpus: they are no longer held
// for it.
func (o *Oracle) takeHeld(p *pod, cpus cpuset.CPUSet) {
	if h := o.holds[p.uid]; h != nil {
		if h.cpus = h.cpus.Difference(cpus); h.cpus.IsEmpty() {
			delete(o.holds, p.uid)
		}
	}
}

// podGuaranteedCPUs is the kubelet's podGuaranteedCPUs of p on its
// current counts (the entries' where it has them, else the spec's): the
// largest of each init container's with the sidecars before it, and of
// the sidecars' and app containers' sum.
func (o *Oracle) podGuaranteedCPUs(p *pod) int {
	count := func(name string) int {
		if cpus, ok := o.kubelet.Entry(p.uid, name); ok {
			return cpus.Size()
		}
		return p.spec.exclusiveCPUs(p.spec.milli(name))
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

func itoa(n int) string { return strconv.Itoa(n) }
