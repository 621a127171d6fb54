package plugin

import (
	"maps"
	"slices"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// ledger is the plugin's record of its dealings with the runtime: for each
// container what it handed to the runtime and what the runtime may still
// show (runtimeView, belief.go); which containers' cpusets must still be
// sent, and since when; the events delivered, which confirm the replies
// before them; and the unsolicited update in flight. The handlers record
// in it every cpuset they hand out, the sender takes what is pending from
// it, and the verifier has it name the cgroups to read and judge what was
// read. It holds no policy state. The plugin's lock guards it.
//
// An unsolicited update lends the free CPUs it carries (Model.Lending):
// containerd applies it when it gets its NRI lock, which may be after an
// event it delivers meanwhile, so a CPU it gives a shared container cannot
// be handed out exclusively until it returns. A handler cannot wait for it
// either: containerd holds the lock while the handler runs. So pending
// updates ride on the replies of the events that keep coming, and go out
// on their own only after SendDelay without an event and once the runtime
// has applied the last reply (SendMaxDelay at the latest), one update at a
// time, each container once.
type ledger struct {
	views map[string]*runtimeView
	// pending are the containers whose cpuset must still be sent, and
	// pendingSince when the set last became non-empty.
	pending      map[string]bool
	pendingSince time.Time
	// seq counts the events delivered; lastEvent is when the last came.
	seq       uint64
	lastEvent time.Time
	// replying is set from a reply that hands the runtime cpusets until
	// the next event: the runtime may still be applying it.
	replying bool
	// sendDone is closed when the unsolicited update in flight returns;
	// nil when none is in flight.
	sendDone chan struct{}
	now      func() time.Time
}

func newLedger() *ledger {
	return &ledger{views: map[string]*runtimeView{}, pending: map[string]bool{}, now: time.Now}
}

// view returns the record of container id, making it if needed.
func (l *ledger) view(id string) *runtimeView {
	v := l.views[id]
	if v == nil {
		v = &runtimeView{}
		l.views[id] = v
	}
	return v
}

// event records that the runtime delivered an event: the replies of the
// earlier ones are applied (containerd applies a reply's updates of other
// containers before it delivers the next event), and the runtime is busy.
func (l *ledger) event() {
	l.seq++
	l.lastEvent = l.now()
	l.replying = false
}

// handed records a cpuset handed to the runtime (in an event's reply, as a
// resize's target, in a new container's spec): no longer pending.
func (l *ledger) handed(u policy.Update, kind handKind) {
	l.view(u.ContainerID).hand(u.CPUs, kind, l.seq)
	delete(l.pending, u.ContainerID)
	l.replying = true
}

// created records a new container: the cpuset of its spec, handed, and
// its cgroups path.
func (l *ledger) created(inSpec policy.Update, cgroupPath string) {
	l.view(inSpec.ContainerID).setCgroupPath(cgroupPath)
	l.handed(inSpec, handedInSpec)
}

// started records that container id started, and reports whether a
// cpuset was handed to it while it was starting: it must be sent again.
func (l *ledger) started(id string) bool {
	v := l.views[id]
	return v != nil && v.start()
}

// confirmApplied records that the runtime applied the update of container
// id it was handed in a reply (PostUpdateContainer), unless an
// unsolicited update is in flight.
func (l *ledger) confirmApplied(id string) {
	if v := l.views[id]; v != nil && !v.inFlight {
		v.confirm()
	}
}

// markDue marks container id for a cgroup read at the next verification.
func (l *ledger) markDue(id string) {
	if v := l.views[id]; v != nil {
		v.due = true
	}
}

// setPending records that container id's cpuset must still be sent.
func (l *ledger) setPending(id string) {
	if len(l.pending) == 0 {
		l.pendingSince = l.now()
	}
	l.pending[id] = true
}

// pendingIDs returns the pending containers, sorted.
func (l *ledger) pendingIDs() []string { return slices.Sorted(maps.Keys(l.pending)) }

// dropPending forgets that containers' cpusets must be sent.
func (l *ledger) dropPending(ids ...string) {
	for _, id := range ids {
		delete(l.pending, id)
	}
}

// clearPending forgets every pending cpuset: the next Synchronize sends
// every container what it should run on.
func (l *ledger) clearPending() { clear(l.pending) }

// sendDue returns when the pending updates should go out as an
// unsolicited update, if any are pending: delay after the last event, or
// maxDelay after they became pending, and never before maxDelay after an
// event whose reply the runtime may still be applying.
func (l *ledger) sendDue(delay, maxDelay time.Duration) (time.Time, bool) {
	if len(l.pending) == 0 {
		return time.Time{}, false
	}
	if l.replying {
		// containerd applies the last reply under its NRI lock (a runc
		// update per container) and delivers the events queued meanwhile
		// before an unsolicited update would get the lock.
		return l.lastEvent.Add(maxDelay), true
	}
	quiet := l.lastEvent.Add(delay)
	if latest := l.pendingSince.Add(maxDelay); latest.Before(quiet) {
		return latest, true
	}
	return quiet, true
}

// sendInFlight returns a channel closed when the unsolicited update in
// flight returns; nil when none is in flight.
func (l *ledger) sendInFlight() <-chan struct{} { return l.sendDone }

// desiredFunc returns what the given containers should run on, and those
// no longer running (policy.Policy.DesiredUpdates on the current model).
type desiredFunc func(ids []string) (updates []policy.Update, gone []string)

// reply returns the updates to put in the reply to o's event: the
// decision's own, then those still pending (a failed unsolicited update
// rides on the next reply) that the decision does not already update,
// except o's container, which the runtime handles separately. Each
// container appears once. They are recorded as handed to the runtime.
func (l *ledger) reply(o outcome, desired desiredFunc) []policy.Update {
	own := o.decision.Updates()
	if o.container.ID != "" && slices.ContainsFunc(own, func(u policy.Update) bool { return u.ContainerID == o.container.ID }) {
		// (A decision's shared-pool updates may name the event's own
		// container: a pod admitted at a shared container's creation. The
		// runtime refuses an update of the container it is creating; its
		// own cpuset is the event's.)
		own = slices.DeleteFunc(slices.Clone(own), func(u policy.Update) bool { return u.ContainerID == o.container.ID })
	}
	all := own
	inFlight := l.inFlightIDs(o.container.ID)
	if len(l.pending) > 0 || len(inFlight) > 0 {
		// A new slice: the decision keeps its own.
		all = append(make([]policy.Update, 0, len(own)+len(l.pending)+len(inFlight)), own...)
		inReply := make(map[string]bool, cap(all)+1)
		inReply[o.container.ID] = true
		for _, u := range own {
			inReply[u.ContainerID] = true
		}
		for _, u := range l.pendingUpdates(desired) {
			if !inReply[u.ContainerID] {
				all = append(all, u)
				inReply[u.ContainerID] = true
			}
		}
		// An unsolicited update in flight lands when containerd next gets
		// its NRI lock, which may be after it has acted on this reply: a
		// container it shrinks (a pod's admission takes CPUs from the
		// shared pool) may still run on CPUs this reply hands out. The
		// reply shrinks it first; whatever the update carries it may land
		// after, as it never carries a CPU handed out since (its CPUs are
		// lent: Model.Lending).
		if len(inFlight) > 0 {
			updates, _ := desired(inFlight)
			for _, u := range l.shrinksFirst(updates) {
				if !inReply[u.ContainerID] {
					all = append(all, u)
				}
			}
		}
	}
	for _, u := range all {
		l.handed(u, handedInReply)
	}
	return all
}

// inFlightIDs returns the containers an unsolicited update in flight
// carries, but except, sorted.
func (l *ledger) inFlightIDs(except string) []string {
	if l.sendDone == nil {
		return nil
	}
	var ids []string
	for id, v := range l.views {
		if v.inFlight && id != except {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// pendingUpdates returns the updates of the pending containers that still
// run, those that only lose CPUs first; the others are no longer pending.
func (l *ledger) pendingUpdates(desired desiredFunc) []policy.Update {
	updates, gone := desired(l.pendingIDs())
	l.dropPending(gone...)
	return l.shrinksFirst(updates)
}

// shrinksFirst orders updates as the runtime should apply them: those that
// only take CPUs away from what the container runs on first, then the
// others, each group in the given order.
func (l *ledger) shrinksFirst(updates []policy.Update) []policy.Update {
	// The shrinks fill the slice from the front, the others from the
	// back (reversed after): each update is judged once.
	ordered := make([]policy.Update, len(updates))
	front, back := 0, len(updates)
	for _, u := range updates {
		if v := l.views[u.ContainerID]; v != nil && v.known && u.CPUs.IsSubsetOf(v.applied) {
			ordered[front] = u
			front++
		} else {
			back--
			ordered[back] = u
		}
	}
	slices.Reverse(ordered[front:])
	return ordered
}

// sent is an update handed in an unsolicited update, with what the ledger
// believed of its container before.
type sent struct {
	u          policy.Update
	generation uint64
	before     cpumask.Mask
	known      bool
}

// startSend records updates as handed in an unsolicited update in flight,
// no longer pending, and returns what finishSend needs.
func (l *ledger) startSend(updates []policy.Update) []sent {
	out := make([]sent, 0, len(updates))
	for _, u := range updates {
		v := l.view(u.ContainerID)
		before, known := v.applied, v.known
		v.hand(u.CPUs, handedUnsolicited, l.seq)
		out = append(out, sent{u: u, generation: v.generation, before: before, known: known})
		delete(l.pending, u.ContainerID) // marked again if it changes meanwhile
	}
	l.sendDone = make(chan struct{})
	return out
}

// finishSend records the outcome of an unsolicited update: failed names
// the containers the runtime did not update, err a failure of the whole
// call. tracked tells the containers still tracked. It returns the
// containers whose update is due again.
func (l *ledger) finishSend(batch []sent, failed map[string]bool, err error, tracked func(id string) bool) (again []string) {
	close(l.sendDone)
	l.sendDone = nil
	for _, s := range batch {
		id := s.u.ContainerID
		v := l.views[id]
		if v == nil || !tracked(id) {
			continue // removed meanwhile
		}
		v.inFlight = false
		switch {
		case err != nil || failed[id]:
			// Not applied: it runs on what it ran on, and the update is
			// due again.
			if v.generation == s.generation {
				v.unhand(s.before, s.known)
			}
			again = append(again, id)
		case v.generation == s.generation:
			v.confirm()
		case !v.applied.Equal(s.u.CPUs):
			// A reply changed the container while the update was in
			// flight, and which landed last is unknown: send what the
			// model wants once more. (Both are safe: the lent CPUs were
			// handed to nobody.)
			again = append(again, id)
		}
	}
	return again
}

// resync forgets what the ledger believed of every container before a
// Synchronize, which tells it again (synced), and everything pending: the
// Synchronize's reply sends every container what it should run on.
func (l *ledger) resync() {
	for _, v := range l.views {
		v.setCgroupPath("")
		v.forget()
	}
	l.clearPending()
}

// synced records a container as the runtime reports it at Synchronize:
// its cgroups path, whether it started (one created but not started yet
// gets the cpuset of its spec unless an update is sent again once it
// started) and, unless it exited, the cpuset it runs on.
func (l *ledger) synced(id, cgroupPath string, started, exited bool, cpus cpumask.Mask) {
	v := l.view(id)
	v.setCgroupPath(cgroupPath)
	v.synchronized(started, cpus)
	if !exited {
		v.set(cpus)
	}
}

// stopped records that nothing runs in a container any more: a send in
// flight must not record otherwise.
func (l *ledger) stopped(id string) {
	if v := l.views[id]; v != nil {
		v.forget()
	}
}

// forgetNotIn drops the records of containers tracked tells are gone.
func (l *ledger) forgetNotIn(tracked func(id string) bool) {
	maps.DeleteFunc(l.views, func(id string, _ *runtimeView) bool { return !tracked(id) })
	maps.DeleteFunc(l.pending, func(id string, _ bool) bool { return !tracked(id) })
}

// appliedTo returns what the ledger believes container id runs on (empty
// when unknown).
func (l *ledger) appliedTo(id string) cpumask.Mask {
	if v := l.views[id]; v != nil && v.known {
		return v.applied
	}
	return nil
}

// probe is a container whose cgroup a verification reads, with what the
// ledger believed when the read began.
type probe struct {
	// file is the container's cpuset file, unless fileErr.
	id, file                  string
	fileErr                   error
	generation, confirmations uint64
}

// probes returns the containers of ids a verification reads: all of them
// with a known cgroup (the periodic pass), or after an event those handed
// an update since they were last read, those marked due, and those
// mustRead names (an unconfirmed shrink), in dst's array, with their
// cpuset files in hierarchy. It also returns the number of events
// delivered so far.
func (l *ledger) probes(dst []probe, hierarchy string, ids []string, all bool, mustRead func(id string) bool) ([]probe, uint64) {
	probes := dst[:0]
	for _, id := range ids {
		v := l.views[id]
		if v == nil || v.cgroupPath == "" {
			continue
		}
		if !all && !mustRead(id) && !v.due && v.checked == v.generation {
			continue
		}
		file, err := v.cpusetFile(hierarchy)
		probes = append(probes, probe{id: id, file: file, fileErr: err, generation: v.generation, confirmations: v.confirmations})
	}
	return probes, l.seq
}

// readOutcome is what the ledger makes of one cgroup read.
type readOutcome int

const (
	// readIgnored: the belief changed since the read began; nothing to
	// judge.
	readIgnored readOutcome = iota
	// readAgain: the read may predate an update that lands meanwhile;
	// read the container again later.
	readAgain
	// readConsistent: it runs on what it was handed last.
	readConsistent
	// readDrifted: it runs on something else for good; the belief now
	// says what it runs on, and its cpuset must be sent again (the caller
	// makes it pending).
	readDrifted
)

// judgeRead judges a read of probe pr's cgroup (see runtimeView.judge):
// seq is the number of events delivered when the reads began, periodic
// tells the periodic pass.
func (l *ledger) judgeRead(pr probe, cpus cpumask.Mask, seq uint64, periodic bool) readOutcome {
	v := l.views[pr.id]
	if v == nil || v.generation != pr.generation {
		return readIgnored
	}
	v.checked, v.due = pr.generation, false
	if cpus.IsEmpty() && !v.started {
		// cgroup v2 creates a cgroup with an empty cpuset.cpus (it runs
		// on its parent's CPUs) and runc writes the container's a moment
		// later, before it starts it: nothing applied yet, no drift. Once
		// the container started, an empty cpuset.cpus was cleared by
		// someone else, and that is drift.
		v.due = true
		return readAgain
	}
	if v.inFlight || v.confirmations != pr.confirmations {
		// An unsolicited update may land any moment, or the runtime
		// confirmed an update since the read began: read again.
		v.due = true
		return readAgain
	}
	switch v.judge(cpus, seq, periodic) {
	case readStale:
		v.due = true
		return readAgain
	case readDrift:
		v.set(cpus)
		v.checked = v.generation
		return readDrifted
	}
	return readConsistent
}
