package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// TestCommands runs the helper subcommands on a fixture machine and checks
// their exit status and what they print.
func TestCommands(t *testing.T) {
	root, stateDir := kepNodeWithCheckpoint(t, state.New(mustParse(t, "0-11")))
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("topologyManagerPolicy: single-numa\nlogLevel: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sys := "--sysfs-root=" + root
	// An SMT machine numbering siblings apart (core k is {k, k+8}) with
	// isolcpus=2-15: cores {0,8} and {1,9} mix isolated and other CPUs
	// (CPUs 8 and 9 are isolated, 0 and 1 not).
	isoRoot := t.TempDir()
	if err := fakesysfs.Generate(isoRoot, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, ThreadsPerCore: 2,
		Numbering: fakesysfs.SiblingsOffset, Isolated: []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}); err != nil {
		t.Fatal(err)
	}
	isoSys := "--sysfs-root=" + isoRoot
	configFile := func(doc string) string {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	lowLatency := configFile("reservedSystemCPUs: \"0-1\"\nisolatedCPUs: exclusive\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n")
	splitCore := configFile("reservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n")
	noPool := configFile("reservedSystemCPUs: \"0-1\"\nisolatedCPUs: exclusive\ncpuManagerPolicyOptions: {strict-cpu-reservation: \"true\"}\n")
	isolatedReserved := configFile("reservedSystemCPUs: \"0,2\"\nisolatedCPUs: exclusive\n")
	mixedCore := configFile("reservedSystemCPUs: \"0,8\"\nisolatedCPUs: exclusive\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n")
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
		{"health on loopback", []string{"validate-config", "--config", "../../config/example.yaml", sys, "--health-address=127.0.0.1:9103"}, 0,
			`warning: healthAddress "127.0.0.1:9103" is a loopback address: only a client in the plugin's own network namespace (inside its pod) reaches it, never the kubelet's HTTP probes`},
		{"reserved CPU offline", []string{"validate-config", "--config", "../../config/example.yaml", sys, "--reserved-cpus=12"}, 1, "reservedSystemCPUs: CPUs 12 are not online"},
		{"keys set apart from the defaults", []string{"validate-config", "--config", lowLatency, isoSys, "--log-level=debug"}, 0,
			"Set apart from the defaults, by when a running plugin applies a change: live: logLevel; " +
				"without exclusive containers: reservedSystemCPUs, isolatedCPUs, cpuManagerPolicyOptions; at restart: sysfsRoot.\n"},
		{"topology shows isolated CPUs", []string{"topology", isoSys}, 0, "isolated CPUs (isolcpus): 2-15\n"},
		{"topology shows what the configuration makes of them", []string{"topology", isoSys, "--config", lowLatency}, 0,
			"  isolatedCPUs: exclusive: the isolated CPUs 2-15 serve exclusive containers only"},
		{"isolated CPUs exclusive", []string{"validate-config", "--config", lowLatency, isoSys}, 0,
			"isolatedCPUs: exclusive: the isolated CPUs 2-15 serve exclusive containers only, which take them before any other CPU; shared containers never run on them\n" +
				"CPUs for exclusive containers: 2-15 (under full-pcpus-only only 2-7,10-15)\n" +
				"shared pool without exclusive containers: 0-1\n" +
				"warning: full-pcpus-only gives whole cores only and the reservation splits core 0,8 (0 reserved), core 1,9 (1 reserved): CPUs 8-9 can never be exclusive"},
		{"isolated CPUs shared", []string{"validate-config", "--config", splitCore, isoSys}, 0,
			"isolatedCPUs: shared: the isolated CPUs 2-15 are like any other CPU, in the shared pool while nobody pins them\n" +
				"CPUs for exclusive containers: 1-15 (under full-pcpus-only only 1-7,9-15)\n" +
				"shared pool without exclusive containers: 0-15\n" +
				"warning: full-pcpus-only gives whole cores only and the reservation splits core 0,8 (0 reserved): CPUs 8 can never be exclusive"},
		{"warning about isolated CPUs in the shared pool", []string{"validate-config", "--config", splitCore, isoSys}, 0,
			"warning: isolatedCPUs: shared puts the isolated CPUs 2-15 in the shared pool while nobody pins them"},
		{"split core on the KEP machine", []string{"validate-config", "--config", splitCore, sys}, 0, "the reservation splits core 0-1 (0 reserved): CPUs 1 can never be exclusive"},
		{"no shared pool left", []string{"validate-config", "--config", noPool, isoSys}, 1,
			"policy: no CPU is left for the shared pool: isolatedCPUs: exclusive keeps the isolated CPUs 2-15 out of it and strict-cpu-reservation the reserved CPUs 0-1"},
		{"reserved and isolated", []string{"validate-config", "--config", isolatedReserved, isoSys}, 0,
			"warning: CPUs 2 are reserved and isolated: under isolatedCPUs: exclusive no container runs on them"},
		{"core mixing isolated and other CPUs", []string{"validate-config", "--config", mixedCore, isoSys}, 0,
			"warning: cores 1,9 (1 not isolated) mix isolated and other CPUs: under full-pcpus-only pinning one takes its other CPUs out of the shared pool too"},
		{"state", []string{"state", sys, "--state-dir=" + stateDir}, 0, `"defaultCpuSet":"0-11"`},
		{"export-kubelet", []string{"export-kubelet", sys, "--state-dir=" + stateDir}, 0, `{"policyName":"static","defaultCpuSet":"0-11","checksum":0}`},
		{"export-kubelet V4", []string{"export-kubelet", "--format=v4", sys, "--state-dir=" + stateDir}, 0, `"data":"{\"policyName\":\"static\",\"defaultCpuSet\":\"0-11\"}","dataChecksum":`},
		{"export-kubelet in an unknown format", []string{"export-kubelet", "--format=v3", sys, "--state-dir=" + stateDir}, 2, `--format "v3": want v2 (the kubelet 1.36) or v4 (the kubelet 1.37)`},
		{"export-kubelet without a checkpoint", []string{"export-kubelet", sys, "--state-dir=" + t.TempDir()}, 1, "no checkpoint"},
		{"no state", []string{"state", sys, "--state-dir=" + t.TempDir()}, 0, "no checkpoint"},
		{"simulate", []string{"simulate", "../../test/scenarios/kep-checkpoint-walkthrough.yaml"}, 0, "every expectation held"},
		{"simulate without a file", []string{"simulate"}, 2, "one scenario file is required"},
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

// TestStateShowsDeviceNodes: `state` prints each pinned container's
// device NUMA nodes as the checkpoint keeps them (deviceNodes), and
// export-kubelet leaves them out (the kubelet's file has no such field).
func TestStateShowsDeviceNodes(t *testing.T) {
	nodes, err := state.ParseNodeSet("0-1")
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(mustParse(t, "0,3-11"))
	st.SetAssignment("pod-a", "app", state.Assignment{Baseline: mustParse(t, "1-2"), DeviceNodes: nodes})
	st.SetContainer("c-app", state.ContainerRef{PodUID: "pod-a", Name: "app"})
	root, stateDir := kepNodeWithCheckpoint(t, st)
	args := []string{"--sysfs-root=" + root, "--state-dir=" + stateDir}
	var out bytes.Buffer
	if status := run(append([]string{"state"}, args...), &out, &out); status != exitOK ||
		!strings.Contains(out.String(), `"entries":{"pod-a":{"app":{"baseline":"1-2","resized":"","deviceNodes":"0-1"}}}`) {
		t.Errorf("state = %d:\n%s\nwant pod-a's app with its device nodes 0-1", status, out.String())
	}
	for _, format := range []string{"v2", "v4"} {
		out.Reset()
		if status := run(append([]string{"export-kubelet", "--format=" + format}, args...), &out, &out); status != exitOK ||
			!strings.Contains(out.String(), "1-2") || strings.Contains(out.String(), "deviceNodes") {
			t.Errorf("export-kubelet --format=%s = %d:\n%s\nwant pod-a's app on 1-2 without device nodes", format, status, out.String())
		}
	}
}

// kepNodeWithCheckpoint writes the sysfs tree of KEP-5554's example
// machine (12 CPUs) and a state directory holding st as the plugin's
// checkpoint, and returns both roots.
func kepNodeWithCheckpoint(t *testing.T, st *state.State) (sysfsRoot, stateDir string) {
	t.Helper()
	sysfsRoot, stateDir = t.TempDir(), t.TempDir()
	if err := fakesysfs.Generate(sysfsRoot, fakesysfs.KEP5554UseCases()); err != nil {
		t.Fatal(err)
	}
	store, err := state.NewStore(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(st); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return sysfsRoot, stateDir
}

// TestHelpListsCommands checks that every way of asking for help prints
// the commands, one line each, not the flags of run.
func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		var out, errOut bytes.Buffer
		if status := run(args, &out, &errOut); status != exitOK {
			t.Errorf("run(%q) = %d, want 0", args, status)
		}
		text := out.String()
		for _, c := range commands {
			if !strings.Contains(text, "\n  "+c.name+" ") {
				t.Errorf("run(%q) does not list %s:\n%s", args, c.name, text)
			}
		}
		if strings.Contains(text, "--metrics-address") || errOut.Len() > 0 {
			t.Errorf("run(%q) printed flags of a command:\n%s%s", args, text, errOut.String())
		}
	}
	var out bytes.Buffer
	if status := run([]string{"help", "validate-config"}, &out, &out); status != exitOK || !strings.Contains(out.String(), "-config") {
		t.Errorf("help validate-config = %d:\n%s", status, out.String())
	}
}

// TestExitStatus checks the one convention of every command: 0 success,
// 1 failure, 2 wrong usage.
func TestExitStatus(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("logLevel: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{[]string{"version"}, exitOK},
		{[]string{"version", "extra"}, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"--no-such-flag"}, exitUsage},
		{[]string{"run", "--no-such-flag"}, exitUsage},
		{[]string{"run", "--config", bad}, exitFailure},
		{[]string{"run", "--log-level=loud"}, exitUsage},
		{[]string{"topology", "--no-such-flag"}, exitUsage},
		{[]string{"topology", "extra"}, exitUsage},
		{[]string{"topology", "--config", missing}, exitFailure},
		{[]string{"state", "--no-such-flag"}, exitUsage},
		{[]string{"state", "--config", bad}, exitFailure},
		{[]string{"validate-config"}, exitUsage},
		{[]string{"validate-config", "--config"}, exitUsage},
		{[]string{"validate-config", "--config", bad}, exitFailure},
		{[]string{"validate-config", "--config", missing}, exitFailure},
		{[]string{"simulate"}, exitUsage},
		{[]string{"simulate", "a", "b"}, exitUsage},
		{[]string{"simulate", missing}, exitFailure},
		{[]string{"doctor", "--no-such-flag"}, exitUsage},
		{[]string{"doctor", "extra"}, exitUsage},
		{[]string{"doctor", "--config", bad}, exitFailure},
		{[]string{"validate-adjustments", "extra"}, exitUsage},
		{[]string{"validate-adjustments", "--validator-index", "9"}, exitUsage},
		{[]string{"validate-adjustments", "--validator-name", "a b"}, exitUsage},
		{[]string{"validate-adjustments", "--validator-name", "cpumanager"}, exitUsage},
		{[]string{"validate-adjustments", "--config", bad}, exitFailure},
		{[]string{"validate-adjustments", "-h"}, exitOK},
		{[]string{"run", "-h"}, exitOK},
		{[]string{"doctor", "-h"}, exitOK},
		{[]string{"simulate", "-h"}, exitOK},
		{[]string{"help", "state"}, exitOK},
	} {
		var out bytes.Buffer
		if status := run(tc.args, &out, &out); status != tc.status {
			t.Errorf("run(%q) = %d, want %d; output:\n%s", tc.args, status, tc.status, out.String())
		}
	}
}

