package lifecycle

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The resize reasons of KEP-5554 the oracle expects.
const (
	reasonProhibited  = "prohibitedCPUAllocationError"
	reasonResizeAlloc = "resizeAllocateCPUsError"
	reasonSMT         = "SMTAlignmentError"
)

// resizeVerdict decides, by KEP-5554's rules on the kubelet's state, a
// resize of container name of p to n CPUs from its entry A (baseline B,
// as recorded): "" accepts, else the reason of the refusal (Infeasible
// all). n = |A| changes nothing; a count full-pcpus-only cannot align is
// SMTAlignmentError; n < |B| is prohibitedCPUAllocationError; a shrink
// keeps B and n-|B| more of A, a growth keeps A and adds n-|A| of the
// free CPUs (the kubelet's default set but the reserved CPUs), those held
// for the pod and its pod's reusable init containers' CPUs, on the NUMA
// nodes of a hint the topology manager admits for n (in the pod scope:
// for the pod's new total, with all its CPUs), whole cores under
// full-pcpus-only; when it cannot, resizeAllocateCPUsError.
func (o *Oracle) resizeVerdict(p *pod, name string, n int) string {
	a, _ := o.kubelet.Entry(p.uid, name)
	b := o.baselines[ref{p.uid, name}]
	smt := o.kubelet.topo.CPUsPerCore()
	switch {
	case n == a.Size():
		return ""
	case o.cfg.FullPCPUsOnly() && n%smt != 0:
		return reasonSMT
	case n < b.Size():
		return reasonProhibited
	}
	others, podTotal := o.podAround(p, name, a, n)
	if n < a.Size() {
		// A shrink keeps the baseline: the rest of A may be anywhere an
		// admissible hint covers.
		if o.placeable(b, a.Difference(b), n, others, podTotal) {
			return ""
		}
		return reasonResizeAlloc
	}
	if o.placeable(a, o.growthFree(p, name), n, others, podTotal) {
		return ""
	}
	return reasonResizeAlloc
}

// growthFree returns the CPUs a growth of container name of p may add, as
// the plugin has them: the kubelet's free CPUs with those of the entries
// the plugin has not absorbed (rule no spec), without those the plugin
// keeps for ended pods (orphan) or holds for other pods (hold); those
// held for p and its reusable init containers' CPUs. It counts when they
// are not the kubelet's own.
func (o *Oracle) growthFree(p *pod, name string) cpuset.CPUSet {
	has, _ := o.kubelet.Entry(p.uid, name)
	own := o.heldFor(p).Union(o.reusable(p, name)).Difference(has)
	kubelet := o.kubelet.Free().Union(own)
	free := o.kubelet.Free().Union(o.floatingCPUs(nil)).Difference(o.keptCPUs()).Union(own)
	if !free.Equals(kubelet) {
		o.Counts.Add("resize: free CPUs other than the kubelet's (orphan, hold, no spec)", 1)
	}
	return free
}

// keptCPUs returns the CPUs the plugin keeps for ended pods and holds for
// resizes in flight.
func (o *Oracle) keptCPUs() cpuset.CPUSet {
	kept := cpuset.New()
	for _, cpus := range o.orphans {
		kept = kept.Union(cpus)
	}
	for _, h := range o.holds {
		kept = kept.Union(h.cpus)
	}
	return kept
}

// podAround returns, for the pod scope, the CPUs of p's other containers
// (those the plugin has entries for: without the API it knows no others,
// rule no spec) and the pod's whole count when container name goes from
// CPUs a to n: the pod's CPUs, all kept, and the change (docs/design.md:
// "all its pinned containers' CPUs kept, its whole count placed").
func (o *Oracle) podAround(p *pod, name string, a cpuset.CPUSet, n int) (cpuset.CPUSet, int) {
	others := cpuset.New()
	for other, c := range p.ctrs {
		if other != name && c.absorbed {
			cpus, _ := o.kubelet.Entry(p.uid, other) // (a simulation moves it)
			others = others.Union(cpus)
		}
	}
	return others, others.Union(a).Size() + n - a.Size()
}

