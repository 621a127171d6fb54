//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// TestEmptyContainerdConfigIsNone checks what deploy/daemonset.yaml (and
// the chart's doctor.enabled) rely on when they mount the host's
// /etc/containerd/config.toml with hostPath type FileOrCreate: on a node
// without the file the kubelet creates it empty, and containerd v2.4.2
// derives from an empty config.toml the same configuration as from none
// (containerd config dump, which loads the file as the daemon does).
func TestEmptyContainerdConfigIsNone(t *testing.T) {
	ctx := harness.Context(t, 5*time.Minute)
	tools, err := harness.Install(ctx, harness.InstallOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dump := func(config string) string {
		cmd := exec.CommandContext(ctx, tools.Containerd, "--config", config, "config", "dump")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("containerd --config %s config dump: %v", config, err)
		}
		return string(out)
	}
	got, want := strings.Split(dump(empty), "\n"), strings.Split(dump(filepath.Join(dir, "missing.toml")), "\n")
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			t.Fatalf("an empty config.toml gives another configuration than none, from line %d:\nempty: %q\nnone:  %q",
				i+1, strings.Join(got[i:min(i+5, len(got))], "\n"), strings.Join(want[i:min(i+5, len(want))], "\n"))
		}
	}
}

// TestDoctorAsksContainerdOverCRI runs doctor against a real containerd's
// CRI socket: its own gRPC call (cmd/nri-cpumanager/criversion.go, written
// without grpc-go) gets the runtime's name and version from containerd's
// grpc-go server.
func TestDoctorAsksContainerdOverCRI(t *testing.T) {
	env := harness.NewTestEnv(t, harness.EnvOptions{})
	ctx := harness.Context(t, 5*time.Minute)
	bin, err := harness.GoBuild(ctx, "", "./cmd/nri-cpumanager")
	if err != nil {
		t.Fatal(err)
	}
	socket := env.Containerd.Address()
	// Exit status 1 when something else on this machine is wrong for the
	// plugin (cgroup v1, say): only the containerd line matters here.
	out, _ := exec.CommandContext(ctx, bin, "doctor", "--host-root", "/", "--plugin-metrics", "", "--containerd-socket", socket).CombinedOutput()
	want := regexp.MustCompile(`(?m)^ok +containerd +containerd v?2\.\d+\.\d+\S* \(from its CRI socket ` + regexp.QuoteMeta(socket) + `\)$`)
	if !want.Match(out) {
		t.Fatalf("doctor did not read containerd's version from its CRI socket %s; want a line matching %s in:\n%s", socket, want, out)
	}
}
