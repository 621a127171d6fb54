package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/nri-cpumanager/nri-cpumanager/plugin"
)

// version and revision are stamped by the release build:
// go build -ldflags "-X main.version=v0.1.0 -X main.revision=$(git rev-parse HEAD)".
var (
	version  = "devel"
	revision = ""
)

// buildInfo returns what this binary is: the stamped version and revision,
// else the VCS revision Go recorded when it was built from a checkout.
func buildInfo() plugin.BuildInfo {
	info := plugin.BuildInfo{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if info.Revision == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					info.Revision = s.Value
				}
			}
		}
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

// showVersion prints the version, revision and Go version.
func showVersion(args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		if isHelp(args[0]) {
			_, err := fmt.Fprintln(stdout, "usage: nri-cpumanager version")
			return err
		}
		return usagef("unexpected arguments %q", args)
	}
	info := buildInfo()
	_, err := fmt.Fprintf(stdout, "nri-cpumanager %s (revision %s, %s)\n", info.Version, info.Revision, info.GoVersion)
	return err
}
