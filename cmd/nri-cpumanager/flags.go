package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// commonFlags are the flags every subcommand takes: the config file, the
// configuration group and the per-key overrides.
type commonFlags struct {
	fs         *flag.FlagSet
	configPath string
	// group is --config-group: the group whose file is read over the
	// config file ("" for none).
	group     string
	overrides *config.Flags
	// warnings are what the configuration should change although it is
	// valid, once read: config.ParseWithWarnings of each file, naming it,
	// and config.Warnings of the files with the flags.
	warnings []string
}

func newFlags(name string, stderr io.Writer) *commonFlags {
	f := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.StringVar(&f.configPath, "config", "", "configuration `file` (YAML, see config/example.yaml), - for standard input; defaults apply without one")
	f.fs.StringVar(&f.group, "config-group", "", "configuration `group` whose file ("+config.GroupFile("<group>")+" beside --config) is read over it; "+
		"without it the plugin reads its node's label "+config.GroupLabel+" through the Kubernetes API")
	f.overrides = config.RegisterFlags(f.fs)
	return f
}

// stdin is what --config - reads (a variable for the tests).
var stdin io.Reader = os.Stdin

// parse parses the command line; a bad flag or an argument left over is a
// usageError.
func (f *commonFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if f.fs.NArg() > 0 {
		return usagef("unexpected arguments %q", f.fs.Args())
	}
	return nil
}

// load parses the command line and returns the effective configuration.
func (f *commonFlags) load(args []string) (*config.Config, error) {
	if err := f.parse(args); err != nil {
		return nil, err
	}
	return f.config()
}

// config reads --config (standard input for -) with the file of
// --config-group over it, and applies the flags.
func (f *commonFlags) config() (*config.Config, error) {
	return f.configOf(f.group)
}

// configOf reads --config with the file of group over it ("" for none),
// and applies the flags.
func (f *commonFlags) configOf(group string) (*config.Config, error) {
	cfg := config.Default()
	var err error
	switch f.configPath {
	case "":
		if group != "" {
			return nil, usagef("--config-group %s: a group's file is read beside --config FILE, and there is none", group)
		}
	case "-":
		if group != "" {
			return nil, usagef("--config-group %s: a group's file is read beside --config FILE, not standard input", group)
		}
		var data []byte
		if data, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("reading config from standard input: %w", err)
		}
		if cfg, f.warnings, err = config.ParseWithWarnings(data); err != nil {
			return nil, fmt.Errorf("config from standard input is invalid:\n%w", err)
		}
		for i, w := range f.warnings {
			f.warnings[i] = "standard input: " + w
		}
	default:
		if cfg, f.warnings, err = config.LoadSource(config.Source{Path: f.configPath, Group: group}); err != nil {
			return nil, err
		}
	}
	cfg, err = f.overrides.Apply(cfg)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	f.warnings = append(f.warnings, config.Warnings(cfg)...)
	return cfg, nil
}
