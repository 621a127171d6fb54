package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// showTopology prints the topology the plugin would see, and what the
// configuration (defaults, --config, flags) makes of its CPUs; with --json
// it writes the topology alone as a capture file that validate-config
// --topology reads on any machine.
func showTopology(args []string, stdout, stderr io.Writer) error {
	f := newFlags("topology", stderr)
	asJSON := f.fs.Bool("json", false, "write the topology as a capture file for validate-config --topology on another machine")
	cfg, err := f.load(args)
	if err != nil {
		return err
	}
	topo, err := cpuallocator.Discover(cfg.SysfsRoot)
	if err != nil {
		return err
	}
	if *asJSON {
		data, err := topo.MarshalCapture()
		if err != nil {
			return err
		}
		_, err = stdout.Write(data)
		return err
	}
	if _, err := fmt.Fprint(stdout, topo.String()); err != nil {
		return err
	}
	pol, err := assemble.Policy(cfg, topo)
	if err != nil {
		return fmt.Errorf("the configuration does not fit this machine: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "with this configuration:\n  %s\n", strings.Join(assemble.DescribeCPUs(cfg, pol).Lines(), "\n  "))
	return err
}

// showState verifies and prints the durable state (the checkpoint file)
// without changing anything, so it is safe while the plugin runs.
func showState(args []string, stdout, stderr io.Writer) error {
	cfg, _, st, err := loadCheckpoint("state", args, stderr)
	if errors.Is(err, state.ErrNoCheckpoint) {
		_, err = fmt.Fprintf(stdout, "no checkpoint in %s\n", cfg.StateDir)
		return err
	}
	if err != nil {
		return err
	}
	data, err := state.Marshal(st)
	if err != nil {
		return err
	}
	if _, err = fmt.Fprintf(stdout, "%s: valid\n%s\n", cfg.StateDir, data); err != nil {
		return err
	}
	group, ok, err := readGroupRecord(cfg.StateDir)
	switch {
	case err != nil:
		_, err = fmt.Fprintf(stdout, "configuration group: %v\n", err)
	case ok:
		_, err = fmt.Fprintf(stdout, "configuration group the plugin runs with (%s): %s\n", filepath.Join(cfg.StateDir, groupRecord), orNone(group))
	}
	return err
}

// loadCheckpoint reads a command's configuration, the machine's topology
// and the checkpoint, without changing anything.
func loadCheckpoint(command string, args []string, stderr io.Writer) (*config.Config, *cpuallocator.Topology, *state.State, error) {
	return loadCheckpointWith(newFlags(command, stderr), args)
}

// loadCheckpointWith is loadCheckpoint with a command's own flags.
func loadCheckpointWith(f *commonFlags, args []string) (*config.Config, *cpuallocator.Topology, *state.State, error) {
	cfg, err := f.load(args)
	if err != nil {
		return nil, nil, nil, err
	}
	topo, err := cpuallocator.Discover(cfg.SysfsRoot)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := state.Inspect(cfg.StateDir, topo.CPUs())
	return cfg, topo, st, err
}

// kubeletExports are export-kubelet's formats: the kubelet's checkpoint
// formats, by the kubelet that writes them.
var kubeletExports = map[string]func(*state.State, cpuset.CPUSet) ([]byte, error){
	"v2": state.ExportKubeletV2, // the kubelet 1.36
	"v4": state.ExportKubeletV4, // the kubelet 1.37
}

// exportKubelet prints the plugin's checkpoint as the kubelet's own
// cpu_manager_state (--format v2, the kubelet 1.36's, by default; v4, the
// kubelet 1.37's, keeps the original CPUs as baselines), for a node
// going back to the kubelet's static policy with its pinned pods keeping
// their CPUs (docs/install.md, "Going back to the kubelet's static
// policy"). It changes nothing, so it is safe while the plugin runs; the
// file is only right once the plugin is stopped.
func exportKubelet(args []string, stdout, stderr io.Writer) error {
	f := newFlags("export-kubelet", stderr)
	format := f.fs.String("format", "v2", "the kubelet's checkpoint `format`: v2 (the kubelet 1.36) or v4 (1.37, with the original CPUs as baselines)")
	cfg, topo, st, err := loadCheckpointWith(f, args)
	if err != nil {
		return err
	}
	export, ok := kubeletExports[*format]
	if !ok {
		return usagef("--format %q: want v2 (the kubelet 1.36) or v4 (the kubelet 1.37)", *format)
	}
	pol, err := assemble.Policy(cfg, topo)
	if err != nil {
		return fmt.Errorf("the configuration does not fit this machine: %w", err)
	}
	managed := topo.CPUs() // the CPUs the kubelet's static policy manages
	if cfg.CPUManagerPolicyOptions.StrictCPUReservation {
		managed = managed.Difference(pol.Options().Reserved)
	}
	data, err := export(st, managed)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", data)
	return err
}

// validateConfig checks a configuration file, and that it makes sense on
// this machine's topology, or on the one --topology captured (reserved CPUs
// online, option combinations, a shared pool left), prints what it makes of the CPUs with warnings about
// settings that work but probably not as meant (they do not fail it), the
// keys it sets apart from their defaults with when a running plugin
// applies them (as the keys' declarations say), and the effective
// configuration.
func validateConfig(args []string, stdout, stderr io.Writer) error {
	f := newFlags("validate-config", stderr)
	capturePath := f.fs.String("topology", "", "check against the topology `file` that nri-cpumanager topology --json captured on a node, instead of this machine's")
	cfg, err := f.load(args)
	if err != nil {
		return err
	}
	if f.configPath == "" {
		return usagef("--config FILE is required (- reads standard input)")
	}
	where := "this machine"
	topo, err := cpuallocator.Discover(cfg.SysfsRoot)
	if *capturePath != "" {
		where = "the topology of " + *capturePath
		topo, err = readCapture(*capturePath)
	}
	if err != nil {
		return err
	}
	pol, err := assemble.Policy(cfg, topo)
	if err != nil {
		return fmt.Errorf("the configuration does not fit %s: %w", where, err)
	}
	text, err := cfg.YAML()
	if err != nil {
		return err
	}
	name := f.configPath
	switch {
	case name == "-":
		name = "the configuration from standard input"
	case f.group != "":
		src := config.Source{Path: f.configPath, Group: f.group}
		name = fmt.Sprintf("%s with configuration group %s (%s over it)", f.configPath, f.group, src.GroupPath())
	}
	for _, w := range f.warnings {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	_, err = fmt.Fprintf(stdout, "%s is valid on %s (online CPUs %s, reserved %s).\n%s\n%s\n%sEffective configuration:\n%s",
		name, where, pol.Allocator().Topology().CPUs(), pol.Options().Reserved, strings.Join(assemble.DescribeCPUs(cfg, pol).Lines(), "\n"),
		setKeys(cfg), groupsBeside(f), text)
	return err
}

// groupsBeside names the configuration groups whose files are beside the
// config file validate-config checked without a group, "" when none is.
func groupsBeside(f *commonFlags) string {
	if f.group != "" || f.configPath == "-" {
		return ""
	}
	groups, err := config.Groups(filepath.Dir(f.configPath))
	if err != nil || len(groups) == 0 {
		return ""
	}
	return fmt.Sprintf("Configuration groups beside it: %s (--config-group NAME checks the configuration of a node in one).\n", strings.Join(groups, ", "))
}

// readCapture reads a topology capture file (topology --json).
func readCapture(path string) (*cpuallocator.Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--topology: %w", err)
	}
	topo, err := cpuallocator.ParseCapture(data)
	if err != nil {
		return nil, fmt.Errorf("--topology %s: %w", path, err)
	}
	return topo, nil
}

// setKeys says which keys cfg sets apart from their defaults, by when a
// running plugin applies a change of them.
func setKeys(cfg *config.Config) string {
	ch := config.Diff(config.Default(), cfg)
	if ch.Empty() {
		return "Every key has its default."
	}
	return "Set apart from the defaults, by when a running plugin applies a change: " + ch.String() + "."
}
