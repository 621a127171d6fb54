package harness

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startShell starts /bin/sh -c script with its log in dir.
func startShell(t *testing.T, logPath, script string) *Process {
	t.Helper()
	p, err := StartProcess(ProcessOptions{Path: "/bin/sh", Args: []string{"-c", script}, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p
}

func TestProcessWaitForLogAndStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := startShell(t, filepath.Join(t.TempDir(), "plugin.log"),
		"echo starting; sleep 0.2; echo 'level=info msg=\"plugin registered\" index=90'; echo to stderr >&2; exec sleep 30")
	line, err := p.WaitForLog(ctx, regexp.MustCompile(`plugin registered`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, `index=90`) {
		t.Errorf("WaitForLog returned %q, want the whole matching line", line)
	}
	if _, err := p.WaitForLog(ctx, regexp.MustCompile(`^to stderr$`)); err != nil {
		t.Errorf("stderr is not captured: %v", err)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("process exited early")
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	exited, err := p.Exited()
	var exitErr *exec.ExitError
	if !exited || !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("after Stop: exited %v with %v, want terminated by SIGTERM", exited, err)
	}
}

func TestProcessStopKillsAfterTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := startShell(t, filepath.Join(t.TempDir(), "stubborn.log"), "trap '' TERM; echo ready; exec sleep 30")
	if _, err := p.WaitForLog(ctx, regexp.MustCompile(`^ready$`)); err != nil {
		t.Fatal(err)
	}
	err := p.Stop(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop of a process ignoring SIGTERM: %v, want an error saying it was killed", err)
	}
	if exited, _ := p.Exited(); !exited {
		t.Error("process still running after Stop")
	}
}

func TestProcessWaitForLogFailsWhenProcessExits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := startShell(t, filepath.Join(t.TempDir(), "crash.log"), "echo 'fatal: cannot connect to NRI socket'; exit 3")
	_, err := p.WaitForLog(ctx, regexp.MustCompile(`registered`))
	if err == nil {
		t.Fatal("WaitForLog succeeded for a process that exited without the line")
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "cannot connect to NRI socket") {
		t.Errorf("error %q should give the exit status and the log tail", err)
	}
}

func TestProcessWaitForLogTimeout(t *testing.T) {
	p := startShell(t, filepath.Join(t.TempDir(), "quiet.log"), "exec sleep 30")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := p.WaitForLog(ctx, regexp.MustCompile(`never`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForLog past the deadline: %v, want context.DeadlineExceeded", err)
	}
}

func TestProcessReadsOnlyItsOwnRunOfASharedLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := filepath.Join(t.TempDir(), "restarted.log")
	first := startShell(t, log, "echo synchronized")
	<-first.Done()
	second := startShell(t, log, "echo booting; exec sleep 30")
	if _, err := second.WaitForLog(ctx, regexp.MustCompile(`booting`)); err != nil {
		t.Fatal(err)
	}
	if out, _ := second.Log(); strings.Contains(out, "synchronized") {
		t.Errorf("the second run's log %q includes the first run's output", out)
	}
	mark := second.Mark()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if _, err := second.WaitForLogSince(short, mark, regexp.MustCompile(`booting`)); err == nil {
		t.Error("WaitForLogSince matched a line written before the mark")
	}
}

func TestProcessWaitUntil(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := startShell(t, filepath.Join(t.TempDir(), "cond.log"), "exec sleep 30")
	calls := 0
	err := p.WaitUntil(ctx, func() (bool, error) { calls++; return calls == 3, nil })
	if err != nil || calls != 3 {
		t.Errorf("WaitUntil: %v after %d calls, want success after 3", err, calls)
	}
	boom := errors.New("boom")
	if err := p.WaitUntil(ctx, func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("WaitUntil with a failing condition: %v, want %v", err, boom)
	}
}
