package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ContainerdOptions configure NewContainerd.
type ContainerdOptions struct {
	// Tools are the installed binaries (see Install). Required.
	Tools *Tools
	// TempRoot is where the per-run directory is created. Default "/tmp".
	// Keep it short: the sockets inside must fit in 108 bytes.
	TempRoot string
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	// Default 10s.
	StopTimeout time.Duration
	// ReadyTimeout bounds how long Start waits for CRI to answer.
	// Default 2 minutes: a second or two on a machine of its own, but
	// half a minute and more in an emulated guest with busy neighbours.
	ReadyTimeout time.Duration
	// LogLevel is containerd's log level ("debug" shows NRI traffic).
	// Default: containerd's (info).
	LogLevel string
	// NRIPluginRequestTimeout and NRIPluginRegistrationTimeout override
	// containerd's NRI timeouts (2s and 5s) when non-zero.
	NRIPluginRequestTimeout      time.Duration
	NRIPluginRegistrationTimeout time.Duration
	// NRIValidator, when set, enables NRI's default validator with required
	// plugins: container creation fails while one is not registered.
	NRIValidator *NRIValidator
	// SystemdCgroup makes runc use the systemd cgroup driver (systemd must
	// be the machine's init), as kubeadm nodes run; pods must then get the
	// kubelet's systemd cgroup parents (SystemdDriver).
	SystemdCgroup bool
	// Logf receives progress messages; nil discards them.
	Logf Logf
}

// Containerd is a throwaway containerd whose configuration, state, sockets
// and log all live in one temporary directory. NRI is enabled; its socket
// is NRISocket.
type Containerd struct {
	opts   ContainerdOptions
	layout containerdLayout
	proc   *Process // nil while stopped
	starts int
	closed bool
}

// NewContainerd creates the temporary directory and the configuration of a
// containerd; Start runs it. Close removes everything.
func NewContainerd(opts ContainerdOptions) (*Containerd, error) {
	if opts.Tools == nil {
		return nil, errors.New("new containerd: Tools are required")
	}
	opts.Logf = opts.Logf.orDiscard()
	if opts.TempRoot == "" {
		opts.TempRoot = "/tmp"
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 10 * time.Second
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	dir, err := os.MkdirTemp(opts.TempRoot, "ctd-")
	if err != nil {
		return nil, fmt.Errorf("new containerd: %w", err)
	}
	layout := containerdLayout{dir: dir}
	if err := layout.checkSocketPaths(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("new containerd: %w", err)
	}
	for _, d := range []string{layout.nriSocketDir(), layout.nriPluginDir(), layout.nriPluginConfDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("new containerd: %w", err)
		}
	}
	config := layout.render(containerdSettings{
		logLevel:                     opts.LogLevel,
		nriPluginRequestTimeout:      opts.NRIPluginRequestTimeout,
		nriPluginRegistrationTimeout: opts.NRIPluginRegistrationTimeout,
		nriValidator:                 opts.NRIValidator,
		systemdCgroup:                opts.SystemdCgroup,
	})
	if err := os.WriteFile(layout.config(), []byte(config), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("new containerd: write config: %w", err)
	}
	return &Containerd{opts: opts, layout: layout}, nil
}

// Dir is the temporary directory holding everything of this containerd.
func (c *Containerd) Dir() string { return c.layout.dir }

// Address is the path of containerd's gRPC socket, which also serves CRI.
func (c *Containerd) Address() string { return c.layout.address() }

// CgroupDriver is the cgroup driver runc uses, which the kubelet's must
// match.
func (c *Containerd) CgroupDriver() CgroupDriver {
	if c.opts.SystemdCgroup {
		return SystemdDriver
	}
	return CgroupfsDriver
}

// NRISocket is the path external NRI plugins connect to. It is alone in
// its directory (NRISocketDir), which a plugin's pod can mount.
func (c *Containerd) NRISocket() string { return c.layout.nriSocket() }

// NRISocketDir is the directory holding only NRISocket.
func (c *Containerd) NRISocketDir() string { return c.layout.nriSocketDir() }

// NRIPluginDir is where containerd looks for pre-installed NRI plugins
// (<index>-<name> executables), which it starts only when it starts.
func (c *Containerd) NRIPluginDir() string { return c.layout.nriPluginDir() }

// NRIPluginConfigDir holds the drop-in configuration of pre-installed plugins.
func (c *Containerd) NRIPluginConfigDir() string { return c.layout.nriPluginConfDir() }

// ConfigPath is containerd's configuration file.
func (c *Containerd) ConfigPath() string { return c.layout.config() }

// LogPath is containerd's log file, shared by all its runs.
func (c *Containerd) LogPath() string { return c.layout.log() }

// LogTail returns the last n lines of containerd's log (all runs).
func (c *Containerd) LogTail(n int) string {
	data, err := os.ReadFile(c.layout.log())
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", c.layout.log(), err)
	}
	return tail(string(data), n)
}

// PID returns the running containerd's process id, or 0 when stopped.
func (c *Containerd) PID() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.PID()
}

// Running reports whether containerd has been started and has not exited.
func (c *Containerd) Running() bool {
	if c.proc == nil {
		return false
	}
	exited, _ := c.proc.Exited()
	return !exited
}