// podAsDecided returns the CPUs of p's other containers (those absorbed)
// as the plugin's entries have them now. A decrease is judged with them
// under the pod scope: the plugin decides a resize's parts over every
// member and applies a stopped member's decrease once a running one's is
// confirmed (policy ConfirmWithSpec), so it places the decrease around
// the pod as it leaves it, while the kubelet's state takes the parts one
// by one (absorbStopped before the running ones) and still has the
// others' CPUs of before; each of them is judged at its own absorption.
// A member the kubelet's state gives CPUs and the plugin has no entry for
// is a difference, not a member without CPUs: it is an error.
func (o *Oracle) podAsDecided(p *pod, name string) (cpuset.CPUSet, error) {
	entries := pluginEntries(o.node.Plugin().Snapshot(), p.uid)
	others := cpuset.New()
	for other, c := range p.ctrs {
		if other == name || !c.absorbed {
			continue
		}
		e, ok := entries[other]
		if kubelet, _ := o.kubelet.Entry(p.uid, other); !ok && !kubelet.IsEmpty() {
			return cpuset.New(), fmt.Errorf("the kubelet's state gives %s CPUs %s and the plugin has no entry for it", other, kubelet)
		}
		others = others.Union(e.assigned)
	}
	return others, nil
}

// reusable returns the CPUs of p's ordinary init containers' entries that
// container name may take: none of its pod's other containers holds
// them, nor runs on them (as far as the kubelet's state says: a running
// container's decrease simulated before this part gives its CPUs up),
// and, for a sidecar, not those of the init
// containers after it, which run beside it (the kubelet never gives a
// sidecar an init container's CPUs: updateCPUsToReuse reuses an init
// container's CPUs for the containers after it only). Without the API
// the plugin tells init containers by their exit (the plugin's Init
// mark, or an exit 0 with none of the name running).
func (o *Oracle) reusable(p *pod, name string) cpuset.CPUSet {
	snap := o.node.Plugin().Snapshot()
	entries := pluginEntries(snap, p.uid)
	lent, kept := cpuset.New(), cpuset.New()
	after := map[string]bool{}
	if p.spec.kind(name) == KindSidecar {
		seen := false
		for _, c := range p.spec.Containers {
			after[c.Name] = seen
			seen = seen || c.Name == name
		}
	}
	for other, c := range p.ctrs {
		if other == name || !c.absorbed {
			continue
		}
		isInit := p.spec.kind(other) == KindInit && !after[other]
		if !o.api() {
			// Without the spec, an init container the plugin does not
			// tell (by its exit: policy reusable) lends nothing (rule no
			// spec), and one it takes for an init container wrongly
			// lends nothing either: the kubelet's would not.
			isInit = isInit && (entries[other].init || o.completedUnknown(p, other))
		}
		// Its entry in the kubelet's state: what the plugin had when it
		// was absorbed, or where a simulated resize (simulate) moved it.
		cpus := c.synced
		if e, ok := o.kubelet.Entry(p.uid, other); ok {
			cpus = e
		}
		if isInit {
			lent = lent.Union(cpus)
		} else {
			kept = kept.Union(cpus)
		}
		if p.running(other) {
			kept = kept.Union(cpus)
		}
	}
	return lent.Difference(kept)
}

// completedUnknown reports whether, without the API, the plugin takes
// container name of p for an init container: none of its instances
// runs, and one it knows (tracked) exited 0 (policy completedUnknown).
func (o *Oracle) completedUnknown(p *pod, name string) bool {
	c := p.ctrs[name]
	if c == nil || p.running(name) {
		return false
	}
	for _, in := range append(slices.Clone(c.dead), c.current) {
		if in != nil && in.tracked && in.completed {
			return true
		}
	}
	return false
}

// resize is an in-place resize: the spec of one container changes (the
// kubelet v1.36 admits it at once: its allocated resources follow), and
// the kubelet actuates it.
func (o *Oracle) resize(p *pod, name string, milli int64) error {
	p.spec = p.spec.withMilli(name, milli)
	p.v1 = p.spec.V1Pod()
	o.kubelet.SetPod(p.v1)
	if o.api() {
		o.node.API.Set(p.v1)
	}
	return o.actuate(p)
}

// change is one container's part of a resize.
type change struct {
	name     string
	from, to int64 // milli
}

