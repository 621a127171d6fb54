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

// demo is make demo's program, which the cgroupfs boot's payload adds.
const demo = binDir + "/demo"

// TestDemoOnCgroupV2 runs `make demo`'s program on this cgroup v2 node the
// way the host would, with the harness pointed at the payload (prebuilt
// binaries, containerd among them, and the repository's files) instead of
// a source tree: with 16 CPUs it pins, grows and shrinks for real. Its
// output goes to /vm/results/demo.txt as it comes, and to the test's log
// when it fails.
func TestDemoOnCgroupV2(t *testing.T) {
	if _, err := os.Stat(demo); err != nil {
		t.Skipf("needs the cgroupfs boot's payload: %v", err)
	}
	ctx := harness.Context(t, 15*time.Minute)
	cmd := exec.CommandContext(ctx, demo)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), harness.OutputDirEnv+"="+filepath.Join(t.TempDir(), "_output"),
		harness.PrebuiltEnv+"="+binDir, harness.RepoRootEnv+"="+repoRoot)
	path := filepath.Join("/vm/results", "demo.txt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	if cerr := f.Close(); cerr != nil {
		t.Error(cerr)
	}
	out, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("the demo on cgroup v2: %v; its output:\n%s", err, out)
	}
	for _, want := range []string{"== nri-cpumanager demo: 16 CPUs online (0-15)", "Resize \"dpdk\" back", "== SIMULATED", "== cleaned up"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}