// TestValidateConfigFromStandardInput checks the recipe of the docs for a
// node reached with kubectl exec -i: --config - (or /dev/stdin) reads the
// file from standard input, and every error of it comes out at once.
func TestValidateConfigFromStandardInput(t *testing.T) {
	root := t.TempDir()
	if err := fakesysfs.Generate(root, fakesysfs.KEP5554UseCases()); err != nil {
		t.Fatal(err)
	}
	old := stdin
	t.Cleanup(func() { stdin = old })

	stdin = strings.NewReader("reservedSystemCPUs: \"0-1\"\n")
	var out bytes.Buffer
	if status := run([]string{"validate-config", "--config", "-", "--sysfs-root=" + root}, &out, &out); status != exitOK ||
		!strings.Contains(out.String(), "the configuration from standard input is valid on this machine (online CPUs 0-11, reserved 0-1)") {
		t.Errorf("validate-config --config - = %d:\n%s", status, out.String())
	}

	stdin = strings.NewReader("logLevel: loud\nreservedCPUCount: two\ninPlaceResize: \"no\"\npluginIndex: \"1\"\n")
	out.Reset()
	status := run([]string{"validate-config", "--config", "-", "--sysfs-root=" + root}, &out, &out)
	for _, want := range []string{
		"reservedCPUCount: got a string, want an integer",
		"inPlaceResize: got a string, want true or false",
		`pluginIndex: "1" is not two digits`,
		`logLevel: "loud" is not one of`,
	} {
		if status != exitFailure || !strings.Contains(out.String(), want) {
			t.Errorf("validate-config of a file with four errors = %d, output lacks %q:\n%s", status, want, out.String())
		}
	}
}

