package assemble

import (
	"errors"

	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
)

// Reloader applies a changed configuration file to the running plugin, as
// far as it is safe: the log level at once; inPlaceResize and alignMemory
// at once (they affect later decisions only); reserved CPUs, isolatedCPUs,
// static policy options and the topology manager policy only while no
// container holds exclusive CPUs; everything else at the next restart. A change that cannot
// be applied is logged and not retried until the file changes again.
type Reloader struct {
	log     *logrus.Logger
	plugin  *plugin.Plugin
	topo    *cpuallocator.Topology
	current *config.Config // what is applied
}

// NewReloader returns a reloader for a plugin running with cfg on topo.
func NewReloader(log *logrus.Logger, p *plugin.Plugin, topo *cpuallocator.Topology, cfg *config.Config) *Reloader {
	return &Reloader{log: log, plugin: p, topo: topo, current: cfg}
}

// Applied returns the configuration the plugin runs with.
func (r *Reloader) Applied() *config.Config { return r.current }

// Apply applies what it safely can of a new configuration.
func (r *Reloader) Apply(next *config.Config) {
	ch := config.Diff(r.current, next)
	r.log.WithField("changes", ch.String()).Info("configuration file changed")
	if len(ch.Restart) > 0 {
		r.log.WithField("keys", ch.Restart).Warn("these keys take effect only when the plugin restarts")
	}
	applied := *r.current
	applied.LogLevel = next.LogLevel
	r.log.SetLevel(applied.LogLevel)

	live := applied
	live.InPlaceResize, live.AlignMemory = next.InPlaceResize, next.AlignMemory
	full := live
	full.ReservedSystemCPUs, full.ReservedCPUCount = next.ReservedSystemCPUs, next.ReservedCPUCount
	full.IsolatedCPUs = next.IsolatedCPUs
	full.CPUManagerPolicyOptions = next.CPUManagerPolicyOptions
	full.TopologyManagerPolicy = next.TopologyManagerPolicy
	full.TopologyManagerScope = next.TopologyManagerScope
	full.TopologyManagerPolicyOptions = next.TopologyManagerPolicyOptions

	switch {
	case len(ch.WithoutExclusive) > 0:
		err := r.reconfigure(&full, true)
		var busy *plugin.ErrExclusiveContainers
		if err == nil {
			applied = full
			break
		}
		if errors.As(err, &busy) {
			r.log.WithField("keys", ch.WithoutExclusive).WithError(err).Warn("not applying these keys now")
		} else {
			r.log.WithError(err).Error("new configuration rejected; keeping the running one")
		}
		if r.reconfigure(&live, false) == nil {
			applied = live
		}
	case live.InPlaceResize != r.current.InPlaceResize || live.AlignMemory != r.current.AlignMemory:
		if err := r.reconfigure(&live, false); err != nil {
			r.log.WithError(err).Error("new configuration rejected; keeping the running one")
		} else {
			applied = live
		}
	}
	r.current = &applied
}

// reconfigure builds the policy of cfg and hands it to the plugin.
func (r *Reloader) reconfigure(cfg *config.Config, onlyWithoutExclusive bool) error {
	pol, err := Policy(cfg, r.topo)
	if err != nil {
		return err
	}
	return r.plugin.Reconfigure(pol, onlyWithoutExclusive)
}
