package state

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/cpuset"
)

// The crash test re-executes the test binary as a child that saves
// checkpoints in a loop; these variables switch it into that role.
const (
	crashChildDirEnv   = "NRI_CPUMANAGER_STATE_CRASH_CHILD_DIR"
	crashChildStartEnv = "NRI_CPUMANAGER_STATE_CRASH_CHILD_START"
	// crashChildMaxSaves stops a child the parent failed to kill.
	crashChildMaxSaves = 100000
	// crashSeed makes the kill moments reproducible.
	crashSeed = 5554
)

// crashOnline is the machine of the crash test.
var crashOnline = cpuset.New(func() []int {
	ids := make([]int, 64)
	for i := range ids {
		ids[i] = i
	}
	return ids
}()...)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildDirEnv); dir != "" {
		os.Exit(runCrashChild(dir, os.Getenv(crashChildStartEnv)))
	}
	os.Exit(m.Run())
}

// runCrashChild loads the state directory, then saves crashState(seq) for
// seq = start, start+1, … and prints each seq once its Save has returned.
func runCrashChild(dir, startText string) int {
	start, err := strconv.Atoi(startText)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad start:", err)
		return 2
	}
	st, err := NewStore(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := st.Load(crashOnline); err != nil && !errors.Is(err, ErrNoCheckpoint) {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for seq := start; seq < start+crashChildMaxSaves; seq++ {
		if err := st.Save(crashState(seq)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(os.Stdout, seq)
	}
	return 0
}

// crashState is the state with sequence number seq: its size changes with
// seq, so a torn write could not pass for a whole one. Consecutive states
// differ by a container, as the plugin's do, except that every seventh
// one renames all pods.
func crashState(seq int) *State {
	n := 1 + seq%40
	s := New(crashOnline.Difference(cpuset.New(makeRange(1, n)...)))
	for i := 1; i <= n; i++ {
		pod := fmt.Sprintf("pod-%d-%d", seq/7, i)
		s.SetAssignment(pod, "app", Assignment{Baseline: cpuset.New(i)})
		s.SetContainer(fmt.Sprintf("ctr-%d-%d", seq/7, i), ContainerRef{PodUID: pod, Name: "app"})
	}
	s.SetPodResources("seq", PodRecord{Resources: ResourceRecord{CPUShares: uint64(seq)}})
	return s
}

func makeRange(lo, hi int) []int {
	var ids []int
	for i := lo; i <= hi; i++ {
		ids = append(ids, i)
	}
	return ids
}

// TestSaveSurvivesSIGKILL kills a child that saves states in a loop at
// random moments, and checks after each kill that the directory holds a
// whole state: it loads, verifies, and is the last state the child
// confirmed or the one it was writing. A kill during a write leaves a
// temp file, which the next child's first Save removes.
func TestSaveSurvivesSIGKILL(t *testing.T) {
	iterations := 60
	if testing.Short() {
		iterations = 15
	}
	rng := rand.New(rand.NewPCG(crashSeed, crashSeed))
	dir := filepath.Join(t.TempDir(), "state")
	last := -1 // the sequence number on disk; none yet
	tempFilesSeen := 0
	for i := range iterations {
		confirmed := killChildDuringSaves(t, dir, last+1, time.Duration(rng.IntN(8000))*time.Microsecond)
		if confirmed < 0 {
			confirmed = last
		}
		if leftovers, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(leftovers) > 1 {
			t.Fatalf("iteration %d: %d temp files, want at most the one of the write the kill interrupted", i, len(leftovers))
		} else if len(leftovers) == 1 {
			tempFilesSeen++
		}

		st, err := NewStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := st.Load(crashOnline)
		if err != nil {
			t.Fatalf("iteration %d: state does not load after SIGKILL: %v", i, err)
		}
		r, ok := s.PodResources("seq")
		seq := int(r.Resources.CPUShares)
		if !ok || (seq != confirmed && seq != confirmed+1) {
			t.Fatalf("iteration %d: state holds sequence %d, want %d (confirmed) or %d (in flight)",
				i, seq, confirmed, confirmed+1)
		}
		if !s.Equal(crashState(seq)) {
			t.Fatalf("iteration %d: state with sequence %d does not hold that state", i, seq)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		checkOnlyStateFiles(t, dir)
		last = seq
	}
	t.Logf("%d kills (seed %d), %d saves; %d kills left a temp file behind",
		iterations, crashSeed, last+1, tempFilesSeen)
}

// checkOnlyStateFiles fails the test if dir holds anything but the
// checkpoint file, its spare, the lock file and at most one temp file.
func checkOnlyStateFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != CheckpointFile && e.Name() != SpareFile && e.Name() != lockFile && !strings.HasPrefix(e.Name(), tempPrefix) {
			t.Errorf("unexpected file %s in the state directory", e.Name())
		}
	}
}

// killChildDuringSaves starts a child saving from sequence start, kills it
// with SIGKILL delay after its first confirmed save, and returns the last
// sequence number it confirmed (-1 if none).
func killChildDuringSaves(t *testing.T, dir string, start int, delay time.Duration) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildDirEnv+"="+dir, crashChildStartEnv+"="+strconv.Itoa(start))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan int, crashChildMaxSaves)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if seq, err := strconv.Atoi(scanner.Text()); err == nil {
				lines <- seq
			}
		}
	}()

	last := -1
	select {
	case seq, ok := <-lines:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("child exited before its first save: %s", stderr.String())
		}
		last = seq
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child confirmed no save within 30s")
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for seq := range lines {
		last = seq
	}
	err = cmd.Wait()
	if status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !status.Signaled() {
		t.Fatalf("child was not killed (%v): %s", err, stderr.String())
	}
	return last
}
