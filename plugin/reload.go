package plugin

import (
	"fmt"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// ErrExclusiveContainers is returned by Reconfigure when a change may only
// be applied while no container holds exclusive CPUs.
type ErrExclusiveContainers struct{ Count int }

func (e *ErrExclusiveContainers) Error() string {
	return fmt.Sprintf("%d containers hold exclusive CPUs; reserved CPUs, isolatedCPUs, CPU manager and topology manager options can only change while none does", e.Count)
}

// Reconfigure switches to a policy built from a reloaded configuration.
// onlyWithoutExclusive says that the change touches settings that are safe
// to change only while no container holds exclusive CPUs (reserved CPUs,
// isolatedCPUs, static policy options, topology manager policy): it is then refused with
// *ErrExclusiveContainers if any does. The shared pool is recomputed and
// the shared containers follow it.
func (p *Plugin) Reconfigure(pol *policy.Policy, onlyWithoutExclusive bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.model.State.NumAssignments(); onlyWithoutExclusive && n > 0 {
		return &ErrExclusiveContainers{Count: n}
	}
	d := pol.Rebase(p.model)
	if err := p.commit(d.Model); err != nil {
		return err
	}
	p.policy = pol
	p.metrics.setPolicy(pol)
	p.markPending(d.Others)
	return nil
}