// actuate is the kubelet's doPodResizeAction for p: every running
// container whose CPUs in the runtime differ from its spec, in
// KEP-1287's order — the pod's totals first when they grow, the
// decreases (the last container's first), the increases (the sidecars'
// first, then the app containers', in spec order), the totals last when
// they shrink (none when they do not change) — stopping at the first refusal and keeping what
// it applied (it retries at the next resize). KEP-5554 decides (rule
// resize): with the API the plugin decides the whole resize at its first
// request — every pinned container whose spec differs from what the
// runtime has, a stopped one too (members) — and refuses it whole with
// the reason of a container that fails; without it each container at its
// own request. The kubelet's state follows what the plugin applied.
func (o *Oracle) actuate(p *pod) error {
	var decreases, increases []change
	actual := *p.spec
	actual.Containers = slices.Clone(p.spec.Containers)
	for i, cs := range actual.Containers {
		c := p.ctrs[cs.Name]
		if cs.Kind == KindInit || !p.running(cs.Name) || c.current.limit == cs.Milli {
			continue
		}
		ch := change{cs.Name, c.current.limit, cs.Milli}
		if ch.to < ch.from {
			// (kuberuntime computePodResizeAction prepends a decrease
			// and appends an increase, the sidecars' first.)
			decreases = append([]change{ch}, decreases...)
		} else {
			increases = append(increases, ch)
		}
		actual.Containers[i].Milli = c.current.limit
	}
	if len(decreases)+len(increases) == 0 {
		return nil
	}
	o.Counts.Add("resizes actuated", 1)
	steps := append(decreases, increases...)
	sb := p.current()
	before, after := podTotals(&actual, actual.V1Pod()), podTotals(p.spec, p.v1)
	grows := policy.CPULimitMilli(after) > policy.CPULimitMilli(before)
	shrinks := policy.CPULimitMilli(after) < policy.CPULimitMilli(before)
	// The parts refused on the plugin's free CPUs: with the API the
	// plugin refuses the whole resize at its first request; without it a
	// refusal of the pod's growth must name a part that fails.
	parts := steps
	if o.api() {
		parts = o.members(p)
	}
	failing := o.simulate(p, parts)
	podUpdate := policy.PodResources{Resources: after, Overhead: overhead(p.spec)}
	if grows {
		err := o.node.RT.UpdatePod(sb.sb, podUpdate)
		if err != nil {
			return o.judgeResizeRefusal(p, "the pod's growth (UpdatePodSandbox)", err, failing, parts, true)
		}
		if len(failing) > 0 && o.api() {
			return failf("pod %s's resize %v accepted at UpdatePodSandbox; on the kubelet's state KEP-5554 refuses %v", p.spec.Name, parts, failing)
		}
		o.podUpdated(p, kubeapi.PodCPULimitMilli(p.v1))
		if err := o.absorbStopped(p, parts, false, true); err != nil {
			return err
		}
	}
	for i, ch := range steps {
		n := p.spec.exclusiveCPUs(ch.to)
		_, pinned := o.kubelet.Entry(p.uid, ch.name)
		// With the API the whole resize was judged on the kubelet's state
		// (failing, as the KEP-5554 kubelet allocates it at its
		// admission, container after container); without it each part is
		// judged at its own request.
		reason := ""
		if pinned && !o.api() {
			reason = o.resizeVerdict(p, ch.name, n)
		}
		err := o.node.RT.UpdateContainer(p.ctrs[ch.name].current.c, containerResources(p.spec, ch.to))
		if err != nil {
			if o.api() {
				return o.judgeResizeRefusal(p, "the resize of "+ch.name, err, failing, parts, i == 0 && !grows)
			}
			var own []failure
			if reason != "" {
				own = []failure{{ch.name, reason}}
			}
			return o.judgeResizeRefusal(p, "the resize of "+ch.name, err, own, steps, true)
		}
		if o.api() && len(failing) > 0 {
			return failf("pod %s's resize %v: %s's part accepted; on the kubelet's state KEP-5554 refuses %v", p.spec.Name, parts, ch.name, failing)
		}
		if i == 0 && !grows {
			if err := o.absorbStopped(p, parts, false, false); err != nil {
				return err
			}
		}
		if reason != "" {
			return failf("resize of %s/%s to %d CPUs accepted; on the kubelet's state KEP-5554 refuses it (%s)", p.spec.Name, ch.name, n, reason)
		}
		p.ctrs[ch.name].current.limit = ch.to
		if pinned {
			got, _ := o.node.RT.CPUs(p.ctrs[ch.name].current.c.Id)
			entries := pluginEntries(o.node.Settle(), p.uid)
			e := entries[ch.name]
			if !got.Equals(e.assigned) {
				return failf("resize of %s/%s: it runs on %s, its entry is %s", p.spec.Name, ch.name, got, e.assigned)
			}
			if o.api() {
				if err := o.absorbSiblingParts(p, steps[i+1:], entries); err != nil {
					return err
				}
			}
			if err := o.absorbResize(p, ch.name, n, e.assigned, true); err != nil {
				return err
			}
		}
		o.settleHold(p)
	}
	if err := o.absorbStopped(p, parts, true, false); err != nil {
		return err
	}
	if shrinks {
		if err := o.node.RT.UpdatePod(sb.sb, podUpdate); err != nil {
			return failf("pod %s's decrease (UpdatePodSandbox, after its containers' %v) refused: %v", p.spec.Name, steps, err)
		}
		o.podUpdated(p, kubeapi.PodCPULimitMilli(p.v1))
	}
	return nil
}

