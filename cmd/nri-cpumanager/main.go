// Command nri-cpumanager is an NRI plugin for containerd that pins
// Kubernetes Guaranteed containers with integer CPU requests to exclusive
// CPUs and resizes them in place (KEP-5554 semantics).
//
// Usage:
//
//	nri-cpumanager [run] [--config FILE] [flags]   run the plugin (default)
//	nri-cpumanager probe live|ready [--config FILE] [flags]
//	nri-cpumanager doctor [--host-root DIR] [flags]
//	nri-cpumanager validate-config --config FILE|- [--topology CAPTURE]
//	nri-cpumanager validate-adjustments [--config FILE] [flags]
//	nri-cpumanager topology [--config FILE] [--sysfs-root DIR] [--json]
//	nri-cpumanager state [--config FILE] [--state-dir DIR]
//	nri-cpumanager simulate SCENARIO.yaml
//	nri-cpumanager version
//	nri-cpumanager help [COMMAND]
//
// Every command exits with 0 on success, 1 on a failure (for doctor and
// validate-config: a problem found) and 2 on wrong usage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// commands are the subcommands, in the order the usage lists them.
var commands = []struct {
	name, args, summary string
	fn                  func([]string, io.Writer, io.Writer) error
}{
	{"run", "[--config FILE] [flags]", "run the plugin (the default command)", runPlugin},
	{"probe", "live|ready [--config FILE] [flags]", "ask the running plugin over its probe socket whether it is alive or ready (the kubelet's exec probes)", probe},
	{"doctor", "[--host-root DIR] [flags]", "check this node for the plugin: containerd, NRI, kubelet, cgroups, CPUs", doctor},
	{"validate-config", "--config FILE|- [--topology CAPTURE]", "check a configuration against this machine, or a captured one, and say what it does", validateConfig},
	{"validate-adjustments", "[--config FILE] [flags]", "run the validating NRI plugin: refuse a container the plugin adjusted beyond cpusets and CPU shares, quota, period", validateAdjustments},
	{"topology", "[--config FILE] [--json] [flags]", "print the CPU topology the plugin sees; --json captures it for validate-config", showTopology},
	{"state", "[--config FILE] [flags]", "print and verify the checkpoint", showState},
	{"export-kubelet", "[--format v2|v4] [--config FILE] [flags]", "print the checkpoint as the kubelet's cpu_manager_state (V2: kubelet 1.36; V4: 1.37), to go back to its static policy", exportKubelet},
	{"simulate", "SCENARIO.yaml", "replay a scenario file and print each decision", simulate},
	{"version", "", "print the version, revision and Go version", showVersion},
	{"help", "[COMMAND]", "print this help, or a command's flags", nil},
}

// Exit statuses, the same for every command.
const (
	exitOK      = 0 // done; for doctor and validate-config: nothing wrong found
	exitFailure = 1 // the command ran and failed, or found a problem
	exitUsage   = 2 // the command line is wrong: unknown command or flag, missing argument
)

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// usage is the top-level help: the commands, one line each.
func usage() string {
	var b strings.Builder
	b.WriteString("nri-cpumanager: exclusive CPUs and in-place CPU resize for Kubernetes pods, as an NRI plugin.\n\nUsage:\n  nri-cpumanager <command> [arguments]\n\nCommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s %s\n", width, c.name, c.summary)
	}
	b.WriteString("\nRun \"nri-cpumanager help <command>\" or \"nri-cpumanager <command> -h\" for its arguments.\n" +
		"Exit status: 0 success, 1 failure (or problems found), 2 wrong usage.\n")
	return b.String()
}

func main() {
	setMemoryLimit()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// memoryLimitEnv carries the container's memory limit in bytes (the
// DaemonSet sets it from the downward API's limits.memory).
const memoryLimitEnv = "NRI_CPUMANAGER_MEMORY_LIMIT"

// setMemoryLimit sets the Go runtime's soft memory limit to 90 % of the
// container's (memoryLimitEnv), unless GOMEMLIMIT is set: the collector
// works harder before the kernel's limit, and the rest of the process (its
// stacks, the runtime's own memory, what the heap returned but the kernel
// still counts) has room. It sets GOMEMLIMIT too, which run reads to keep
// a limit the environment gave.
func setMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit, err := strconv.ParseInt(os.Getenv(memoryLimitEnv), 10, 64)
	if err != nil || limit <= 0 {
		return
	}
	soft := limit / 10 * 9
	debug.SetMemoryLimit(soft)
	os.Setenv("GOMEMLIMIT", strconv.FormatInt(soft, 10))
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// run dispatches to a subcommand and returns the exit status. No command
// runs the plugin; flags without a command are the plugin's (as the
// DaemonSet of older releases called it).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		if args[0] == "help" && len(args) > 1 {
			// help COMMAND: the command's own -h.
			return run([]string{args[1], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage())
		return exitOK
	}
	name, rest := "run", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, rest = args[0], args[1:]
	}
	var fn func([]string, io.Writer, io.Writer) error
	for _, c := range commands {
		if c.name == name {
			fn = c.fn
		}
	}
	if fn == nil {
		fmt.Fprintf(stderr, "nri-cpumanager: unknown command %q\n\n%s", name, usage())
		return exitUsage
	}
	err := fn(rest, stdout, stderr)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "nri-cpumanager %s: %v\nRun \"nri-cpumanager help %s\" for its arguments.\n", name, err, name)
		return exitUsage
	case errors.Is(err, errProblemsFound):
		return exitFailure // the command printed them
	}
	fmt.Fprintf(stderr, "nri-cpumanager %s: %v\n", name, err)
	return exitFailure
}

// errProblemsFound ends a command that printed the problems it found.
var errProblemsFound = errors.New("problems found")
