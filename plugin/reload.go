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
	return pinnedCPUs(p.model.State).Difference(pol.Allocatable())
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
	p.markPending(d.Updates())
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

// startOn decides, at start (st is the checkpoint's state, or the
// kubelet's imported), which configuration to run on: the one the plugin
// was given, unless pinned containers of st hold CPUs it does not allow;
// then the one st was made under, or, when st recorded none, the given
// one with those CPUs released from its reservation; and the given one
// waits. It warns when it does.
func (p *Plugin) startOn(st *state.State) {
	was, recorded := st.ConfigRecord()
	if recorded && sameRecord(was, p.record) {
		return
	}
	pinned := pinnedCPUs(st)
	inWay := pinned.Difference(p.policy.Allocatable())
	if inWay.IsEmpty() {
		return
	}
	log := p.log.WithFields(logrus.Fields{"pinnedCPUs": inWay.String(), "reserved": p.policy.Options().Reserved.String()})
	var old *policy.Policy
	var err error
	switch {
	case recorded && p.opts.RecordedPolicy != nil:
		log = log.WithField("recordedReserved", was.ReservedCPUs.String())
		old, err = p.opts.RecordedPolicy(was)
	case !recorded && p.opts.ReleasedPolicy != nil:
		old, was, err = p.opts.ReleasedPolicy(inWay)
	default:
		log.Warn("pinned containers hold CPUs the configuration reserves or cannot allocate; no other configuration to run on was given")
		return
	}
	if err == nil && !pinned.IsSubsetOf(old.Allocatable()) {
		err = fmt.Errorf("it does not allow CPUs %s either", pinned.Difference(old.Allocatable()))
	}
	if err != nil {
		log.WithError(err).Warn("pinned containers hold CPUs the configuration reserves; no configuration that allows them fits this machine, so the given one applies")
		return
	}
	p.setPendingConfig(&pendingConfig{policy: p.policy, record: p.record})
	p.policy, p.record = old, was
	if recorded {
		log.Warn("pinned containers hold CPUs the configuration reserves or cannot allocate: running on the configuration the checkpoint was made under until they are free (nri_cpumanager_config_pending)")
	} else {
		log.WithField("runningReserved", old.Options().Reserved.String()).Warn("pinned containers hold CPUs the configuration reserves or cannot allocate, and the checkpoint recorded no configuration: running with those CPUs released from the reservation until they are free (nri_cpumanager_config_pending)")
	}
}

// pinnedCPUs returns the CPUs pinned in st: exclusive, or held for a pod.
func pinnedCPUs(st *state.State) cpuset.CPUSet {
	pinned := st.ExclusiveCPUs()
	for _, h := range st.Holds() {
		pinned = pinned.Union(h.CPUs)
	}
	return pinned
}

// sameRecord reports whether two configuration records say the same.
func sameRecord(a, b state.ConfigRecord) bool {
	return a.ReservedCPUs.Equals(b.ReservedCPUs) && maps.Equal(a.Keys, b.Keys)
}
