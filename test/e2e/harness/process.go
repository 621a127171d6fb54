package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// ProcessOptions configure StartProcess.
type ProcessOptions struct {
	// Path is the binary to run.
	Path string
	// Args are its arguments, without the program name.
	Args []string
	// LogPath receives the process's stdout and stderr. The file is
	// appended to, so a restarted process can share it; the readers of a
	// Process only look at what this run wrote.
	LogPath string
	// Env is added to the harness's own environment.
	Env []string
	// Dir is the working directory; empty means the harness's.
	Dir string
}

// Process is a program started by the harness, with its output captured in
// a log file. It is killed if the harness process dies.
type Process struct {
	name     string
	cmd      *exec.Cmd
	logPath  string
	logStart int64
	done     chan struct{}
	waitErr  error // set before done is closed
}

// LogMark is a position in a process's log; see Process.Mark.
type LogMark int64

// StartProcess starts a program with its output going to opts.LogPath.
func StartProcess(opts ProcessOptions) (*Process, error) {
	if opts.Path == "" || opts.LogPath == "" {
		return nil, errors.New("start process: Path and LogPath are required")
	}
	log, err := os.OpenFile(opts.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", opts.Path, err)
	}
	defer log.Close() // the child keeps its own copy
	st, err := log.Stat()
	if err != nil {
		return nil, fmt.Errorf("start %s: stat log: %w", opts.Path, err)
	}
	cmd := exec.Command(opts.Path, opts.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group keeps a terminal's ^C away from it; the
		// death signal keeps it from outliving a crashed test binary.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", opts.Path, err)
	}
	p := &Process{
		name:     opts.Path,
		cmd:      cmd,
		logPath:  opts.LogPath,
		logStart: st.Size(),
		done:     make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogPath returns the file the process writes its output to.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and with what: nil for a
// zero exit status, else an *exec.ExitError.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Log returns everything this run of the process has written so far.
func (p *Process) Log() (string, error) {
	return p.logSince(LogMark(p.logStart))
}

// LogTail returns the last n lines this run has written, for error messages.
func (p *Process) LogTail(n int) string {
	out, err := p.Log()
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	return tail(out, n)
}

// Mark returns the current end of the log, so that WaitForLogSince can look
// only at lines written after it (after a resize, a reconnect, …).
func (p *Process) Mark() LogMark {
	st, err := os.Stat(p.logPath)
	if err != nil {
		return LogMark(p.logStart)
	}
	return LogMark(st.Size())
}

// WaitForLog waits until a line this run has written matches re and returns
// that line. It fails when ctx ends or the process exits first.
func (p *Process) WaitForLog(ctx context.Context, re *regexp.Regexp) (string, error) {
	return p.WaitForLogSince(ctx, LogMark(p.logStart), re)
}

// WaitForLogSince is WaitForLog for the lines written after mark.
func (p *Process) WaitForLogSince(ctx context.Context, mark LogMark, re *regexp.Regexp) (string, error) {
	var line string
	err := p.WaitUntil(ctx, func() (bool, error) {
		out, err := p.logSince(mark)
		if err != nil {
			return false, err
		}
		for _, l := range strings.Split(out, "\n") {
			if re.MatchString(l) {
				line = l
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("wait for log line matching %q: %w", re, err)
	}
	return line, nil
}

// WaitUntil polls cond until it returns true or an error. It fails when ctx
// ends or the process exits first, quoting the end of the process's log.
func (p *Process) WaitUntil(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-p.done:
			// A last look: the condition may have become true as it exited.
			if ok, err := cond(); err == nil && ok {
				return nil
			}
			return fmt.Errorf("%s exited (%v); log:\n%s", p.name, p.waitErr, p.LogTail(30))
		case <-ctx.Done():
			return fmt.Errorf("%w; %s log:\n%s", ctx.Err(), p.name, p.LogTail(30))
		case <-time.After(pollInterval):
		}
	}
}

// Signal sends sig to the process unless it has exited.
func (p *Process) Signal(sig os.Signal) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	return nil
}

// Stop sends SIGTERM and waits for the process to exit; after timeout it
// sends SIGKILL and reports that the process had to be killed.
func (p *Process) Stop(timeout time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("%s did not exit within %v of SIGTERM and was killed", p.name, timeout)
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
}

// logSince returns the log from mark to its current end.
func (p *Process) logSince(mark LogMark) (string, error) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return "", fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(int64(mark), io.SeekStart); err != nil {
		return "", fmt.Errorf("read log %s: %w", p.logPath, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("read log %s: %w", p.logPath, err)
	}
	return string(data), nil
}
