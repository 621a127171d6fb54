package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
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
	// Group is the node's configuration group at the start, "" for none:
	// the watcher reads the group's file (Source.GroupPath) over the
	// file. SetGroup changes it.
	Group string
	// OnChange receives each new valid config that differs from the
	// current one (Diff(current, new) is not empty) or was read for
	// another group (Watcher.Group says which), and the first valid one
	// after the files were unreadable or invalid. Required.
	OnChange func(*Config)
	// OnError receives why the files could not be used (unreadable or
	// invalid, the group's missing); the current config stays. It is
	// called once per distinct bad content, not on every read. Optional.
	OnError func(error)
}

// Watcher reloads a config file, and the file of the node's group beside
// it, when their content or the group changes. It reads the files
// through their paths on every tick and compares a hash of the content,
// so it follows a Kubernetes ConfigMap mount, where the path is a symlink
// into a "..data" directory symlink that the kubelet swaps atomically.
type Watcher struct {
	path string
	opts WatchOptions

	mu    sync.Mutex
	group string        // the group SetGroup asked for
	poke  chan struct{} // a check soon: the group changed

	// Owned by the goroutine running Run (or a test calling check).
	current      *Config
	currentGroup string            // the group current was read with
	lastSeen     [sha256.Size]byte // group and content (or read errors) last looked at
	seenAny      bool
	// failed is set while the files are unreadable or invalid.
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
	if opts.Group != "" {
		if err := CheckGroupName(opts.Group); err != nil {
			return nil, fmt.Errorf("config watcher: %w", err)
		}
	}
	return &Watcher{path: path, opts: opts, current: current, group: opts.Group, currentGroup: opts.Group,
		poke: make(chan struct{}, 1)}, nil
}

// SetGroup makes group ("" for none) the node's configuration group: the
// watcher reads its file over the common one from the next check on,
// which comes at once. Safe to call from any goroutine.
func (w *Watcher) SetGroup(group string) {
	w.mu.Lock()
	changed := w.group != group
	w.group = group
	w.mu.Unlock()
	if changed {
		select {
		case w.poke <- struct{}{}:
		default:
		}
	}
}

// Group returns the group of the last config handed to OnChange (the
// start's, before any): call it from the callbacks, which run on Run's
// goroutine.
func (w *Watcher) Group() string { return w.currentGroup }

// wantedGroup returns the group SetGroup asked for last.
func (w *Watcher) wantedGroup() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.group
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
		case <-w.poke:
		}
	}
}

// check reads the files once and reports what changed since the last
// read.
func (w *Watcher) check() {
	src := Source{Path: w.path, Group: w.wantedGroup()}
	h := sha256.New()
	fmt.Fprintf(h, "group %q\n", src.Group)
	data, readErr := os.ReadFile(w.path)
	fingerprint(h, data, readErr)
	var groupData []byte
	var groupErr error
	if src.Group != "" {
		groupData, groupErr = readGroup(src)
		fingerprint(h, groupData, groupErr)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if w.seenAny && sum == w.lastSeen {
		return
	}
	w.seenAny, w.lastSeen = true, sum

	next, err := w.load(src, data, readErr, groupData, groupErr)
	if err != nil {
		w.failed = true
		w.opts.OnError(err)
		return
	}
	recovered := w.failed
	w.failed = false
	if Diff(w.current, next).Empty() && !recovered && src.Group == w.currentGroup {
		return
	}
	w.current, w.currentGroup = next, src.Group
	w.opts.OnChange(next)
}

// fingerprint adds a file's content, or its read error, to h.
func fingerprint(h interface{ Write([]byte) (int, error) }, data []byte, err error) {
	if err != nil {
		fmt.Fprintf(h, "read error: %v\n", err)
		return
	}
	fmt.Fprintf(h, "%d\n", len(data))
	h.Write(data)
}

func (w *Watcher) load(src Source, data []byte, readErr error, groupData []byte, groupErr error) (*Config, error) {
	if readErr != nil {
		return nil, fmt.Errorf("reloading config: %w; keeping the running config", readErr)
	}
	if groupErr != nil {
		return nil, fmt.Errorf("%w; keeping the running config", groupErr)
	}
	var next *Config
	var err error
	if src.Group == "" {
		next, err = Parse(data)
		if err != nil {
			err = fmt.Errorf("config file %s changed but is invalid; keeping the running config:\n%w", w.path, err)
		}
	} else if next, _, err = parseSource(src, data, groupData); err != nil {
		err = fmt.Errorf("the configuration changed but is invalid; keeping the running config: %w", err)
	}
	if err == nil && w.opts.Flags != nil {
		if next, err = w.opts.Flags.Apply(next); err != nil {
			err = fmt.Errorf("config file %s changed but is invalid; keeping the running config:\n%w", w.path, err)
		}
	}
	return next, err
}
