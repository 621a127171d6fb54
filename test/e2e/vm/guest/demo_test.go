//go:build vmguest

package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The suites boot's payload: the e2e suites' test binary (package
// test/e2e, static), the demo, and the repository files they read.
const (
	e2eTest  = "/vm/e2e.test"
	demo     = binDir + "/demo"
	repoRoot = "/vm/repo"
)

// runHostBinary runs a binary built for the host's `make e2e` or
// `make demo` on this cgroup v2 guest the way the host would, with the
// harness pointed at the payload (prebuilt binaries, containerd, the
// repository's files) instead of a source tree; its output goes to
// /vm/results/<name>.txt as it comes, and to the test's log when it fails.
func runHostBinary(t *testing.T, name string, args ...string) string {
	t.Helper()
	if _, err := os.Stat(args[0]); err != nil {
		t.Skipf("needs the suites boot's payload: %v", err)
	}
	// The harness's output directory, with the payload's containerd where
	// the harness installs it.
	out := filepath.Join(t.TempDir(), "_output")
	if err := os.MkdirAll(filepath.Join(out, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		if err := os.Symlink(filepath.Join(binDir, b), filepath.Join(out, "bin", b)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := harness.Context(t, 45*time.Minute)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		harness.OutputDirEnv+"="+out, harness.PrebuiltEnv+"="+binDir, harness.RepoRootEnv+"="+repoRoot)
	// Written as it comes: the host can follow it in the payload.
	path := filepath.Join("/vm/results", name+".txt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	if cerr := f.Close(); cerr != nil {
		t.Error(cerr)
	}
	output, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Errorf("%s on cgroup v2: %v; its output:\n%s", name, err, output)
	}
	return string(output)
}

// TestE2ESuitesOnCgroupV2 runs the e2e suites of `make e2e` (containerd's
// cgroupfs driver) on this cgroup v2 node: the harness finds the cpuset
// hierarchy in the unified tree, and every scenario passes as on the
// project's cgroup v1 machine.
func TestE2ESuitesOnCgroupV2(t *testing.T) {
	out := runHostBinary(t, "e2e", e2eTest, "-test.v", "-test.count=1", "-test.skip", "^TestKubernetes$", "-test.timeout", "40m")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "--- ") {
			t.Log(line)
		}
	}
	if strings.Contains(out, "--- SKIP") {
		t.Errorf("a suite skipped on cgroup v2:\n%s", out)
	}
}

// TestDemoOnCgroupV2 runs `make demo`'s program on this cgroup v2 node:
// with 16 CPUs it pins, grows and shrinks for real.
func TestDemoOnCgroupV2(t *testing.T) {
	out := runHostBinary(t, "demo", demo)
	for _, want := range []string{"== nri-cpumanager demo: 16 CPUs online (0-15)", "Resize \"dpdk\" back", "== SIMULATED", "== cleaned up"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}
