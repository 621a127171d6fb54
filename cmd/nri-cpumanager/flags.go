package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// commonFlags are the flags every subcommand takes: the config file and
// the per-key overrides.
type commonFlags struct {
	fs         *flag.FlagSet
	configPath string
	overrides  *config.Flags
}

func newFlags(name string, stderr io.Writer) *commonFlags {
	f := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.StringVar(&f.configPath, "config", "", "configuration file (YAML, see config/example.yaml); defaults apply without one")
	f.overrides = config.RegisterFlags(f.fs)
	return f
}

// load parses the command line and returns the effective configuration.
func (f *commonFlags) load(args []string) (*config.Config, error) {
	if err := f.fs.Parse(args); err != nil {
		return nil, err
	}
	cfg := config.Default()
	if f.configPath != "" {
		var err error
		if cfg, err = config.Load(f.configPath); err != nil {
			return nil, err
		}
	}
	cfg, err := f.overrides.Apply(cfg)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, nil
}