// members returns the parts of p's resize the plugin decides with the
// API: every pinned container but the ordinary init containers, running
// or stopped, whose spec differs from what the runtime has for it (its
// latest instance's limit; one never created, its entry's count),
// decreases first, each in name order (policy podMembers).
func (o *Oracle) members(p *pod) []change {
	var decreases, increases []change
	for _, name := range slices.Sorted(maps.Keys(o.kubelet.Entries(p.uid))) {
		if p.spec.kind(name) == KindInit {
			continue
		}
		cpus, _ := o.kubelet.Entry(p.uid, name)
		from := int64(cpus.Size()) * 1000
		c := p.ctrs[name]
		if c != nil && c.current != nil {
			from = c.current.limit
		}
		to := p.spec.milli(name)
		if to == from {
			continue
		}
		if c != nil && c.current != nil && !p.running(name) && !c.tracks() && !c.limitKept {
			// The plugin restarted since it last saw it: it does not know
			// the limit it ran with, and leaves it to its re-creation.
			o.Counts.Add(RuleStoppedUnknown, 1)
			continue
		}
		// (Counts against the entry decide which is a decrease.)
		if p.spec.exclusiveCPUs(to) < cpus.Size() {
			decreases = append(decreases, change{name, from, to})
		} else {
			increases = append(increases, change{name, from, to})
		}
	}
	return append(decreases, increases...)
}

