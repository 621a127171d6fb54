package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// TestCommands runs the helper subcommands on a fixture machine and checks
// their exit status and what they print.
func TestCommands(t *testing.T) {
	root := t.TempDir()
	if err := fakesysfs.Generate(root, fakesysfs.KEP5554UseCases()); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	store, err := state.NewStore(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(mustParse(t, "0-11"))
	if err := store.Save(st); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("topologyManagerPolicy: single-numa\nlogLevel: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sys := "--sysfs-root=" + root
	tests := []struct {
		name   string
		args   []string
		status int
		output string
	}{
		{"help", []string{"help"}, 0, "Usage:"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"topology", []string{"topology", sys}, 0, "NUMA node 1: CPUs 6-11"},
		{"valid config", []string{"validate-config", "--config", "../../config/example.yaml", sys}, 0, "is valid on this machine (online CPUs 0-11, reserved 0)"},
		{"invalid config", []string{"validate-config", "--config", bad, sys}, 1, `topologyManagerPolicy: "single-numa" is not one of none, best-effort, restricted, single-numa-node`},
		{"reserved CPU offline", []string{"validate-config", "--config", "../../config/example.yaml", sys, "--reserved-cpus=12"}, 1, "reservedSystemCPUs: CPUs 12 are not online"},
		{"state", []string{"state", sys, "--state-dir=" + stateDir}, 0, `"defaultCpuSet":"0-11"`},
		{"no state", []string{"state", sys, "--state-dir=" + t.TempDir()}, 0, "no checkpoint"},
		{"simulate", []string{"simulate", "../../test/scenarios/kep-checkpoint-walkthrough.yaml"}, 0, "every expectation held"},
		{"simulate without a file", []string{"simulate"}, 1, "one scenario file is required"},
		{"version", []string{"version"}, 0, "nri-cpumanager devel (revision "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			status := run(tt.args, &out, &out)
			if status != tt.status || !strings.Contains(out.String(), tt.output) {
				t.Errorf("run(%q) = %d with output\n%s\nwant %d and %q", tt.args, status, out.String(), tt.status, tt.output)
			}
		})
	}
}

func mustParse(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestVersionStamped checks what the release build's -ldflags stamp is
// what the version command and the build info report.
func TestVersionStamped(t *testing.T) {
	oldVersion, oldRevision := version, revision
	t.Cleanup(func() { version, revision = oldVersion, oldRevision })
	version, revision = "v9.8.7", "0123abcd"
	var out bytes.Buffer
	if status := run([]string{"version"}, &out, &out); status != 0 || !strings.HasPrefix(out.String(), "nri-cpumanager v9.8.7 (revision 0123abcd, go") {
		t.Errorf("version printed %q (status %d)", out.String(), status)
	}
	if info := buildInfo(); info.Version != "v9.8.7" || info.Revision != "0123abcd" || !strings.HasPrefix(info.GoVersion, "go") {
		t.Errorf("buildInfo() = %+v", info)
	}
}
