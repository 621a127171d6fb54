package plugin

import (
	"slices"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// runtimeView is what the plugin knows of a container's runtime side: the
// cpuset it handed to the runtime last, and the cpusets the runtime may
// still show until that one is known to be applied. containerd applies a
// reply after the handler returned (the updates of other containers before
// it delivers the next event, a resize's target and a new container's
// cpuset outside its NRI lock) and an unsolicited update whenever it gets
// its lock, so a cgroup read in between shows an older cpuset: that is no
// drift. The cpusets are bitmaps, compared word by word (a shared pool of
// thousands of CPUs is a few dozen words), never changed once handed: the
// shared containers' updates share the pool's.
type runtimeView struct {
	// cgroupPath is the container's cgroups path, for verification, and
	// file its cpuset file in the hierarchy fileIn (or fileErr), found
	// once (cpusetFile).
	cgroupPath, file, fileIn string
	fileErr                  error
	// applied is the cpuset last handed to the runtime (when known is
	// set): what the container runs on once everything sent has landed.
	applied cpumask.Mask
	known   bool
	// transit are the cpusets the runtime may still show until applied is
	// confirmed: what the container ran on before, and what an unsolicited
	// update that raced with a reply carried. Empty once confirmed.
	transit []cpumask.Mask
	// bySeq says that applied came with the reply of event sentSeq and is
	// applied once the runtime delivers a later event (it applies a
	// reply's updates of other containers before it takes the next event).
	// A resize's target is confirmed by PostUpdateContainer instead, an
	// unsolicited update by its return, a new container's cpuset by a read.
	bySeq   bool
	sentSeq uint64
	// inFlight is set while an unsolicited update carrying the container
	// is in flight: a reply meanwhile is not confirmed by a later event
	// (the update may land after it).
	inFlight bool
	// staleReads counts the periodic reads in a row that found a cpuset of
	// transit: after two, the update is taken as lost.
	staleReads int
	// generation counts the changes of applied, so that a verification or
	// a send that raced with a reply does not overwrite it.
	generation uint64
	// confirmations counts the confirmations that did not come from a
	// read: a read taken before one of them may predate what it confirms.
	confirmations uint64
	// checked is the generation of applied the cgroup was last read at:
	// after an event only containers sent an update since are read again,
	// and those marked due.
	checked uint64
	due     bool
	// started says the runtime started the container (PostStartContainer,
	// or running at Synchronize). containerd applies an update of a
	// container that is not running yet to its spec only, which the task
	// being started may have read already: spec is the cpuset the
	// container was created with, kept until it starts (a shared one is a
	// pool of thousands of CPUs: not kept any longer), and
	// handedBeforeStart says a cpuset was handed since, before the start;
	// PostStartContainer sends it again.
	started           bool
	handedBeforeStart bool
	spec              cpumask.Mask
}

// maxTransit bounds runtimeView.transit.
const maxTransit = 3

// handKind says how a cpuset handed to the runtime is confirmed applied.
type handKind int

const (
	// handedInReply: an update of another container in an event's reply.
	handedInReply handKind = iota
	// handedAsTarget: a resize's target.
	handedAsTarget
	// handedInSpec: a new container's cpuset, in its OCI spec.
	handedInSpec
	// handedUnsolicited: an unsolicited update, confirmed by its return.
	handedUnsolicited
)

// setCgroupPath records the container's cgroups path ("" when unknown).
func (v *runtimeView) setCgroupPath(path string) {
	v.cgroupPath, v.file, v.fileIn, v.fileErr = path, "", "", nil
}

// cpusetFile returns the container's cpuset file in hierarchy, found once
// (a path built anew at every read cost a verification pass more than
// its reads).
func (v *runtimeView) cpusetFile(hierarchy string) (string, error) {
	if v.fileIn != hierarchy { // "" after setCgroupPath: never a hierarchy (a clean path)
		v.file, v.fileErr = cpusetFile(hierarchy, v.cgroupPath)
		v.fileIn = hierarchy
	}
	return v.file, v.fileErr
}

// hand records that cpus were handed to the runtime for the container.
// What it ran on before stays possible until confirmed.
func (v *runtimeView) hand(cpus cpumask.Mask, kind handKind, seq uint64) {
	if v.bySeq && seq > v.sentSeq {
		v.confirm() // the runtime applied it before this event came
	}
	if v.known && !v.applied.Equal(cpus) {
		v.addTransit(v.applied)
	}
	if kind == handedInSpec {
		v.spec, v.started = cpus, false
	} else if !v.started {
		v.handedBeforeStart = true
	}
	v.applied, v.known = cpus, true
	v.bySeq = kind == handedInReply && !v.inFlight
	v.sentSeq = seq
	v.inFlight = v.inFlight || kind == handedUnsolicited
	v.generation++
}

// unhand records that an unsolicited update was not applied: the
// container runs on what it ran on before.
func (v *runtimeView) unhand(before cpumask.Mask, known bool) {
	v.applied, v.known = before, known
	v.generation++
}

// synchronized records the runtime's view of the container at Synchronize:
// whether it started, and else the cpuset its spec holds.
func (v *runtimeView) synchronized(started bool, spec cpumask.Mask) {
	v.started, v.handedBeforeStart, v.spec = started, false, nil
	if !started {
		v.spec = spec
	}
}

// addTransit records that the runtime may still show cpus.
func (v *runtimeView) addTransit(cpus cpumask.Mask) {
	if slices.ContainsFunc(v.transit, cpus.Equal) {
		return
	}
	if len(v.transit) == maxTransit {
		// Never more than a reply and an unsolicited update are in
		// flight; a longer list is a belief gone stale: keep it short.
		v.transit = slices.Delete(v.transit, 0, 1)
	}
	v.transit = append(v.transit, cpus)
}

// start records that the runtime started the container, and tells whether
// the cpuset handed last must be sent again: it was handed before the
// start, so the container may run on the one it was created with (which
// a read may show until the new send is confirmed).
func (v *runtimeView) start() (resend bool) {
	spec := v.spec
	v.started, v.spec = true, nil
	if !v.handedBeforeStart {
		return false
	}
	v.handedBeforeStart = false
	if !v.known {
		return false
	}
	if !spec.IsEmpty() && !spec.Equal(v.applied) {
		v.addTransit(spec)
	}
	v.bySeq = false // an event no longer confirms it: the re-send will
	return true
}

// set records what the container runs on, known for sure (the runtime's
// own view at Synchronize, a cgroup read).
func (v *runtimeView) set(cpus cpumask.Mask) {
	v.applied, v.known = cpus, true
	v.settle()
	v.generation++
}

// forget records that nothing runs any more.
func (v *runtimeView) forget() {
	v.known = false
	v.settle()
	v.generation++
}

// confirm records that applied is in effect (the runtime said so).
func (v *runtimeView) confirm() {
	v.settle()
	v.confirmations++
}

// settle forgets what the runtime may still show.
func (v *runtimeView) settle() {
	v.transit, v.bySeq, v.staleReads = nil, false, 0
}

// inTransit tells whether the runtime may still show cpus.
func (v *runtimeView) inTransit(cpus cpumask.Mask) bool {
	return slices.ContainsFunc(v.transit, cpus.Equal)
}

// readVerdict is what a cgroup read tells of a container.
type readVerdict int

const (
	// readMatches: the container runs on what was handed last.
	readMatches readVerdict = iota
	// readStale: it still runs on an earlier cpuset whose replacement may
	// not have landed yet: read it again later.
	readStale
	// readDrift: it runs on a cpuset the plugin did not hand it, or on an
	// earlier one although the later one has surely landed.
	readDrift
)

// judge compares a cgroup read with the belief. seq is the number of
// events delivered when the read started, periodic tells the periodic pass
// (whose reads are far enough apart that a second stale one means a lost
// update).
func (v *runtimeView) judge(cpus cpumask.Mask, seq uint64, periodic bool) readVerdict {
	if v.bySeq && seq > v.sentSeq {
		v.settle()
	}
	switch {
	case v.known && cpus.Equal(v.applied):
		v.settle()
		return readMatches
	case v.inTransit(cpus):
		if periodic {
			v.staleReads++
			if v.staleReads >= 2 {
				return readDrift
			}
		}
		return readStale
	}
	return readDrift
}
