package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// simulate replays a scenario file against the policy on the scenario's
// fixture machine and prints every step: an operator's way to see what the
// plugin would decide before deploying a configuration.
func simulate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: nri-cpumanager simulate SCENARIO.yaml   (format: see test/scenarios/)")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usagef("one scenario file is required")
	}
	f, err := scenario.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, f.Name)
	if err := assemble.Simulate(f, func(line string) { fmt.Fprintln(stdout, line) }); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "every expectation held")
	return nil
}
