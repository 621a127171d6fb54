package assemble

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// Reloader applies a changed configuration file to the running plugin:
// the log level, inPlaceResize and alignMemory at once; the reservation,
// isolatedCPUs and the static and topology manager options once no pinned
// container is in their way (at once when none is: the plugin waits for
// them otherwise, see plugin.Reconfigure); the other keys at the next
// restart. A file is first checked as a start would check it — the
// paths of the keys applied at restart must be usable too — and rejected
// whole when it would not start; the running configuration stays.
type Reloader struct {
	log     *logrus.Logger
	plugin  *plugin.Plugin
	topo    *cpuallocator.Topology
	current *config.Config // what is applied (or waits for pinned containers)
	// pending are the keys applied at a restart that the files set to
	// another value than the plugin runs with.
	pending []string
}

// NewReloader returns a reloader for a plugin running with cfg on topo.
func NewReloader(log *logrus.Logger, p *plugin.Plugin, topo *cpuallocator.Topology, cfg *config.Config) *Reloader {
	return &Reloader{log: log, plugin: p, topo: topo, current: cfg}
}

// Applied returns the configuration the plugin runs with, or waits to.
func (r *Reloader) Applied() *config.Config { return r.current }

// RestartPending returns the keys applied at a restart that the last
// configuration accepted sets to another value than the plugin runs with
// (none before any).
func (r *Reloader) RestartPending() []string { return r.pending }

// Apply applies what it can of a new configuration, and returns why the
// whole file was rejected (nil when it was not).
func (r *Reloader) Apply(next *config.Config) error {
	ch := config.Diff(r.current, next)
	r.log.WithField("changes", ch.String()).Info("configuration file changed")
	if err := Startable(next, ch.Restart); err != nil {
		r.log.WithError(err).Error("new configuration rejected: the plugin could not start with it; keeping the running one")
		return err
	}
	// (Keys applied at restart do not shape the policy: applied's policy
	// is next's.)
	applied := config.Merge(r.current, next)
	pol, err := Policy(applied, r.topo)
	if err != nil {
		err = fmt.Errorf("it does not fit this machine: %w", err)
		r.log.WithError(err).Error("new configuration rejected; keeping the running one")
		return err
	}
	r.log.SetLevel(applied.LogLevel)
	if len(ch.Live) > 0 || len(ch.WithoutExclusive) > 0 {
		err := r.plugin.Reconfigure(pol, Record(applied, pol))
		var pending *plugin.ErrPending
		switch {
		case errors.As(err, &pending):
			r.log.WithField("keys", ch.WithoutExclusive).WithError(err).Warn("the new configuration waits for pinned containers")
			if len(ch.Live) == 0 {
				break
			}
			if err := r.applyLive(next); err != nil {
				r.log.WithError(err).Error("cannot apply the keys that apply at once; keeping the running ones")
				return err
			}
		case err != nil:
			r.log.WithError(err).Error("new configuration rejected; keeping the running one")
			return err
		}
	}
	r.current = applied
	r.setPending(config.Diff(applied, next).Restart, next)
	return nil
}

// setPending records the keys applied at a restart whose values in next
// differ from the running ones, and says which, or that none is left.
func (r *Reloader) setPending(keys []string, next *config.Config) {
	was := len(r.pending) > 0
	r.pending = keys
	if len(keys) == 0 {
		if was {
			r.log.Info("no configuration key waits for a restart any more: the files set the values the plugin runs with")
		}
		return
	}
	values := make([]string, len(keys))
	for i, k := range keys {
		values[i] = fmt.Sprintf("%s: %q (running %q)", k, next.Value(k), r.current.Value(k))
	}
	r.log.WithFields(logrus.Fields{"keys": keys, "values": strings.Join(values, "; ")}).
		Warn("these keys take effect only when the plugin restarts: the plugin runs with the values it started with until its pod is restarted " +
			"(nri_cpumanager_config_restart_pending is 1 meanwhile)")
}

