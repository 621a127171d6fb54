package plugin

import (
	"context"
	"errors"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"os"
	"time"

	"k8s.io/utils/cpuset"
)

// requestVerify asks the verifier for a pass without blocking.
func (p *Plugin) requestVerify() {
	select {
	case p.verifyKick <- struct{}{}:
	default:
	}
}

// verifyLoop compares containers' real cpusets with what the plugin
// believes the runtime applied, after events and every VerifyInterval.
func (p *Plugin) verifyLoop(ctx context.Context) {
	if !p.cgroups.enabled() {
		return
	}
	var tick <-chan time.Time
	if p.opts.VerifyInterval > 0 {
		t := time.NewTicker(p.opts.VerifyInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.verifyKick:
			p.verify(false)
		case <-tick:
			p.verify(true)
		}
	}
}

// verify reads running containers' cpusets: all of them (the periodic
// pass), or after an event only those the plugin sent an update to since
// they were last read. A container whose real cpuset differs from the
// belief gets its belief corrected, which makes it pending for the sender;
// the target of an unconfirmed shrink that is seen shrunk is confirmed.
func (p *Plugin) verify(all bool) {
	type probe struct {
		id, path   string
		generation uint64
	}
	p.mu.Lock()
	var probes []probe
	for _, id := range p.model.SortedContainerIDs() {
		v := p.ctrs[id]
		if t := p.model.Containers[id]; t.Stopped || v == nil || v.cgroupPath == "" {
			continue
		}
		if _, releasing := p.model.Releasing[id]; !all && !releasing && !v.due && v.checked == v.generation {
			continue
		}
		probes = append(probes, probe{id: id, path: v.cgroupPath, generation: v.generation})
	}
	p.mu.Unlock()

	actual := make(map[string]cpuset.CPUSet, len(probes))
	for _, pr := range probes {
		cpus, err := p.cgroups.cpus(pr.path)
		if err != nil {
			// A container's cgroup exists only once it started: not worth a line.
			if entry := p.log.WithError(err).WithField("id", pr.id); errors.Is(err, os.ErrNotExist) {
				entry.Trace("cannot verify container cpuset")
			} else {
				entry.Debug("cannot verify container cpuset")
			}
			continue
		}
		actual[pr.id] = cpus
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	drifted := false
	for _, pr := range probes {
		cpus, ok := actual[pr.id]
		t, v := p.model.Containers[pr.id], p.ctrs[pr.id]
		if !ok || t == nil || t.Stopped || v == nil || v.generation != pr.generation {
			continue
		}
		v.checked, v.due = pr.generation, false
		if _, releasing := p.model.Releasing[pr.id]; releasing && cpumask.Equal(cpus, p.model.CPUsOf(pr.id)) {
			p.confirm(pr.id)
		}
		if applied := p.appliedTo(pr.id); !cpumask.Equal(applied, cpus) {
			p.log.WithFields(map[string]any{"id": pr.id, "believed": applied.String(), "actual": cpus.String()}).
				Warn("container cpuset differs from the last update; re-sending")
			p.metrics.drift()
			p.setApplied(pr.id, cpus)
			v.checked = v.generation
			p.pending[pr.id] = true
			drifted = true
		}
	}
	if drifted {
		p.kickSender()
	}
}
