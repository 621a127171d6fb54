package plugin

import (
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The kubelet retries a refused resize about once a second for as long as
// the pod's spec asks for it (and a refused creation with a backoff): a
// refusal is logged as a warning, and counted in refusals_total, once per
// refusalWindow; its repeats in between are logged at debug.
const (
	refusalWindow = 5 * time.Minute
	// maxRefusals bounds the refusals remembered: past it the expired ones
	// are forgotten, then the oldest.
	maxRefusals = 1024
)

// refusalKey identifies a refusal as the kubelet repeats it: the same
// request (event, pod, container, requested resources) refused for the
// same reason and verdict.
type refusalKey struct {
	event     string
	podUID    string
	container string // "" for a pod-level request
	requested policy.PodResources
	reason    policy.Reason
	verdict   policy.Verdict
}

// refusalLog remembers when each distinct refusal was last warned about.
// Not safe for concurrent use: the plugin's lock guards it.
type refusalLog struct {
	warned map[refusalKey]time.Time
	now    func() time.Time
}

func newRefusalLog() *refusalLog {
	return &refusalLog{warned: map[refusalKey]time.Time{}, now: time.Now}
}

// first reports whether k deserves a warning: it was not warned about in
// the last refusalWindow. It then counts as warned about now.
func (l *refusalLog) first(k refusalKey) bool {
	now := l.now()
	if at, ok := l.warned[k]; ok && now.Sub(at) < refusalWindow {
		return false
	}
	if _, ok := l.warned[k]; !ok && len(l.warned) >= maxRefusals {
		l.evict(now)
	}
	l.warned[k] = now
	return true
}

// evict forgets the expired refusals, or the oldest one if none expired.
func (l *refusalLog) evict(now time.Time) {
	var oldest refusalKey
	var oldestAt time.Time
	for k, at := range l.warned {
		if now.Sub(at) >= refusalWindow {
			delete(l.warned, k)
			continue
		}
		if oldestAt.IsZero() || at.Before(oldestAt) {
			oldest, oldestAt = k, at
		}
	}
	if len(l.warned) >= maxRefusals {
		delete(l.warned, oldest)
	}
}

// forget drops the refusals of a pod's container (container "" for the
// pod's own), once a request for it was accepted: a later refusal is news
// again.
func (l *refusalLog) forget(podUID, container string) {
	for k := range l.warned {
		if k.podUID == podUID && k.container == container {
			delete(l.warned, k)
		}
	}
}
