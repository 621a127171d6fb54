package lifecycle

import (
	"maps"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// synchronized records a Synchronize of the plugin, after containerd
// started again (restarted) or the plugin did (pluginRestarted): the
// plugin knows every sandbox the runtime lists (none confirmed) and only
// the running containers; it drops the pods none of whose sandboxes the
// runtime lists; a pod marked idle that still runs nothing keeps its mark
// (unless the plugin restarted: the marks are not in its checkpoint), one
// idle now is marked now; and it applies to a running container the
// count the runtime has for it when the resize rules allow it
// (caughtUp).
func (o *Oracle) synchronized(restarted, pluginRestarted bool) error {
	if restarted {
		o.epoch++
	}
	o.syncs++
	listed := map[string]bool{}
	for _, sb := range o.node.RT.Pods() {
		listed[sb.Id] = true
	}
	var errs []error
	for _, p := range o.allPods() {
		known := false
		p.ghosts = nil
		for _, sb := range p.sandboxes {
			sb.known, sb.confirmed, sb.stopped = listed[sb.sb.Id], false, false
			known = known || sb.known
		}
		for _, c := range p.ctrs {
			// A tracked instance the Synchronize leaves out keeps its
			// limit in the plugin, unless the plugin restarted.
			kept := !pluginRestarted && (c.limitKept || c.tracks())
			c.limitKept = kept
		}
		for _, in := range p.instances() {
			in.tracked = in.running
		}
		if !known && o.pluginHolds(p.uid) {
			errs = append(errs, o.pluginEnds(p, "a Synchronize lists no sandbox of it"))
		}
	}
	for _, uid := range slices.Collect(maps.Keys(o.orphans)) {
		if o.gone[uid] == nil && o.podByUID(uid) == nil {
			delete(o.orphans, uid) // (its sandboxes are gone from the runtime)
		}
	}
	idle := map[types.UID]time.Time{}
	for uid, since := range o.idle {
		if !pluginRestarted && o.pluginHolds(uid) && o.idleNow(uid) {
			idle[uid] = since
		}
	}
	o.idle = idle
	o.markIdle()
	o.node.Settle()
	errs = append(errs, o.endUnlisted())
	if err := join(errs); err != nil {
		return err
	}
	return o.caughtUp()
}

// caughtUp checks what a Synchronize did to the running pinned containers
// whose CPU count in the runtime differs from their entry (a container
// that restarted on its CPUs with a count the plugin refused): the plugin
// applies that count when the resize rules allow it now (shrinks first,
// then in the order the runtime lists the containers),
// else they keep their CPUs (rule restart on own CPUs); the kubelet's
// state follows.
func (o *Oracle) caughtUp() error {
	type missed struct {
		p    *pod
		name string
		n    int
	}
	var all []missed
	for _, name := range sorted(o.pods) {
		p := o.pods[name]
		for _, cname := range p.names() {
			c := p.ctrs[cname]
			if !p.running(cname) || !c.absorbed {
				continue
			}
			if n := p.spec.exclusiveCPUs(c.current.limit); n > 0 && n != c.synced.Size() {
				all = append(all, missed{p, cname, n})
			}
		}
	}
	// In the plugin's order: the shrinks first, each group in the order
	// the runtime lists the containers (by id).
	sort.SliceStable(all, func(i, j int) bool {
		si := all[i].n < all[i].p.ctrs[all[i].name].synced.Size()
		sj := all[j].n < all[j].p.ctrs[all[j].name].synced.Size()
		if si != sj {
			return si
		}
		return all[i].p.ctrs[all[i].name].current.c.Id < all[j].p.ctrs[all[j].name].current.c.Id
	})
	snap := o.node.Settle()
	var errs []error
	for _, m := range all {
		c := m.p.ctrs[m.name]
		e, ok := pluginEntries(snap, m.p.uid)[m.name]
		switch reason := o.resizeVerdict(m.p, m.name, m.n); {
		case !ok:
			errs = append(errs, failf("%s/%s runs, but after a Synchronize the plugin has no entry for it", m.p.spec.Name, m.name))
		case reason != "":
			if !e.assigned.Equals(c.synced) {
				errs = append(errs, failf("%s/%s, asking %d CPUs the resize rules refuse (%s), runs on %s after a Synchronize; it held %s",
					m.p.spec.Name, m.name, m.n, reason, e.assigned, c.synced))
				continue
			}
			o.Counts.Add(RuleRestartOnOwnCPUs, 1)
		case e.assigned.Equals(c.synced):
			errs = append(errs, failf("%s/%s, asking %d CPUs the resize rules allow on the kubelet's state, keeps %s after a Synchronize",
				m.p.spec.Name, m.name, m.n, c.synced))
		default:
			o.Counts.Add("resize: applied at a Synchronize", 1)
			errs = append(errs, o.absorbResize(m.p, m.name, m.n, e.assigned, false))
		}
	}
	return join(errs)
}

// settle ends an action: the plugin's updates are applied, the pods that
// became idle are marked, and with the API the idle pods the API no
// longer lists are ended (the plugin ends them at its next maintenance
// pass: at once).
func (o *Oracle) settle() error {
	o.node.Settle()
	o.markIdle()
	return o.endUnlisted()
}

// endUnlisted waits, with the API, for the plugin to end the idle pods the
// API no longer lists (ExpireOrphans at its next maintenance pass).
func (o *Oracle) endUnlisted() error {
	if !o.api() {
		return nil
	}
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(o.orphans)) {
		p := o.gone[uid]
		if p == nil {
			p = o.podByUID(uid)
		}
		if p == nil || !o.idleNow(uid) {
			continue
		}
		// (At the plugin's next maintenance pass: ExpireOrphans.)
		o.node.WaitFor("the plugin to end pod "+string(uid)+", idle and no longer listed by the API", func() bool {
			snap := o.node.Plugin().Snapshot()
			_, held := snap.Exclusive[string(uid)]
			_, idle := snap.Idle[string(uid)]
			return !held && !idle
		})
		errs = append(errs, o.pluginEnds(p, "the API no longer lists it and it is idle"))
	}
	o.node.Settle()
	return join(errs)
}

// sortedUIDs returns m's keys in order.
func sortedUIDs[V any](m map[types.UID]V) []types.UID { return slices.Sorted(maps.Keys(m)) }
