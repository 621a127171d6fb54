package main

import (
	"context"
	"io"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/nri-cpumanager/nri-cpumanager/adjustguard"
)

// validatorIdentity is what a plugin's name and index may be, as NRI
// accepts them (config: pluginName, pluginIndex).
var (
	validatorName  = regexp.MustCompile(`^[a-zA-Z0-9_.+-]+$`)
	validatorIndex = regexp.MustCompile(`^[0-9]{2}$`)
)

// validateAdjustments runs the validating NRI plugin (package
// adjustguard) until SIGTERM or SIGINT: it refuses every container
// creation in which the plugin named pluginName adjusted anything but
// cpusets and CPU shares, quota and period. It reads the plugin's own
// configuration (--config, the same ConfigMap) for pluginName, nriSocket
// and the log settings, so that it watches the plugin as configured.
func validateAdjustments(args []string, _, stderr io.Writer) error {
	f := newFlags("validate-adjustments", stderr)
	name := f.fs.String("validator-name", "cpumanager-validator", "`name` this validator registers with NRI (what containerd's required_plugins lists to require it)")
	index := f.fs.String("validator-index", "99", "two-digit NRI `index` this validator registers with")
	all := f.fs.Bool("all-plugins", false, "bound every NRI plugin's adjustments, not only pluginName's (nodes where nri-cpumanager is the only NRI plugin)")
	allowRemovals := f.fs.Bool("allow-unattributed-removals", false, "let through removals NRI attributes to no plugin (of a container's own mount, annotation or sysctl), which may be the plugin's")
	cfg, err := f.load(args)
	if err != nil {
		return err
	}
	if !validatorName.MatchString(*name) {
		return usagef("--validator-name %q: letters, digits and _.+- only", *name)
	}
	if !validatorIndex.MatchString(*index) {
		return usagef("--validator-index %q: two digits", *index)
	}
	if *name == cfg.PluginName {
		return usagef("--validator-name %q is the plugin's own name: required_plugins could not tell them apart", *name)
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return adjustguard.Run(ctx, adjustguard.Options{
		Rule:   adjustguard.Rule{Plugin: cfg.PluginName, AllPlugins: *all, AllowUnattributedRemovals: *allowRemovals},
		Socket: cfg.NRISocket,
		Name:   *name,
		Index:  *index,
		Log:    log.WithField("component", "validate-adjustments"),
	})
}
