package lifecycle

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Clock is the plugin's clock (policy.Options.Now). Only the oracle moves
// it: by actionStep at each action and by a wait's duration, never to
// make a check pass.
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

// set moves the clock to t.
func (c *Clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// The kubelet's back-offs (pkg/kubelet/kubelet.go newCrashLoopBackOff and
// pod_workers.go backOffPeriod): a container that exited is re-created
// after 10 s, doubling at each exit in a row up to 5 minutes (reset after
// 10 minutes without an exit); a creation that failed is tried again at
// the pod's next sync, 10 s later.
const (
	crashBackOffBase  = 10 * time.Second
	crashBackOffMax   = 300 * time.Second
	crashBackOffReset = 600 * time.Second
	syncBackOff       = 10 * time.Second
)

// backOff returns how long the kubelet waits before it re-creates a
// container that exited now, and counts the exit.
func (c *ctr) backOff(now time.Time) time.Duration {
	if !c.lastExit.IsZero() && now.Sub(c.lastExit) > crashBackOffReset {
		c.exits = 0
	}
	c.lastExit = now
	d := crashBackOffBase
	for range c.exits {
		d = min(2*d, crashBackOffMax)
	}
	c.exits++
	return d
}

// deadlines returns the times at which something is due: the end of an
// idle pod's orphan timeout or of a hold, and the kubelet's retries.
func (o *Oracle) deadlines() []time.Time {
	var out []time.Time
	for uid, since := range o.idle {
		if o.expires(uid) {
			out = append(out, since.Add(policy.DefaultOrphanTimeout))
		}
	}
	for _, h := range o.holds {
		out = append(out, h.since.Add(policy.DefaultHoldTimeout))
	}
	for _, p := range o.pods {
		for _, c := range p.ctrs {
			if c.pending {
				out = append(out, c.retryAt)
			}
		}
	}
	return out
}

// expires reports whether an idle pod's orphan timeout applies: only
// without the Kubernetes API (with it, an idle pod the API no longer lists
// ends at once, settle, and one it lists keeps its CPUs).
func (o *Oracle) expires(types.UID) bool { return !o.api() }

// passTo moves the clock to t, stopping at each moment something is due
// on the way: a timer of the plugin ends there (expireTimers), the
// kubelet retries what it owes (kubeletSync).
func (o *Oracle) passTo(t time.Time) error {
	for {
		now, next := o.clock.Now(), t
		for _, d := range o.deadlines() {
			if d.After(now) && d.Before(next) {
				next = d
			}
		}
		o.clock.set(next)
		if err := o.expireTimers(); err != nil {
			return err
		}
		if err := o.kubeletSync(); err != nil {
			return err
		}
		o.markIdle() // (at the time of the events)
		if !next.Before(t) {
			return nil
		}
	}
}

// expireTimers waits for the plugin to end what the oracle predicts is
// due now, and no more: an idle pod past the orphan timeout gives its
// CPUs back (rule orphan, which it ends; a pod the kubelet still runs
// must not get there), and CPUs held past the hold timeout return to the
// shared pool (rule hold). A timer not due has not ended: compare sees
// its CPUs still kept.
func (o *Oracle) expireTimers() error {
	now := o.clock.Now()
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(o.idle)) {
		since := o.idle[uid]
		if !o.expires(uid) || now.Before(since.Add(policy.DefaultOrphanTimeout)) {
			continue
		}
		o.node.WaitFor(fmt.Sprintf("the plugin to end pod %s, idle since %s, at its orphan timeout (%s)", uid, since.Format("15:04:05"), now.Format("15:04:05")),
			func() bool {
				snap := o.node.Plugin().Snapshot()
				_, held := snap.Exclusive[string(uid)]
				_, idle := snap.Idle[string(uid)]
				return !held && !idle
			})
		delete(o.idle, uid)
		if _, ok := o.orphans[uid]; ok {
			o.Counts.Add(RuleOrphan, 1)
			o.Counts.Add("orphan: ended at the orphan timeout", 1)
			delete(o.orphans, uid)
		}
		delete(o.holds, uid)
		if o.kubelet.Active(uid) {
			errs = append(errs, failf("the plugin ended pod %s at its orphan timeout (idle since %s) while the kubelet runs it", uid, since.Format("15:04:05")))
		}
		if p := o.podByUID(uid); p != nil {
			o.forget(p)
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(o.holds)) {
		h := o.holds[uid]
		if now.Before(h.since.Add(policy.DefaultHoldTimeout)) {
			continue
		}
		o.node.WaitFor(fmt.Sprintf("the plugin to end the hold of %s on %s (since %s) at its timeout", uid, h.cpus, h.since.Format("15:04:05")),
			func() bool {
				_, held := o.node.Plugin().Snapshot().Held[string(uid)]
				return !held
			})
		delete(o.holds, uid)
		o.Counts.Add("hold: ended at the hold timeout", 1)
	}
	o.node.Settle()
	return join(errs)
}

// forget records that the plugin gave up every CPU of a pod the kubelet
// still runs: its entries are no longer absorbed.
func (o *Oracle) forget(p *pod) {
	for _, c := range p.ctrs {
		c.absorbed, c.synced = false, cpuset.New()
	}
}

// pluginHolds reports whether the oracle expects the plugin to hold CPUs
// for a pod: entries it absorbed, or an orphan's.
func (o *Oracle) pluginHolds(uid types.UID) bool {
	if _, ok := o.orphans[uid]; ok {
		return true
	}
	if p := o.podByUID(uid); p != nil {
		for _, c := range p.ctrs {
			if c.absorbed {
				return true
			}
		}
	}
	return false
}

// markIdle marks, since now, the pods the plugin holds CPUs for that
// became idle: none of their containers runs and none of their sandboxes
// is one the plugin saw run and not stop (policy.markIdle, which the
// plugin calls at every stop and removal and at Synchronize). A
// container's creation or a new sandbox clears the mark (clearIdle).
func (o *Oracle) markIdle() {
	now := o.clock.Now()
	for uid := range o.orphans {
		if _, marked := o.idle[uid]; !marked && o.idleNow(uid) {
			o.idle[uid] = now
		}
	}
	for _, p := range o.pods {
		if _, marked := o.idle[p.uid]; !marked && o.idleNow(p.uid) {
			o.idle[p.uid] = now
		}
	}
}

// clearIdle forgets that a pod was idle.
func (o *Oracle) clearIdle(uid types.UID) { delete(o.idle, uid) }

// idleNow reports whether a pod the plugin holds CPUs for is idle.
func (o *Oracle) idleNow(uid types.UID) bool {
	if !o.pluginHolds(uid) {
		return false
	}
	p := o.podByUID(uid)
	if p == nil {
		p = o.gone[uid]
	}
	if p == nil {
		return true
	}
	if p.runs() {
		return false
	}
	for _, sb := range append(slices.Clone(p.sandboxes), p.ghosts...) {
		if sb.known && sb.confirmed && !sb.stopped {
			return false
		}
	}
	return true
}

// kubeletSync is the kubelet's pod syncs at this moment: it re-creates
// the containers whose back-off is over and retries the creations that
// failed.
func (o *Oracle) kubeletSync() error {
	now := o.clock.Now()
	for _, name := range sorted(o.pods) {
		p := o.pods[name]
		if p.completed || !o.node.RT.Ready(p.current().sb) {
			continue
		}
		for _, cname := range p.names() {
			c := p.ctrs[cname]
			if c == nil || !c.pending || now.Before(c.retryAt) {
				continue
			}
			if err := o.createPending(p, cname); err != nil {
				return err
			}
		}
	}
	return nil
}
