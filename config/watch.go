package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"time"
)

// DefaultReloadInterval is how often a Watcher reads the config file when
// WatchOptions.Interval is not set.
const DefaultReloadInterval = 2 * time.Second

// WatchOptions configure a Watcher.
type WatchOptions struct {
	// Interval between two reads of the file; DefaultReloadInterval if ≤ 0.
	Interval time.Duration
	// Flags, if not nil, are applied to every config read, so command-line
	// overrides keep winning over the file.
	Flags *Flags
	// OnChange receives each new valid config that differs from the
	// current one (Diff(current, new) is not empty), and the first valid
	// one after the file was unreadable or invalid. Required.
	OnChange func(*Config)
	// OnError receives why the file could not be used (unreadable or
	// invalid); the current config stays. It is called once per distinct
	// bad content, not on every read. Optional.
	OnError func(error)
}

// Watcher reloads a config file when its content changes. It reads the
// file through its path on every tick and compares a hash of the content,
// so it follows a Kubernetes ConfigMap mount, where the path is a symlink
// into a "..data" directory symlink that the kubelet swaps atomically.
type Watcher struct {
	path string
	opts WatchOptions

	// Owned by the goroutine running Run (or a test calling check).
	current  *Config
	lastSeen [sha256.Size]byte // content (or read error) last looked at
	seenAny  bool
	// failed is set while the file is unreadable or invalid.
	failed bool
}

// NewWatcher returns a watcher of path whose current config is current
// (the config the caller loaded from path, flags applied). A file that
// changed between that load and the first check is noticed, because the
// first check compares configs, not bytes.
func NewWatcher(path string, current *Config, opts WatchOptions) (*Watcher, error) {
	if opts.OnChange == nil {
		return nil, errors.New("config watcher: OnChange is required")
	}
	if current == nil {
		return nil, errors.New("config watcher: the current config is required")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultReloadInterval
	}
	if opts.OnError == nil {
		opts.OnError = func(error) {}
	}
	return &Watcher{path: path, opts: opts, current: current}, nil
}

// Run checks the file at once and then every interval until ctx is done.
// Callbacks run on Run's goroutine, one at a time. Run is not meant to be
// called twice.
func (w *Watcher) Run(ctx context.Context) {
	ticker := time.NewTicker(w.opts.Interval)
	defer ticker.Stop()
	for ctx.Err() == nil {
		w.check()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// check reads the file once and reports what changed since the last read.
func (w *Watcher) check() {
	data, readErr := os.ReadFile(w.path)
	fingerprint := sha256.Sum256(data)
	if readErr != nil {
		fingerprint = sha256.Sum256([]byte("read error: " + readErr.Error()))
	}
	if w.seenAny && fingerprint == w.lastSeen {
		return
	}
	w.seenAny, w.lastSeen = true, fingerprint

	next, err := w.load(data, readErr)
	if err != nil {
		w.failed = true
		w.opts.OnError(err)
		return
	}
	recovered := w.failed
	w.failed = false
	if Diff(w.current, next).Empty() && !recovered {
		return
	}
	w.current = next
	w.opts.OnChange(next)
}

func (w *Watcher) load(data []byte, readErr error) (*Config, error) {
	if readErr != nil {
		return nil, fmt.Errorf("reloading config: %w; keeping the running config", readErr)
	}
	next, err := Parse(data)
	if err == nil && w.opts.Flags != nil {
		next, err = w.opts.Flags.Apply(next)
	}
	if err != nil {
		return nil, fmt.Errorf("config file %s changed but is invalid; keeping the running config:\n%w", w.path, err)
	}
	return next, nil
}
