package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// commonFlags are the flags every subcommand takes: the config file and
// the per-key overrides.
type commonFlags struct {
	fs         *flag.FlagSet
	configPath string
	overrides  *config.Flags
	// warnings are what the configuration should change although it is
	// valid (config.ParseWithWarnings of the file, config.Warnings of the
	// file with the flags), once read.
	warnings []string
}

func newFlags(name string, stderr io.Writer) *commonFlags {
	f := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.StringVar(&f.configPath, "config", "", "configuration `file` (YAML, see config/example.yaml), - for standard input; defaults apply without one")
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

// config reads --config (standard input for -) and applies the flags.
func (f *commonFlags) config() (*config.Config, error) {
	cfg := config.Default()
	var err error
	switch f.configPath {
	case "":
	case "-":
		var data []byte
		if data, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("reading config from standard input: %w", err)
		}
		if cfg, f.warnings, err = config.ParseWithWarnings(data); err != nil {
			return nil, fmt.Errorf("config from standard input is invalid:\n%w", err)
		}
	default:
		if cfg, f.warnings, err = config.LoadWithWarnings(f.configPath); err != nil {
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