// applyLive applies next's keys that take effect at once, on the running
// configuration's others (which wait for pinned containers).
func (r *Reloader) applyLive(next *config.Config) error {
	live := config.LiveOnly(r.current, next)
	pol, err := Policy(live, r.topo)
	if err != nil {
		return err
	}
	return r.plugin.SwitchLive(pol, Record(live, pol))
}

// Record returns what the checkpoint records of the configuration a
// policy was built from.
func Record(cfg *config.Config, pol *policy.Policy) state.ConfigRecord {
	return state.ConfigRecord{ReservedCPUs: pol.Options().Reserved, Keys: cfg.AllocationKeys()}
}

// RecordedPolicy returns the function that builds, on topo, the policy of
// a configuration the checkpoint recorded: cfg with the recorded keys.
func RecordedPolicy(cfg *config.Config, topo *cpuallocator.Topology) func(state.ConfigRecord) (*policy.Policy, error) {
	return func(rec state.ConfigRecord) (*policy.Policy, error) {
		old, err := cfg.WithKeys(rec.Keys)
		if err != nil {
			return nil, fmt.Errorf("the checkpoint's configuration: %w", err)
		}
		return Policy(old, topo)
	}
}

// ReleasedPolicy returns the function that builds, on topo, the policy
// of cfg with some CPUs no longer reserved, and its record: what the
// plugin runs on while pinned containers of a checkpoint that recorded no
// configuration (the kubelet's, imported) hold CPUs cfg reserves. The
// record is a configuration (cfg with reservedSystemCPUs set), so that a
// restart can run on it again.
func ReleasedPolicy(cfg *config.Config, topo *cpuallocator.Topology) func(cpuset.CPUSet) (*policy.Policy, state.ConfigRecord, error) {
	return func(release cpuset.CPUSet) (*policy.Policy, state.ConfigRecord, error) {
		given, err := Policy(cfg, topo)
		if err != nil {
			return nil, state.ConfigRecord{}, err
		}
		released, err := cfg.WithReservedCPUs(given.Options().Reserved.Difference(release))
		if err != nil {
			return nil, state.ConfigRecord{}, fmt.Errorf("releasing CPUs %s from the reservation: %w", release, err)
		}
		pol, err := Policy(released, topo)
		if err != nil {
			return nil, state.ConfigRecord{}, fmt.Errorf("releasing CPUs %s from the reservation: %w", release, err)
		}
		return pol, Record(released, pol), nil
	}
}

// Startable checks what a reloaded configuration needs to start: the
// state directory exists (in the DaemonSet, a hostPath mount: one that
// does not exist is not mounted, and a start would keep the checkpoint in
// the container, to be lost at the next restart) and can be written, the
// sysfs and cgroup trees and the NRI socket's directory exist, the kubelet
// checkpoint to import (if any) can be read. A reload that would not start
// is refused, so that a restart (a rollout, a crash) does not break on it
// later. Only keys (the restart keys that changed) are checked: the
// others are those the plugin runs with.
func Startable(cfg *config.Config, keys []string) error {
	var errs []error
	check := func(key string, err error) {
		if err != nil && slices.Contains(keys, key) {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	check("stateDir", writableDir(cfg.StateDir))
	check("sysfsRoot", isDir(filepath.Join(cfg.SysfsRoot, "devices", "system", "cpu")))
	if cfg.CgroupfsRoot != "" {
		check("cgroupfsRoot", isDir(cfg.CgroupfsRoot))
	}
	check("nriSocket", isDir(filepath.Dir(cfg.NRISocket)))
	if cfg.KubeletCheckpoint != "" {
		if _, err := os.Stat(cfg.KubeletCheckpoint); err != nil && !errors.Is(err, os.ErrNotExist) {
			check("kubeletCheckpoint", err)
		}
	}
	return errors.Join(errs...)
}

// writableDir checks that dir exists and that a file can be written in
// it.
func writableDir(dir string) error {
	if err := isDir(dir); err != nil {
		return fmt.Errorf("%w (is it mounted?)", err)
	}
	f, err := os.CreateTemp(dir, ".writable-")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// isDir checks that path is a directory.
func isDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	return nil
}
