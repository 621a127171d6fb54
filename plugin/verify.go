package plugin

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// requestVerify asks the verifier for a pass without blocking.
func (p *Plugin) requestVerify() {
	select {
	case p.verifyKick <- struct{}{}:
	default:
	}
}

// maintainLoop compares containers' real cpusets with what the plugin
// believes the runtime applied, after events and every VerifyInterval
// (when the cgroups can be read), and returns CPUs held for pods longer
// than the hold timeout to the shared pool.
func (p *Plugin) maintainLoop(ctx context.Context) {
	var tick <-chan time.Time
	verifying := p.cgroups.enabled() && p.handing() // (observing, nothing was handed)
	if p.opts.VerifyInterval > 0 && verifying {
		t := time.NewTicker(p.opts.VerifyInterval)
		defer t.Stop()
		tick = t.C
	}
	holds := time.NewTicker(p.opts.MaintainInterval)
	defer holds.Stop()
	delays := time.NewTicker(min(delayCheckInterval, p.opts.MaintainInterval))
	defer delays.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.verifyKick:
			if verifying {
				p.verify(false)
			}
		case <-tick:
			p.verify(true)
		case <-holds.C:
			p.settleHoldsWithSpec()
			p.expireHolds()
			p.expireOrphans()
			p.applyPending()
		case <-delays.C:
			if p.releaseDelayed() {
				p.applyPending()
			}
		}
	}
}

// delayCheckInterval is how often the scale-down delays are checked (or
// MaintainInterval when shorter): a container shrinks at most that long
// after its delay is over.
const delayCheckInterval = time.Second

// releaseDelayed shrinks the containers whose scale-down delay is over
// (their update goes out as an unsolicited one; the CPUs they give up join
// the shared pool once it is applied). It reports whether any did.
func (p *Plugin) releaseDelayed() bool {
	return p.maintain("scaleDownDelay", logrus.InfoLevel, p.policy.ReleaseDelayed)
}

// expireOrphans gives back the CPUs of pods that have been idle for the
// orphan timeout (policy.ExpireOrphans), but those the Kubernetes API
// says are active.
func (p *Plugin) expireOrphans() {
	var active func(string) bool
	if p.opts.API != nil {
		active = p.opts.API.PodActive
	}
	p.maintain("orphanTimeout", logrus.WarnLevel, func(m *policy.Model) policy.Decision { return p.policy.ExpireOrphans(m, active) })
}

// expireHolds returns the CPUs held for pods longer than the hold timeout
// to the shared pool, and sends the shared containers their growth.
func (p *Plugin) expireHolds() {
	p.maintain("holdTimeout", logrus.WarnLevel, p.policy.ExpireHolds)
}

// settleHoldsWithSpec catches up, with a pod's spec from the Kubernetes
// API's cache at the pod's recorded total, the resize of a pod that holds
// CPUs for it (policy.SettleWithSpec) when its last UpdatePodSandbox was
// decided on the totals alone, the API's view lagging behind the
// runtime. One pod per pass.
func (p *Plugin) settleHoldsWithSpec() {
	if p.opts.API == nil {
		return
	}
	p.maintain("holdSettled", logrus.InfoLevel, func(m *policy.Model) policy.Decision {
		for uid := range p.specLagged {
			if _, held := m.State.Hold(uid); !held {
				delete(p.specLagged, uid) // settled, expired or gone
				continue
			}
			pod, ok := p.podOfUID(uid)
			if !ok {
				continue
			}
			res, known := m.PodResources(pod)
			if !known {
				continue
			}
			spec, ok := p.opts.API.PodSpec(uid, policy.CPULimitMilli(res), 0)
			if !ok {
				continue
			}
			delete(p.specLagged, uid) // the spec is there: once
			if d := p.policy.SettleWithSpec(m, pod, spec); d.Model != m {
				return d
			}
		}
		return policy.Decision{Model: m}
	})
}

// podOfUID returns the pod of a UID as its sandbox's events named it.
// mu must be held.
func (p *Plugin) podOfUID(uid string) (policy.Pod, bool) {
	for _, pod := range p.pods {
		if pod.UID == uid {
			return pod, true
		}
	}
	return policy.Pod{}, false
}

// maintain runs a decision of the maintenance loop under the plugin's
// lock: it commits its model (whatever the disk says: the runtime has
// nothing to refuse), logs its notes at level and makes its updates
// pending for the sender. It reports whether the decision changed
// anything.
func (p *Plugin) maintain(what string, level logrus.Level, decide func(*policy.Model) policy.Decision) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := decide(p.model)
	if d.Model == p.model {
		return false
	}
	for _, n := range d.Notes {
		p.log.WithField("event", what).Log(level, n)
	}
	p.commitOrKeep(d.Model)
	p.markPending(d.Updates())
	return true
}