// Start runs containerd and waits until CRI answers and reports the runtime
// ready. On failure the error quotes the end of containerd's log.
func (c *Containerd) Start(ctx context.Context) error {
	if c.closed {
		return errors.New("start containerd: it has been closed")
	}
	if c.Running() {
		return fmt.Errorf("start containerd: already running as pid %d", c.PID())
	}
	c.starts++
	if err := appendLine(c.layout.log(), fmt.Sprintf("===== harness: containerd start #%d at %s =====", c.starts, time.Now().Format(time.RFC3339Nano))); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	bin := filepath.Dir(c.opts.Tools.Containerd)
	proc, err := StartProcess(ProcessOptions{
		Path:    c.opts.Tools.Containerd,
		Args:    []string{"--config", c.layout.config()},
		LogPath: c.layout.log(),
		// The shim is found next to containerd; runc through PATH.
		Env: []string{"PATH=" + bin + ":" + filepath.Dir(c.opts.Tools.Runc) + ":" + os.Getenv("PATH") + ":" + systemPath},
		Dir: c.layout.dir,
	})
	if err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	c.proc = proc
	readyCtx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	if err := c.waitReady(readyCtx); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	c.opts.Logf("containerd %s running as pid %d in %s", ContainerdVersion, proc.PID(), c.layout.dir)
	return nil
}

// waitReady waits until containerd's CRI service answers Version and
// reports RuntimeReady, failing early when containerd exits.
func (c *Containerd) waitReady(ctx context.Context) error {
	cri, err := DialCRI(c.layout.address(), nil)
	if err != nil {
		return err
	}
	defer cri.Close()
	var lastErr error
	err = c.proc.WaitUntil(ctx, func() (bool, error) {
		if _, err := os.Stat(c.layout.address()); err != nil {
			lastErr = err
			return false, nil
		}
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		lastErr = cri.ready(callCtx)
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for CRI on %s (last answer: %v): %w", c.layout.address(), lastErr, err)
	}
	return nil
}

// Stop sends containerd SIGTERM and waits for it to exit, killing it after
// StopTimeout. Containers keep running (their shims stay); Start brings
// containerd back on the same state.
func (c *Containerd) Stop() error {
	if c.proc == nil {
		return nil
	}
	err := c.proc.Stop(c.opts.StopTimeout)
	c.proc = nil
	if err != nil {
		return fmt.Errorf("stop containerd: %w", err)
	}
	return nil
}

// Kill sends containerd SIGKILL, as a crash would, and waits for it to exit.
func (c *Containerd) Kill() error {
	if c.proc == nil {
		return nil
	}
	err := c.proc.Kill()
	c.proc = nil
	if err != nil {
		return fmt.Errorf("kill containerd: %w", err)
	}
	return nil
}

// Restart stops containerd and starts it again on the same directories.
func (c *Containerd) Restart(ctx context.Context) error {
	if err := c.Stop(); err != nil {
		return err
	}
	return c.Start(ctx)
}

// ImportImages loads an image-layout archive (see BuildImages) into the
// k8s.io namespace, unpacked for the native snapshotter CRI uses.
func (c *Containerd) ImportImages(ctx context.Context, archive string) error {
	cmd := exec.CommandContext(ctx, c.opts.Tools.Ctr, "--address", c.layout.address(), "--namespace", "k8s.io",
		"images", "import", "--local", "--snapshotter", "native", archive)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("import images from %s: %w\n%s", archive, err, tail(string(out), 20))
	}
	return nil
}

// Closed reports whether Close has been called.
func (c *Containerd) Closed() bool { return c.closed }

// Close stops containerd and removes its temporary directory. Whatever
// the CRI clean-up left (containers still running, their shims, mounts) is
// removed first, so that nothing of this containerd stays on the machine.
// The log is gone afterwards: read LogTail before.
func (c *Containerd) Close() error {
	c.closed = true
	var errs []error
	if err := c.Stop(); err != nil {
		errs = append(errs, err)
	}
	if err := removeLeftoverContainers(c.opts.Tools.Runc, c.layout); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(c.layout.dir); err != nil {
		// Removing the directory now could delete through a mount.
		errs = append(errs, fmt.Errorf("close containerd: keeping %s: %w", c.layout.dir, err))
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(c.layout.dir); err != nil {
		errs = append(errs, fmt.Errorf("close containerd: %w", err))
	}
	return errors.Join(errs...)
}

// CheckGone returns an error naming whatever of this containerd is still on
// the machine: its process, shims serving it, mounts in its directory, the
// directory itself. It is nil after a successful Close.
func (c *Containerd) CheckGone() error {
	var errs []error
	if c.Running() {
		errs = append(errs, fmt.Errorf("containerd still running as pid %d", c.PID()))
	}
	pids, err := shimPIDs(c.layout.address())
	if err != nil {
		errs = append(errs, err)
	} else if len(pids) > 0 {
		errs = append(errs, fmt.Errorf("shims still running: pids %v", pids))
	}
	mounts, err := readMounts()
	if err != nil {
		errs = append(errs, err)
	} else if left := mountPointsUnder(mounts, c.layout.dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %s", strings.Join(left, ", ")))
	}
	if _, err := os.Stat(c.layout.dir); !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("directory %s still exists (stat: %v)", c.layout.dir, err))
	}
	return errors.Join(errs...)
}

// appendLine appends one line to the file at path.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strings.TrimRight(line, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
