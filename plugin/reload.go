package plugin

import (
	"fmt"
	"maps"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// A configuration decides which CPUs may be exclusive (the reservation)
// and how they are placed. One that would put a pinned container on a CPU
// it reserves, or on one that is not allocatable, is never applied behind
// the operator's back — not by a reload, not at a restart: the plugin runs
// on the configuration the assignments were made under (the checkpoint
// records it) and applies the new one, live, once no pinned container is
// in its way. nri_cpumanager_config_pending says one is waiting.

// ErrPending is Reconfigure's error when the configuration waits for
// pinned containers to leave the CPUs it reserves.
type ErrPending struct {
	// CPUs are the pinned CPUs the configuration does not allow.
	CPUs cpuset.CPUSet
}

func (e *ErrPending) Error() string {
	return fmt.Sprintf("pinned containers hold CPUs %s that the new configuration reserves or cannot allocate; it waits until they are free, the running one stays", e.CPUs)
}

// pendingConfig is a configuration waiting for pinned containers.
type pendingConfig struct {
	policy *policy.Policy
	record state.ConfigRecord
}

// Reconfigure switches to a policy built from another configuration
// (record says which, for the checkpoint), with the shared pool
// recomputed and the shared containers following it. When pinned
// containers hold CPUs the policy does not allow, it waits (*ErrPending):
// the plugin applies it once they are free.
func (p *Plugin) Reconfigure(pol *policy.Policy, record state.ConfigRecord) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if inWay := p.inTheWay(pol); !inWay.IsEmpty() {
		p.setPendingConfig(&pendingConfig{policy: pol, record: record})
		return &ErrPending{CPUs: inWay}
	}
	p.setPendingConfig(nil)
	return p.switchPolicy(pol, record)
}

// SwitchLive switches to a policy that differs from the running one only
// in keys that apply at once (inPlaceResize, alignMemory), whatever
// waits for pinned containers: that keeps waiting.
func (p *Plugin) SwitchLive(pol *policy.Policy, record state.ConfigRecord) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.switchPolicy(pol, record)
}

// ConfigPending reports whether a configuration waits for pinned
// containers.
func (p *Plugin) ConfigPending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pendingConfig != nil
}

// inTheWay returns the pinned CPUs (exclusive, or held for a pod) that
// pol does not allow to be exclusive.
func (p *Plugin) inTheWay(pol *policy.Policy) cpuset.CPUSet {
	pinned := p.model.State.ExclusiveCPUs()
	for _, h := range p.model.State.Holds() {
		pinned = pinned.Union(h.CPUs)
	}
	return pinned.Difference(pol.Allocatable())
}

// switchPolicy makes pol the policy: the shared pool recomputed, the
// configuration recorded in the checkpoint. Called with mu held.
func (p *Plugin) switchPolicy(pol *policy.Policy, record state.ConfigRecord) error {
	d := pol.Rebase(p.model)
	d.Model.State.SetConfigRecord(record)
	if err := p.commit(d.Model); err != nil {
		return err
	}
	p.policy, p.record = pol, record
	p.metrics.setPolicy(pol)
	p.markPending(d.Others)
	return nil
}

// setPendingConfig records the configuration waiting (nil: none).
func (p *Plugin) setPendingConfig(c *pendingConfig) {
	p.pendingConfig = c
	p.metrics.setConfigPending(c != nil)
}

// applyPending applies the configuration waiting for pinned containers
// once none is in its way.
func (p *Plugin) applyPending() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applyPendingLocked()
}

// applyPendingLocked is applyPending with mu held.
func (p *Plugin) applyPendingLocked() {
	c := p.pendingConfig
	if c == nil || !p.inTheWay(c.policy).IsEmpty() {
		return
	}
	if err := p.switchPolicy(c.policy, c.record); err != nil {
		p.log.WithError(err).Warn("cannot apply the configuration that was waiting; will retry")
		return
	}
	p.setPendingConfig(nil)
	p.log.WithField("reserved", c.policy.Options().Reserved.String()).Info("no pinned container is in the way any more: the new configuration is applied")
}

// startOn decides, at start, which configuration to run on: the one the
// plugin was given, unless pinned containers of the checkpoint hold CPUs
// it does not allow; then the one the checkpoint was made under, and the
// given one waits. It warns when it does.
func (p *Plugin) startOn(pol *policy.Policy, record state.ConfigRecord, recorded func(state.ConfigRecord) (*policy.Policy, error)) {
	p.policy, p.record = pol, record
	was, ok := p.model.State.ConfigRecord()
	if !ok || sameRecord(was, record) {
		return
	}
	inWay := p.inTheWay(pol)
	if inWay.IsEmpty() {
		return
	}
	log := p.log.WithFields(logrus.Fields{"pinnedCPUs": inWay.String(), "recordedReserved": was.ReservedCPUs.String(),
		"reserved": pol.Options().Reserved.String()})
	if recorded == nil {
		log.Warn("pinned containers hold CPUs the configuration reserves or cannot allocate; no way to run on the checkpoint's configuration was given")
		return
	}
	old, err := recorded(was)
	if err != nil {
		log.WithError(err).Warn("pinned containers hold CPUs the configuration reserves; the checkpoint's configuration does not fit this machine, so the new one applies")
		return
	}
	p.policy, p.record = old, was
	p.setPendingConfig(&pendingConfig{policy: pol, record: record})
	log.Warn("pinned containers hold CPUs the configuration reserves or cannot allocate: running on the configuration the checkpoint was made under until they are free (nri_cpumanager_config_pending)")
}

// sameRecord reports whether two configuration records say the same.
func sameRecord(a, b state.ConfigRecord) bool {
	return a.ReservedCPUs.Equals(b.ReservedCPUs) && maps.Equal(a.Keys, b.Keys)
}
