package lifecycle

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
)

// compare checks both sides once the plugin's updates are applied,
// exactly: each entry of the plugin is the kubelet's (which absorbed it),
// with the kubelet's recorded baseline; each running container runs on
// its entry, or on the shared pool when the kubelet does not pin it; the
// plugin's shared pool is the kubelet's default set CPU for CPU, but the
// CPUs a rule explains — those of the kubelet's entries the plugin has
// not absorbed (no spec, or a pod it refused until a rule's CPUs go), an
// ended pod's it keeps (orphan), a resize's it holds (hold); its holds
// and idle pods are those the oracle predicts, with their times; no CPU
// was ever in two exclusive cpusets; the plugin's invariants hold.
func (o *Oracle) compare() error {
	o.Counts.Add("comparisons", 1)
	snap := o.node.Settle()
	applied := o.node.RT.Applied()
	var errs []error
	if v := o.node.RT.Violations(); len(v) > 0 {
		errs = append(errs, failf("the runtime saw CPUs in two exclusive sets: %s", strings.Join(v, "; ")))
	}
	if snap.Invariants != "ok" {
		errs = append(errs, failf("the plugin's invariants: %s", snap.Invariants))
	}
	pool, _ := cpuset.Parse(snap.SharedPool)
	floating := o.floatingCPUs(nil)
	seen := map[types.UID]bool{}
	for _, name := range sorted(o.pods) {
		p := o.pods[name]
		seen[p.uid] = true
		entries := pluginEntries(snap, p.uid)
		for _, cname := range p.names() {
			k, pinned := o.kubelet.Entry(p.uid, cname)
			e, has := entries[cname]
			c := p.ctrs[cname]
			absorbed := c != nil && c.absorbed
			what := name + "/" + cname
			switch {
			case pinned && has:
				if !absorbed {
					errs = append(errs, failf("%s: the plugin has an entry %s the oracle did not absorb", what, e.assigned))
				} else if !e.assigned.Equals(k) {
					errs = append(errs, failf("%s: the plugin's CPUs %s, the kubelet's %s", what, e.assigned, k))
				}
				if b := o.baselines[ref{p.uid, cname}]; !e.baseline.Equals(b) {
					errs = append(errs, failf("%s: the plugin's baseline %s, the kubelet's recorded baseline %s", what, e.baseline, b))
				}
			case pinned && !has:
				if absorbed {
					errs = append(errs, failf("%s: the kubelet pins it on %s, the plugin has no entry for it any more", what, k))
				} else if o.api() && o.anyAbsorbed(p) {
					errs = append(errs, failf("%s: the kubelet admitted it on %s; the plugin admitted its pod without it", what, k))
				} else {
					o.Counts.Add("floating entries at a comparison", 1)
				}
			case !pinned && has:
				if !p.completed {
					errs = append(errs, failf("%s: the plugin pins it on %s, the kubelet does not", what, e.assigned))
				} else if !e.assigned.IsSubsetOf(o.orphans[p.uid]) {
					errs = append(errs, failf("%s: completed; the plugin keeps %s, the oracle expects %s (orphan)", what, e.assigned, o.orphans[p.uid]))
				}
			}
			if c == nil || c.current == nil || !c.current.running {
				continue
			}
			view, tracked := snap.Containers[c.current.c.Id]
			got := applied[c.current.c.Id]
			switch {
			case !tracked:
				errs = append(errs, failf("%s (%s) runs but the plugin does not track it", what, c.current.c.Id))
			case pinned != view.Exclusive:
				errs = append(errs, failf("%s: the kubelet pins it %v (%s), the plugin %v (%s)", what, pinned, k, view.Exclusive, got))
			case pinned && !got.Equals(k):
				errs = append(errs, failf("%s: runs on %s, its entry is %s", what, got, k))
			case !pinned && !got.Equals(pool):
				errs = append(errs, failf("%s: shared, but runs on %s, not the shared pool %s", what, got, pool))
			}
		}
	}
	for uid, names := range snap.Exclusive {
		if seen[types.UID(uid)] {
			continue
		}
		for cname := range names {
			e := pluginEntries(snap, types.UID(uid))[cname]
			if !e.assigned.IsSubsetOf(o.orphans[types.UID(uid)]) {
				errs = append(errs, failf("%s/%s: the plugin keeps %s for a pod the life ended; the oracle expects %s (orphan)", uid, cname, e.assigned, o.orphans[types.UID(uid)]))
			}
		}
	}
	kept := cpuset.New()
	for uid, cpus := range o.orphans {
		kept = kept.Union(cpus)
		if _, ok := snap.Exclusive[string(uid)]; !ok {
			errs = append(errs, failf("pod %s: the oracle expects the plugin to keep %s (orphan); it has no entry for it", uid, cpus))
		}
	}
	held := cpuset.New()
	for uid, h := range o.holds {
		held = held.Union(h.cpus)
		v, ok := snap.Held[string(uid)]
		since := h.since.UTC().Format(time.RFC3339)
		if !ok || v.CPUs != h.cpus.String() || v.Since != since {
			errs = append(errs, failf("pod %s: the oracle expects %s held since %s (hold), the plugin %+v", uid, h.cpus, since, v))
		}
	}
	for uid, v := range snap.Held {
		if o.holds[types.UID(uid)] == nil {
			errs = append(errs, failf("pod %s: the plugin holds %s since %s; the oracle expects no hold", uid, v.CPUs, v.Since))
		}
	}
	for uid, since := range o.idle {
		if v := snap.Idle[string(uid)]; v != since.UTC().Format(time.RFC3339Nano) {
			errs = append(errs, failf("pod %s: the oracle expects it idle since %s, the plugin says %q", uid, since.Format(time.RFC3339), v))
		}
	}
	for uid, since := range snap.Idle {
		if _, ok := o.idle[types.UID(uid)]; !ok && o.pluginHolds(types.UID(uid)) {
			errs = append(errs, failf("pod %s: the plugin has it idle since %s; the oracle does not", uid, since))
		}
	}
	want := o.kubelet.Pool().Union(floating).Difference(kept).Difference(held)
	if !pool.Equals(want) {
		errs = append(errs, failf("the plugin's shared pool %s; the kubelet's default set %s with the CPUs of its entries the plugin has not absorbed (%s), without those the plugin keeps for ended pods (%s) and holds for resizes (%s), is %s: %s",
			pool, o.kubelet.Pool(), floating, kept, held, want, diff(pool, want)))
	}
	if !kept.IsEmpty() {
		o.Counts.Add("comparisons with CPUs kept for ended pods (orphan)", 1)
	}
	if !held.IsEmpty() {
		o.Counts.Add("comparisons with CPUs held for resizes (hold)", 1)
	}
	return join(errs)
}

// anyAbsorbed reports whether any entry of p was absorbed.
func (o *Oracle) anyAbsorbed(p *pod) bool {
	for _, c := range p.ctrs {
		if c.absorbed {
			return true
		}
	}
	return false
}

// diff says how got differs from want.
func diff(got, want cpuset.CPUSet) string {
	return fmt.Sprintf("extra %s, missing %s", got.Difference(want), want.Difference(got))
}
