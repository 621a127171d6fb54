package harness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// pluginStopTimeout is how long Env.Close gives a plugin after SIGTERM.
const pluginStopTimeout = 5 * time.Second

// EnvOptions configure NewEnv.
type EnvOptions struct {
	// OutputDir is the project-local directory for tools and the image
	// cache. Default: <repository root>/_output.
	OutputDir string
	// Containerd tunes the containerd; Tools and Logf are filled in.
	Containerd ContainerdOptions
	// Tools, when set, are used as they are instead of installing them
	// (a machine without apt or the Go toolchain, such as the VM suite's
	// guest, gets them from outside).
	Tools *Tools
	// Logf receives progress messages; nil discards them.
	Logf Logf
}

// Env is everything a scenario needs: the tools, a running throwaway
// containerd with the test images imported, and a CRI client to it.
type Env struct {
	Tools        *Tools
	Containerd   *Containerd
	CRI          *CRI
	ImageArchive string

	logf    Logf
	mu      sync.Mutex
	plugins []*Process
	closed  bool
	// qosDirs are the QoS cgroup parents (kubepods, …) that did not exist
	// when the Env was made: runc creates them for the first pod, and Close
	// removes them.
	qosDirs []string
}

// NewEnv installs the tools if needed, builds the images once per machine,
// starts a containerd, imports the images and connects a CRI client. On
// failure it removes what it made.
func NewEnv(ctx context.Context, opts EnvOptions) (_ *Env, err error) {
	opts.Logf = opts.Logf.orDiscard()
	out, err := resolveOutputDir(opts.OutputDir)
	if err != nil {
		return nil, err
	}
	tools := opts.Tools
	if tools == nil {
		if tools, err = Install(ctx, InstallOptions{OutputDir: out, Logf: opts.Logf}); err != nil {
			return nil, err
		}
	}
	archive, err := BuildImages(ctx, tools.Busybox, filepath.Join(out, "e2e"), opts.Logf)
	if err != nil {
		return nil, err
	}
	copts := opts.Containerd
	copts.Tools, copts.Logf = tools, opts.Logf
	ctd, err := NewContainerd(copts)
	if err != nil {
		return nil, err
	}
	env := &Env{Tools: tools, Containerd: ctd, ImageArchive: archive, logf: opts.Logf}
	if !copts.SystemdCgroup {
		// systemd makes and removes the slices of the systemd driver.
		if env.qosDirs, err = missingQoSCgroups(); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, env.Close(context.Background()))
		}
	}()
	if err := ctd.Start(ctx); err != nil {
		return nil, err
	}
	if err := ctd.ImportImages(ctx, archive); err != nil {
		return nil, err
	}
	if env.CRI, err = DialCRI(ctd.Address(), opts.Logf); err != nil {
		return nil, err
	}
	env.CRI.CgroupDriver = ctd.CgroupDriver()
	if err := env.CRI.WaitForImages(ctx, PauseImage, BusyboxImage); err != nil {
		return nil, err
	}
	return env, nil
}

// StartPlugin starts an external NRI plugin process (see StartProcess);
// LogPath defaults to <containerd dir>/<binary name>.log. Env.Close stops
// it. Pass env.Containerd.NRISocket() to the plugin in Args.
func (e *Env) StartPlugin(opts ProcessOptions) (*Process, error) {
	if opts.LogPath == "" {
		opts.LogPath = filepath.Join(e.Containerd.Dir(), filepath.Base(opts.Path)+".log")
	}
	p, err := StartProcess(opts)
	if err != nil {
		return nil, fmt.Errorf("start plugin: %w", err)
	}
	e.mu.Lock()
	e.plugins = append(e.plugins, p)
	e.mu.Unlock()
	e.logf("plugin %s running as pid %d, log %s", opts.Path, p.PID(), opts.LogPath)
	return p, nil
}

// Plugins returns the plugin processes started through StartPlugin.
func (e *Env) Plugins() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Process(nil), e.plugins...)
}

// RestartContainerd stops containerd, starts it again on the same state and
// waits until the CRI client gets answers again. Containers keep running.
func (e *Env) RestartContainerd(ctx context.Context) error {
	if err := e.Containerd.Restart(ctx); err != nil {
		return err
	}
	return e.CRI.WaitReady(ctx)
}

// Close removes every pod the CRI client created, stops the plugins and
// containerd, and removes containerd's directory, leaving no process,
// mount or file of this Env behind. It carries on past errors and returns
// them all. Read logs (containerd's, the plugins') before: they go too.
// Calls after the first do nothing.
func (e *Env) Close(ctx context.Context) error {
	e.mu.Lock()
	closed := e.closed
	e.closed = true
	e.mu.Unlock()
	if closed {
		return nil
	}
	var errs []error
	if e.CRI != nil {
		if !e.Containerd.Running() && !e.Containerd.Closed() {
			// A scenario stopped containerd; CRI needs it to remove pods.
			if err := e.Containerd.Start(ctx); err != nil {
				errs = append(errs, fmt.Errorf("restart containerd for clean-up: %w", err))
			}
		}
		if e.Containerd.Running() {
			if err := e.CRI.Cleanup(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, p := range e.Plugins() {
		if err := p.Stop(pluginStopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if err := e.Containerd.Close(); err != nil {
		errs = append(errs, err)
	}
	if e.CRI != nil {
		// Pods CRI could not remove have had their containers force-deleted
		// by Containerd.Close; their cgroups can go now.
		for _, p := range e.CRI.Pods() {
			if err := p.removeCgroups(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := e.CRI.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(e.qosDirs) - 1; i >= 0; i-- {
		// Not when another Env still has pods there (EBUSY).
		if err := os.Remove(e.qosDirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EBUSY) {
			errs = append(errs, fmt.Errorf("remove QoS cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// missingQoSCgroups returns the QoS cgroup parents of CgroupParent that do
// not exist in some cgroup hierarchy, parents first.
func missingQoSCgroups() ([]string, error) {
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, m := range mounts {
		if m.fsType != "cgroup" && m.fsType != "cgroup2" {
			continue
		}
		for _, qos := range []QOSClass{QOSGuaranteed, QOSBurstable, QOSBestEffort} {
			dir := filepath.Join(m.point, filepath.Dir(CgroupParent(qos, "x")))
			if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
				missing = append(missing, dir)
			}
		}
	}
	return missing, nil
}