// TestMemoryLimit: the DaemonSet gives the container's memory limit, the
// runtime's soft limit is 90 % of it; GOMEMLIMIT set by hand wins.
func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(memoryLimitEnv, "134217728") // 128Mi
	setMemoryLimit()
	if got, want := debug.SetMemoryLimit(-1), int64(134217728/10*9); got != want || os.Getenv("GOMEMLIMIT") != strconv.FormatInt(want, 10) {
		t.Errorf("soft limit %d, GOMEMLIMIT %q; want %d", got, os.Getenv("GOMEMLIMIT"), want)
	}

	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "50MiB")
	setMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != before || os.Getenv("GOMEMLIMIT") != "50MiB" {
		t.Errorf("GOMEMLIMIT set: the soft limit became %d", got)
	}

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(memoryLimitEnv, "garbage")
	setMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("a bad %s changed the soft limit to %d", memoryLimitEnv, got)
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

// TestSetKeys: validate-config names the keys a configuration sets apart
// from their defaults, grouped as their declarations say.
func TestSetKeys(t *testing.T) {
	tests := []struct {
		name   string
		change func(*config.Config)
		want   string
	}{
		{"defaults", func(*config.Config) {}, "Every key has its default."},
		{"one key", func(c *config.Config) { c.AlignMemory = true },
			"Set apart from the defaults, by when a running plugin applies a change: live: alignMemory."},
		{"every group", func(c *config.Config) { c.StateDir, c.ReservedCPUCount, c.LogLevel = "/s", 2, logrus.DebugLevel },
			"Set apart from the defaults, by when a running plugin applies a change: live: logLevel; " +
				"without exclusive containers: reservedCPUCount; at restart: stateDir."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			tt.change(c)
			if got := setKeys(c); got != tt.want {
				t.Errorf("setKeys = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestValidateAgainstACapturedTopology: a configuration checks against the
// topology another machine captured with topology --json, whatever the
// machine validate-config runs on (here one of 12 CPUs checking a
// configuration meant for a 16-CPU node).
func TestValidateAgainstACapturedTopology(t *testing.T) {
	nodeRoot, here := t.TempDir(), t.TempDir()
	if err := fakesysfs.Generate(nodeRoot, fakesysfs.Spec{Sockets: 2, CoresPerNUMA: 4, ThreadsPerCore: 2, Isolated: []int{14, 15}}); err != nil {
		t.Fatal(err)
	}
	if err := fakesysfs.Generate(here, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 6, ThreadsPerCore: 2}); err != nil {
		t.Fatal(err)
	}
	var capture bytes.Buffer
	if status := run([]string{"topology", "--json", "--sysfs-root=" + nodeRoot}, &capture, &capture); status != exitOK {
		t.Fatalf("topology --json = %d:\n%s", status, capture.String())
	}
	capturePath := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(capturePath, capture.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: config.nri-cpumanager.io/v1alpha1\nkind: PluginConfiguration\nreservedSystemCPUs: \"0,12-13\"\nisolatedCPUs: exclusive\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A group of nodes of the captured shape reserving a CPU of each socket.
	if err := os.WriteFile(filepath.Join(filepath.Dir(config), "group.two-sockets.yaml"), []byte("apiVersion: config.nri-cpumanager.io/v1alpha1\nkind: PluginConfiguration\nreservedSystemCPUs: \"0,8\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notACapture := filepath.Join(t.TempDir(), "config-as-capture.json")
	if err := os.WriteFile(notACapture, []byte(`{"apiVersion":"config.nri-cpumanager.io/v1alpha1","kind":"PluginConfiguration"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		output string
	}{
		{"on this machine", []string{"--sysfs-root=" + here}, exitFailure, "reservedSystemCPUs: CPUs 12-13 are not online on this machine"},
		{"on the captured node", []string{"--sysfs-root=" + here, "--topology", capturePath}, exitOK,
			"is valid on the topology of " + capturePath + " (online CPUs 0-15, reserved 0,12-13)"},
		{"the captured isolated CPUs", []string{"--topology", capturePath}, exitOK, "isolated CPUs 14-15"},
		{"a group on the captured node", []string{"--sysfs-root=" + here, "--config-group", "two-sockets", "--topology", capturePath}, exitOK,
			"with configuration group two-sockets (" + filepath.Join(filepath.Dir(config), "group.two-sockets.yaml") + " over it) is valid on the topology of " + capturePath + " (online CPUs 0-15, reserved 0,8)"},
		{"a capture that is not one", []string{"--topology", notACapture}, exitFailure, "not a topology capture"},
		{"no capture", []string{"--topology", filepath.Join(t.TempDir(), "missing.json")}, exitFailure, "--topology: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append([]string{"validate-config", "--config", config}, tc.args...)
			if status := run(args, &out, &out); status != tc.status || !strings.Contains(out.String(), tc.output) {
				t.Errorf("run(%q) = %d:\n%s\nwant %d and %q", args, status, out.String(), tc.status, tc.output)
			}
		})
	}
}
