// Command nri-cpumanager is an NRI plugin for containerd that pins
// Kubernetes Guaranteed containers with integer CPU requests to exclusive
// CPUs and resizes them in place (KEP-5554 semantics).
//
// Usage:
//
//	nri-cpumanager [run] [--config FILE] [flags]   run the plugin (default)
//	nri-cpumanager topology [--config FILE] [--sysfs-root DIR]
//	nri-cpumanager state [--config FILE] [--state-dir DIR]
//	nri-cpumanager validate-config --config FILE
//	nri-cpumanager simulate SCENARIO.yaml
//	nri-cpumanager version
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// usage is printed for -h and unknown subcommands.
const usage = `nri-cpumanager: exclusive CPUs and in-place CPU resize for Kubernetes pods, as an NRI plugin.

Usage:
  nri-cpumanager [run] [--config FILE] [flags]    run the plugin (default)
  nri-cpumanager topology [--config FILE] [flags] print the CPU topology the plugin sees
  nri-cpumanager state [--config FILE] [flags]    print and verify the checkpoint
  nri-cpumanager validate-config --config FILE    check a configuration against this machine
  nri-cpumanager simulate SCENARIO.yaml           replay a scenario file and print each decision
  nri-cpumanager version                          print the version, revision and Go version

Run "nri-cpumanager <command> -h" for the flags of a command.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	cmd, rest := "run", args
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, rest = args[0], args[1:]
	}
	commands := map[string]func([]string, io.Writer, io.Writer) error{
		"run":             runPlugin,
		"topology":        showTopology,
		"state":           showState,
		"validate-config": validateConfig,
		"simulate":        simulate,
		"version":         showVersion,
	}
	if cmd == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	fn, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(stderr, "nri-cpumanager: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err := fn(rest, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "nri-cpumanager %s: %v\n", cmd, err)
		return 1
	}
	return 0
}