// verify reads running containers' cpusets: all of them (the periodic
// pass), or after an event those the plugin handed an update since they
// were last read and those marked due. A read is judged against what the
// runtime has applied (runtimeView.judge): a cpuset handed earlier whose
// replacement may not have landed yet is read again later; only a cpuset
// the plugin did not hand, or an earlier one that stays after its
// replacement has surely landed, is drift: the belief is corrected and the
// container made pending for the sender. The target of an unconfirmed
// shrink that is seen shrunk is confirmed. A container whose cgroup does
// not exist yet (created, not started), or whose cgroup v2 cpuset.cpus runc
// has not written yet (empty before the start), is skipped silently.
func (p *Plugin) verify(all bool) {
	p.verifyPass(all)
	if p.opts.OnVerified != nil {
		p.opts.OnVerified()
	}
}

// verifyPass is verify's pass, with the verifier's buffers.
func (p *Plugin) verifyPass(all bool) {
	p.verifierMu.Lock()
	defer p.verifierMu.Unlock()
	v := &p.verifier
	hierarchy := filepath.Clean(p.cgroups.cpusetRoot())
	var seq uint64
	v.probes, seq = p.probes(v.probes, hierarchy, all)
	p.judgeReads(v.probes, p.readCgroups(v, v.probes), seq, all)
}

// verifier is what a verification pass reuses from the last one: its
// reader's buffer, its probes, and the maps of what it read (cleared).
// Passes run one at a time (Plugin.verifierMu); after a reply that updated
// every shared container, a pass reads all of them, and new slices and
// maps for each made a large part of the plugin's garbage.
type verifier struct {
	reader cpusReader
	probes []probe
	// actual maps a container to the cpuset read; parsed maps a text read
	// to its cpuset (each distinct text is parsed once).
	actual, parsed map[string]cpumask.Mask
}

// probes returns the containers a verification reads (ledger.probes) in
// dst's array, their cpuset files in hierarchy (clean), and the number of
// events delivered so far.
func (p *Plugin) probes(dst []probe, hierarchy string, all bool) ([]probe, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := p.model.SortedContainerIDs() // a new slice: filtered in place
	running := ids[:0]
	for _, id := range ids {
		if !p.model.Containers.Get(id).Stopped {
			running = append(running, id)
		}
	}
	return p.ledger.probes(dst, hierarchy, running, all, func(id string) bool {
		_, releasing := p.model.Releasing[id]
		return releasing
	})
}

// readCgroups reads the probes' cpusets with v's reader and maps, without
// the plugin's lock. The shared containers' files all hold the shared
// pool: each distinct text is parsed once (a pool of thousands of CPUs is
// a big set). The map it returns is v's, until v's next pass.
func (p *Plugin) readCgroups(v *verifier, probes []probe) map[string]cpumask.Mask {
	if v.actual == nil {
		v.actual, v.parsed = map[string]cpumask.Mask{}, map[string]cpumask.Mask{}
	}
	clear(v.actual)
	clear(v.parsed)
	for _, pr := range probes {
		if pr.fileErr != nil {
			p.log.WithError(pr.fileErr).WithField("id", pr.id).Warn("cannot read the container's cpuset from its cgroup")
			continue
		}
		text, err := v.reader.read(pr.file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Not started yet (runc creates the cgroup at start), or gone.
			continue
		case err != nil:
			p.log.WithError(err).WithField("id", pr.id).Warn("cannot read the container's cpuset from its cgroup")
			continue
		}
		cpus, ok := v.parsed[string(text)]
		if !ok {
			set, err := parseCgroupCPUs(string(text), pr.file, p.limits.maxCPU)
			if err != nil {
				p.log.WithError(err).WithField("id", pr.id).Warn("cannot parse the container's cgroup cpuset")
				continue
			}
			cpus = maskOf(set)
			v.parsed[string(text)] = cpus
		}
		v.actual[pr.id] = cpus
	}
	return v.actual
}

// judgeReads judges what was read (ledger.judgeRead): seq is the number
// of events delivered when the reads began, periodic tells the periodic
// pass. A container seen on the smaller cpuset of an unconfirmed shrink
// confirms it; one that drifted is sent its cpuset again.
func (p *Plugin) judgeReads(probes []probe, actual map[string]cpumask.Mask, seq uint64, periodic bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range probes {
		cpus, ok := actual[pr.id]
		if t := p.model.Containers.Get(pr.id); !ok || t == nil || t.Stopped {
			continue
		}
		believed := p.ledger.appliedTo(pr.id)
		outcome := p.ledger.judgeRead(pr, cpus, seq, periodic)
		if outcome == readIgnored {
			continue
		}
		if _, releasing := p.model.Releasing[pr.id]; releasing && cpus.Equal(maskOf(p.model.CPUsOf(pr.id))) {
			p.confirm(pr.id)
		}
		if outcome == readDrifted {
			p.log.WithFields(logrus.Fields{"id": pr.id, "believed": believed.String(), "actual": cpus.String()}).
				Warn("container cpuset differs from what the runtime was given; re-sending")
			p.metrics.drift()
			p.setPending(pr.id)
		}
	}
}
