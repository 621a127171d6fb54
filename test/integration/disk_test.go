package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestPluginOnAFullDisk starts the plugin with its state directory on a
// full file system (a tmpfs filled up): it starts without writing, runs,
// refuses what it cannot persist with the reason, and recovers once
// there is room, as a plugin that was running when the disk filled does.
func TestPluginOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	stateDir := filepath.Join(mnt, "state")
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPlugin(t, rt, n.pol, stateDir)
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	rp.Stop()

	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()

	startPlugin(t, rt, n.pol, stateDir)
	wantCPUs(t, rt, g, "1-2")
	_, err = rt.CreateContainer(pod(t, rt, "next", "guaranteed"), "app", guaranteed(1))
	if err == nil || !strings.Contains(err.Error(), "cannot persist the CPU assignment") || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("a creation on a full disk: %v, want refused with the reason", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	next := mustCreate(t, rt, pod(t, rt, "again", "guaranteed"), "app", guaranteed(1))
	wantCPUs(t, rt, next, "3")
	if _, ok := checkpointState(t, stateDir, n.topo.CPUs()).Assignment("again-uid", "app"); !ok {
		t.Errorf("the checkpoint has no entry of the creation made once there was room")
	}
	noViolations(t, rt)
}

// TestCheckpointFromTheFutureStopsThePlugin starts the plugin's command on
// a state directory whose checkpoint a newer version wrote (a rollback):
// it exits non-zero saying so, and leaves the file where it was.
func TestCheckpointFromTheFutureStopsThePlugin(t *testing.T) {
	future, err := os.ReadFile(filepath.Join("..", "..", "state", "testdata", "future", "checkpoint-v5.json"))
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	path := filepath.Join(stateDir, "cpu_manager_state")
	if err := os.WriteFile(path, future, 0o600); err != nil {
		t.Fatal(err)
	}
	sysfs := sysfsTree(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("nriSocket: "+filepath.Join(t.TempDir(), "nri.sock")+"\nstateDir: "+stateDir+
		"\nsysfsRoot: "+sysfs+"\ncgroupfsRoot: \"\"\nmetricsAddress: \"\"\nhealthAddress: \"\"\ndebugAddress: \"\"\nkubeletCheckpoint: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(pluginBinary(t), "run", "--config", cfg).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "written by a newer nri-cpumanager") {
		t.Fatalf("run on a checkpoint from the future: %v, output:\n%s\nwant exit status 1 saying a newer version wrote it", err, out)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(future) {
		t.Errorf("the checkpoint was moved or changed: %v", err)
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 1 && !(len(entries) == 2 && hasLock(entries)) {
		t.Errorf("the state directory holds %d files, want the checkpoint alone (and the lock)", len(entries))
	}
}

func hasLock(entries []os.DirEntry) bool {
	for _, e := range entries {
		if strings.Contains(e.Name(), "lock") {
			return true
		}
	}
	return false
}