// absorbStopped absorbs, with the API, the parts of a resize the plugin
// decided for containers that do not run: their entries take the spec's
// count for their re-creation. At the resize's first request (growths
// false) the decreases are taken, before the running containers' growths
// that may take their CPUs, and with applied (the first request was the
// pod's growth, UpdatePodSandbox, before any running container's part)
// so are the growths the plugin applied then, which the running
// containers' growths are placed around (under the pod scope the pod's
// count decides its NUMA nodes); the other growths (growths true) once
// every running container's part is applied, since one may need the CPUs
// a running container's decrease releases (policy ConfirmWithSpec: the
// plugin grows it when the runtime confirms that decrease).
func (o *Oracle) absorbStopped(p *pod, parts []change, growths, applied bool) error {
	if !o.api() {
		return nil
	}
	snap := o.node.Settle()
	for _, ch := range parts {
		c := p.ctrs[ch.name]
		if p.running(ch.name) || c == nil || !c.absorbed {
			continue
		}
		n := p.spec.exclusiveCPUs(ch.to)
		e := pluginEntries(snap, p.uid)[ch.name]
		if have, _ := o.kubelet.Entry(p.uid, ch.name); n > have.Size() && !growths && !(applied && e.assigned.Size() == n) {
			continue // a growth the plugin applies once a decrease is confirmed
		}
		if e.assigned.Size() != n {
			return failf("pod %s's resize accepted: %s (not running) has %s, not the %d CPUs of its spec", p.spec.Name, ch.name, e.assigned, n)
		}
		// The plugin records the spec's limit on the stopped instances,
		// whether or not their CPUs change (policy resizeEntry,
		// resizeStopped), as the kubelet restarts them with it: whether
		// the pod's resize is still in flight counts it.
		for _, in := range append(slices.Clone(c.dead), c.current) {
			if in != nil && in.tracked && !in.running {
				in.limit = ch.to
			}
		}
		if !e.assigned.Equals(c.synced) {
			o.Counts.Add("resize: applied to a container that does not run", 1)
			if err := o.absorbResize(p, ch.name, n, e.assigned, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// podUpdated records an UpdatePodSandbox the plugin accepted: the pod's
// total, and a hold that ends when the pod adds up again.
func (o *Oracle) podUpdated(p *pod, limit int64) {
	if limit > 0 {
		p.recorded = limit
	}
	o.settleHold(p)
}

// failure is a part of a resize KEP-5554 refuses, and its reason.
type failure struct{ name, reason string }

// judgeResizeRefusal judges a refused resize: some part of it (parts)
// must fail on the kubelet's state (failing), with the reason the plugin
// gives (a pod-level refusal may name the pod's division of its total
// instead, without the API). With the API it comes at the resize's first
// request (first). A refusal changes nothing, in the plugin and in the
// kubelet's copy: checked by the comparison after the action.
func (o *Oracle) judgeResizeRefusal(p *pod, what string, err error, failing []failure, parts []change, first bool) error {
	verdict, reason := parseRefusal(err)
	o.Counts.Add(fmt.Sprintf("resizes refused (%s: %s)", verdict, reason), 1)
	if len(failing) == 0 {
		return failf("pod %s: %s (%v) refused: %v; on the kubelet's state KEP-5554 accepts every part", p.spec.Name, what, parts, err)
	}
	if verdict != "Infeasible" {
		return failf("pod %s: %s refused %q: KEP-5554's refusals of a resize are Infeasible", p.spec.Name, what, err)
	}
	matched := slices.ContainsFunc(failing, func(f failure) bool { return f.reason == reason })
	if !matched && !(o.podLevel(what) && !o.api()) {
		return failf("pod %s: %s refused with %s (%v); on the kubelet's state KEP-5554 refuses %v", p.spec.Name, what, reason, err, failing)
	}
	if !first && o.api() {
		return failf("pod %s: %s refused after parts of the resize were applied; with the API the whole resize is decided at its first request", p.spec.Name, what)
	}
	o.Counts.Add(RuleResize, 1)
	o.Counts.Add("resize: refusals as KEP-5554 refuses them", 1)
	return nil
}

// podLevel reports whether a refusal is the pod-level one.
func (o *Oracle) podLevel(what string) bool { return what == "the pod's growth (UpdatePodSandbox)" }

// simulate decides a whole resize (parts in order) on a copy of the
// kubelet's state: each part by resizeVerdict, an accepted decrease
// releasing CPUs outside the baseline for the parts after it, an accepted
// growth taking free CPUs, a refused part left as it was. It returns the
// parts refused. KEP-5554 keeps a shrinking container's baseline and says
// nothing of which of its other CPUs go (the kubelet v1.36 has no such
// code): a decrease is tried with each choice of the CPUs it keeps
// (shrinkChoices), and the resize is refused only when no choice lets
// every later part fit; the first choice's refusals are the ones named.
// absorbResize then checks the choice the plugin made.
func (o *Oracle) simulate(p *pod, parts []change) []failure {
	pool, entries := o.kubelet.Snapshot()
	defer o.kubelet.restore(pool, entries)
	return o.simulateFrom(p, parts)
}

// simulateFrom is simulate's walk over parts on the kubelet's state as it
// is, which it changes.
func (o *Oracle) simulateFrom(p *pod, parts []change) []failure {
	var failing []failure
	for i, ch := range parts {
		if _, pinned := o.kubelet.Entry(p.uid, ch.name); !pinned {
			continue
		}
		n := p.spec.exclusiveCPUs(ch.to)
		if reason := o.resizeVerdict(p, ch.name, n); reason != "" {
			failing = append(failing, failure{ch.name, reason})
			continue
		}
		a, _ := o.kubelet.Entry(p.uid, ch.name)
		b := o.baselines[ref{p.uid, ch.name}]
		if n < a.Size() {
			choices := o.shrinkChoices(a, b, n)
			if len(choices) == 1 || len(failing) > 0 {
				o.kubelet.SetEntry(p.uid, ch.name, choices[0])
				continue
			}
			var first []failure
			for j, kept := range choices {
				pool, entries := o.kubelet.Snapshot()
				o.kubelet.SetEntry(p.uid, ch.name, kept)
				rest := o.simulateFrom(p, parts[i+1:])
				o.kubelet.restore(pool, entries)
				if len(rest) == 0 {
					if j > 0 {
						o.Counts.Add(RuleResize+": a decrease's other choice of CPUs lets the rest fit", 1)
					}
					return nil
				}
				if j == 0 {
					first = rest
				}
			}
			return first
		} else if n > a.Size() {
			others, podTotal := o.podAround(p, ch.name, a, n)
			if grown, ok := o.placement(a, o.growthFree(p, ch.name), n, others, podTotal); ok {
				o.kubelet.SetEntry(p.uid, ch.name, grown)
			}
		}
	}
	return failing
}

// maxShrinkChoices bounds the choices simulate tries for one decrease;
// beyond it, the two that matter to the parts after it: the CPUs on the
// baseline's NUMA nodes kept first, and the CPUs other entries also hold
// (an init container's, reused) kept first, so that what the decrease
// releases is free.
const maxShrinkChoices = 64

// shrinkChoices returns the CPU sets a decrease of entry a (baseline b) to
// n CPUs may keep: b and n-|b| of the rest. The first keeps the rest's
// CPUs on the baseline's NUMA nodes first, in CPU order.
func (o *Oracle) shrinkChoices(a, b cpuset.CPUSet, n int) []cpuset.CPUSet {
	rest := a.Difference(b)
	k := n - b.Size()
	near := rest.Intersection(o.cpusIn(o.nodesOf(b)))
	far := rest.Difference(near)
	first := b.Union(cpuset.New(append(near.List(), far.List()...)[:k]...))
	choices := []cpuset.CPUSet{first}
	add := func(c cpuset.CPUSet) {
		if !slices.ContainsFunc(choices, c.Equals) {
			choices = append(choices, c)
		}
	}
	if binomial(rest.Size(), k) <= maxShrinkChoices {
		combinations(rest.List(), k, func(kept []int) { add(b.Union(cpuset.New(kept...))) })
		return choices
	}
	shared := rest.Intersection(o.heldByOthers(a))
	add(b.Union(cpuset.New(append(shared.List(), rest.Difference(shared).List()...)[:k]...)))
	return choices
}

// heldByOthers returns the CPUs of a that another entry of the kubelet's
// state holds too (an init container's CPUs its app reuses).
func (o *Oracle) heldByOthers(a cpuset.CPUSet) cpuset.CPUSet {
	_, entries := o.kubelet.Snapshot()
	count := map[int]int{}
	for _, cs := range entries {
		for _, cpus := range cs {
			for _, c := range cpus.Intersection(a).UnsortedList() {
				count[c]++
			}
		}
	}
	held := cpuset.New()
	for c, k := range count {
		if k > 1 {
			held = held.Union(cpuset.New(c))
		}
	}
	return held
}

// binomial returns n choose k.
func binomial(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
	}
	return r
}

// combinations calls f with each k-element subset of list, in order.
func combinations(list []int, k int, f func([]int)) {
	picked := make([]int, 0, k)
	var walk func(from int)
	walk = func(from int) {
		if len(picked) == k {
			f(slices.Clone(picked))
			return
		}
		for i := from; i <= len(list)-(k-len(picked)); i++ {
			picked = append(picked, list[i])
			walk(i + 1)
			picked = picked[:len(picked)-1]
		}
	}
	walk(0)
}

// absorbSiblingParts takes into the kubelet's state the parts of a
// resize still to be sent (later) that the plugin applied with an
// earlier part that needed them first (policy afterSiblings: a decrease
// whose CPUs it takes, an increase that makes the pod's count under the
// pod scope; as the KEP-5554 kubelet allocates the whole resize at its
// admission). Each must be exactly the count its part asks, and its own
// request later changes nothing.
func (o *Oracle) absorbSiblingParts(p *pod, later []change, entries map[string]entry) error {
	for _, ch := range later {
		have, pinned := o.kubelet.Entry(p.uid, ch.name)
		n := p.spec.exclusiveCPUs(ch.to)
		e, ok := entries[ch.name]
		if !pinned || !ok || n == have.Size() || e.assigned.Size() == have.Size() {
			continue
		}
		if e.assigned.Size() != n {
			return failf("resize of %s: %s's part (%d CPUs) applied beforehand as %s", p.spec.Name, ch.name, n, e.assigned)
		}
		o.Counts.Add("resize: a later part applied with an earlier one", 1)
		if err := o.absorbResize(p, ch.name, n, e.assigned, true); err != nil {
			return err
		}
	}
	return nil
}

// absorbResize checks the plugin's CPUs for container name of p after an
// accepted resize to n CPUs (rule resize), and writes them into the
// kubelet's state: n CPUs, the baseline kept; a growth keeps the CPUs it
// had and adds CPUs free in the kubelet's state, held for the pod or
// reusable (its pod's init containers'), where the topology manager
// admits; a shrink keeps CPUs it had. The CPUs a decrease (update: an
// UpdateContainer's; a re-creation's or a Synchronize's give them back)
// releases while the pod's resize is in flight are held for the pod
// (rule hold).
func (o *Oracle) absorbResize(p *pod, name string, n int, cpus cpuset.CPUSet, update bool) error {
	c := p.ctrs[name]
	old, b := c.synced, o.baselines[ref{p.uid, name}]
	what := p.spec.Name + "/" + name
	if !b.IsSubsetOf(cpus) {
		return failf("resize of %s to %d CPUs: %s does not keep its baseline %s", what, n, cpus, b)
	}
	others, _ := o.podAround(p, name, old, n)
	if n < old.Size() {
		var err error
		if others, err = o.podAsDecided(p, name); err != nil {
			return failf("resize of %s to %d CPUs: %v", what, n, err)
		}
	}
	if why := o.placementError(cpus, n, others, others.Union(cpus).Size()); why != "" {
		return failf("resize of %s to %d CPUs: %s: %s", what, n, cpus, why)
	}
	switch {
	case n > old.Size():
		free := o.growthFree(p, name)
		if !old.IsSubsetOf(cpus) || !cpus.Difference(old).IsSubsetOf(free) {
			return failf("growth of %s from %s to %s: it must keep its CPUs and add free, held or reusable ones (free %s)", what, old, cpus, free)
		}
		o.takeHeld(p, cpus.Difference(old))
	case n < old.Size():
		if !cpus.IsSubsetOf(old) {
			return failf("shrink of %s from %s to %s: it must keep CPUs it had", what, old, cpus)
		}
		if released := old.Difference(cpus).Difference(others); update && !released.IsEmpty() && o.inFlight(p) {
			h := o.holds[p.uid]
			if h == nil {
				h = &hold{cpus: cpuset.New(), since: o.clock.Now()}
				o.holds[p.uid] = h
			}
			h.cpus = h.cpus.Union(released)
			o.Counts.Add(RuleHold, 1)
		}
	}
	o.Counts.Add(RuleResize, 1)
	o.kubelet.SetEntry(p.uid, name, cpus)
	c.synced = cpus
	return o.relocateFloating(cpus.Difference(old))
}

// settleHold returns the CPUs held for p to the shared pool once its
// resize is no longer in flight.
func (o *Oracle) settleHold(p *pod) {
	if _, ok := o.holds[p.uid]; ok && !o.inFlight(p) {
		delete(o.holds, p.uid)
		o.Counts.Add("hold: ended as its pod added up again", 1)
	}
}

// inFlight reports whether p's resize is in flight: what its containers'
// CPU limits add up to is not its total (the last UpdatePodSandbox's, or
// the current sandbox's). Its containers are those the plugin knows, each
// name once (by its running instance, else its latest stopped one), totalled as
// the kubelet totals a pod (the sidecars' and app containers' sum, or an
// init container's need with the sidecars' when larger); without the API
// a container counts as an app container unless the plugin took it for
// an init container (policy podLimitMilli).
func (o *Oracle) inFlight(p *pod) bool {
	total := p.recorded
	if total == 0 {
		total = p.current().limit
	}
	if total == 0 {
		return false
	}
	entries := pluginEntries(o.node.Plugin().Snapshot(), p.uid)
	var long, sidecars, init int64
	for _, name := range p.names() {
		c := p.ctrs[name]
		if c == nil {
			continue
		}
		// The running instance, else the latest the plugin tracks (the
		// dead are in the order they died, the current one last).
		var limit int64
		found, running := false, false
		for _, in := range append(slices.Clone(c.dead), c.current) {
			if in == nil || !in.tracked || running {
				continue
			}
			limit, found, running = in.limit, true, in.running
		}
		if !found {
			continue
		}
		kind := p.spec.kind(name)
		if !o.api() {
			kind = KindApp
			if entries[name].init {
				kind = KindInit
			}
		}
		switch kind {
		case KindInit:
			init = max(init, limit)
		case KindSidecar:
			sidecars += limit
			long += limit
		default:
			long += limit
		}
	}
	sum := long
	if init > 0 {
		sum = max(long, init+sidecars)
	}
	return sum != total
}
