package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// configMapDir lays out a directory the way the kubelet mounts a ConfigMap:
//
//	..2026_11_22_<n>/config.yaml   the content of one version (a file per key)
//	..data -> ..2026_11_22_<n>     swapped atomically on update
//	config.yaml -> ..data/config.yaml
type configMapDir struct {
	t       testing.TB
	dir     string
	version int
	keys    map[string]bool // the keys published last
}

func newConfigMapDir(t testing.TB, content string) *configMapDir {
	t.Helper()
	return newConfigMapDirFiles(t, map[string]string{"config.yaml": content})
}

// newConfigMapDirFiles is newConfigMapDir with a file per key of files.
func newConfigMapDirFiles(t testing.TB, files map[string]string) *configMapDir {
	t.Helper()
	m := &configMapDir{t: t, dir: t.TempDir()}
	m.publishFiles(files)
	return m
}

// path is the mounted file the plugin is pointed at.
func (m *configMapDir) path() string { return filepath.Join(m.dir, "config.yaml") }

// publish writes content as config.yaml, the only key, as publishFiles.
func (m *configMapDir) publish(content string) {
	m.t.Helper()
	m.publishFiles(map[string]string{"config.yaml": content})
}

// publishFiles writes files into a new timestamped directory and renames
// a new ..data symlink over the old one, then links a key that is new
// and unlinks one that is gone, as the kubelet's atomic writer does.
func (m *configMapDir) publishFiles(files map[string]string) {
	m.t.Helper()
	m.version++
	version := fmt.Sprintf("..2026_11_22_%02d", m.version)
	if err := os.Mkdir(filepath.Join(m.dir, version), 0o755); err != nil {
		m.t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(m.dir, version, name), []byte(content), 0o644); err != nil {
			m.t.Fatal(err)
		}
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		m.t.Fatal(err)
	}
	for name := range files {
		if !m.keys[name] {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(m.dir, name)); err != nil {
				m.t.Fatal(err)
			}
		}
	}
	for name := range m.keys {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(m.dir, name)); err != nil {
				m.t.Fatal(err)
			}
		}
	}
	m.keys = map[string]bool{}
	for name := range files {
		m.keys[name] = true
	}
}

// recorder collects a watcher's callbacks.
type recorder struct {
	mu      sync.Mutex
	configs []*Config
	errs    []error
	changed chan *Config
	failed  chan error
}

func newRecorder() *recorder {
	return &recorder{changed: make(chan *Config, 100), failed: make(chan error, 100)}
}

func (r *recorder) options(interval time.Duration, flags *Flags) WatchOptions {
	return WatchOptions{
		Interval: interval,
		Flags:    flags,
		OnChange: func(c *Config) {
			r.mu.Lock()
			r.configs = append(r.configs, c)
			r.mu.Unlock()
			r.changed <- c
		},
		OnError: func(err error) {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
			r.failed <- err
		},
	}
}

func (r *recorder) counts() (changes, errs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.configs), len(r.errs)
}

// waitTimeout bounds how long a test waits for a callback that must come;
// it is a guard against hanging, not a performance assertion.
const waitTimeout = 10 * time.Second

func waitChange(t *testing.T, r *recorder) *Config {
	t.Helper()
	select {
	case c := <-r.changed:
		return c
	case err := <-r.failed:
		t.Fatalf("watcher reported an error, want a change: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("watcher reported no change")
	}
	return nil
}

func waitError(t *testing.T, r *recorder) error {
	t.Helper()
	select {
	case err := <-r.failed:
		return err
	case c := <-r.changed:
		t.Fatalf("watcher reported a change, want an error: %+v", c)
	case <-time.After(waitTimeout):
		t.Fatal("watcher reported no error")
	}
	return nil
}

func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runWatcher starts w.Run and returns a stop function that cancels it and
// waits for it to return.
func runWatcher(t *testing.T, w *Watcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Fatal("Run did not return after its context was cancelled")
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestWatcherFollowsConfigMapSwaps(t *testing.T) {
	m := newConfigMapDir(t, "logLevel: info\n")
	current, err := Load(m.path())
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	w, err := NewWatcher(m.path(), current, r.options(5*time.Millisecond, nil))
	if err != nil {
		t.Fatal(err)
	}
	runWatcher(t, w)

	m.publish("logLevel: debug\n")
	if c := waitChange(t, r); c.LogLevel != logrus.DebugLevel {
		t.Fatalf("first swap: logLevel = %v, want debug", c.LogLevel)
	}

	// An invalid version is reported once, however many polls see it, and
	// the next valid version is compared with the last valid one.
	m.publish("logLevel: debug\npluginIndex: \"1\"\n")
	err = waitError(t, r)
	if !strings.Contains(err.Error(), `pluginIndex: "1" is not two digits`) || !strings.Contains(err.Error(), "keeping the running config") {
		t.Errorf("error = %v", err)
	}
	// Let the watcher poll the bad version many more times.
	time.Sleep(100 * time.Millisecond)

	m.publish("logLevel: debug\nalignMemory: true\n")
	c := waitChange(t, r)
	if !c.AlignMemory || c.LogLevel != logrus.DebugLevel {
		t.Errorf("after the bad version: %+v, want alignMemory and logLevel debug", c)
	}
	if changes, errs := r.counts(); changes != 2 || errs != 1 {
		t.Errorf("got %d changes and %d errors, want 2 and 1", changes, errs)
	}
}

func TestWatcherCheckSequence(t *testing.T) {
	m := newConfigMapDir(t, "logLevel: info\n")
	r := newRecorder()
	w, err := NewWatcher(m.path(), mustParse(t, "logLevel: info\n"), r.options(time.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		publish string // "" = leave the file as it is
		changes int    // cumulative OnChange calls
		errs    int    // cumulative OnError calls
	}{
		{"first look at an unchanged file", "", 0, 0},
		{"nothing new", "", 0, 0},
		{"comment only: same config", "# tuned\nlogLevel: info\n", 0, 0},
		{"valid change", "logLevel: warn\n", 1, 0},
		{"invalid", "logLevel: warn\nbogus: 1\n", 1, 1},
		{"same invalid content again", "", 1, 1},
		{"same invalid content republished", "logLevel: warn\nbogus: 1\n", 1, 1},
		{"another invalid content", "logLevel: [\n", 1, 2},
		// The running config again: reported, so that the caller knows the
		// file is usable again.
		{"back to the running config", "logLevel: warn\n", 2, 2},
		{"the first invalid content again is news", "logLevel: warn\nbogus: 1\n", 2, 3},
		{"valid again", "logLevel: error\n", 3, 3},
	}
	for _, s := range steps {
		if s.publish != "" {
			m.publish(s.publish)
		}
		w.check()
		if changes, errs := r.counts(); changes != s.changes || errs != s.errs {
			t.Fatalf("%s: %d changes, %d errors; want %d, %d", s.name, changes, errs, s.changes, s.errs)
		}
	}
	if got := r.configs[2].LogLevel; got != logrus.ErrorLevel {
		t.Errorf("last config logLevel = %v, want error", got)
	}
}

func TestWatcherNoticesAChangeBeforeItsFirstCheck(t *testing.T) {
	m := newConfigMapDir(t, "logLevel: info\n")
	current, err := Load(m.path())
	if err != nil {
		t.Fatal(err)
	}
	m.publish("logLevel: trace\n") // between the caller's Load and Run
	r := newRecorder()
	w, err := NewWatcher(m.path(), current, r.options(time.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	w.check()
	if changes, _ := r.counts(); changes != 1 || r.configs[0].LogLevel != logrus.TraceLevel {
		t.Errorf("first check: %d changes (%v), want the trace config", changes, r.configs)
	}
}

func TestWatcherReportsAMissingFileOnce(t *testing.T) {
	m := newConfigMapDir(t, "logLevel: info\n")
	r := newRecorder()
	w, err := NewWatcher(m.path(), Default(), r.options(time.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(m.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	w.check()
	w.check()
	if _, errs := r.counts(); errs != 1 {
		t.Fatalf("%d errors for a missing file, want 1", errs)
	}
	if !errors.Is(r.errs[0], os.ErrNotExist) {
		t.Errorf("error = %v, want a not-exist error", r.errs[0])
	}
	m.publish("logLevel: debug\n")
	w.check()
	if changes, _ := r.counts(); changes != 1 {
		t.Errorf("%d changes after the file came back, want 1", changes)
	}
}

func TestWatcherKeepsFlagOverrides(t *testing.T) {
	m := newConfigMapDir(t, "logLevel: info\n")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := RegisterFlags(fs)
	if err := fs.Parse([]string{"--log-level=debug", "--state-dir=/flag/state"}); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(m.path())
	if err != nil {
		t.Fatal(err)
	}
	current, err := flags.Apply(loaded)
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	w, err := NewWatcher(m.path(), current, r.options(time.Hour, flags))
	if err != nil {
		t.Fatal(err)
	}

	m.publish("logLevel: warn\nstateDir: /file/state\n")
	w.check()
	if changes, _ := r.counts(); changes != 0 {
		t.Fatalf("a change of flagged keys only gave %d changes, want 0", changes)
	}
	m.publish("logLevel: warn\nalignMemory: true\n")
	w.check()
	if changes, _ := r.counts(); changes != 1 {
		t.Fatalf("%d changes, want 1", changes)
	}
	if c := r.configs[0]; c.LogLevel != logrus.DebugLevel || c.StateDir != "/flag/state" || !c.AlignMemory {
		t.Errorf("reloaded config %+v, want flags kept and alignMemory from the file", c)
	}
}

func TestWatcherStopsWithItsContext(t *testing.T) {
	m := newConfigMapDir(t, "logLevel: info\n")
	r := newRecorder()
	w, err := NewWatcher(m.path(), mustParse(t, "logLevel: info\n"), r.options(5*time.Millisecond, nil))
	if err != nil {
		t.Fatal(err)
	}
	stop := runWatcher(t, w)
	m.publish("logLevel: debug\n")
	waitChange(t, r)
	stop() // fails the test if Run does not return

	m.publish("logLevel: error\n")
	time.Sleep(50 * time.Millisecond) // ten intervals of a watcher that should be gone
	if changes, errs := r.counts(); changes != 1 || errs != 0 {
		t.Errorf("after Run returned: %d changes, %d errors; want 1, 0", changes, errs)
	}
}

func TestWatcherWithACancelledContextDoesNothing(t *testing.T) {
	m := newConfigMapDir(t, "logLevel: debug\n")
	r := newRecorder()
	w, err := NewWatcher(m.path(), Default(), r.options(time.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.Run(ctx) // returns at once; with an hour's interval a loop would hang the test
	if changes, errs := r.counts(); changes != 0 || errs != 0 {
		t.Errorf("Run with a cancelled context: %d changes, %d errors; want none", changes, errs)
	}
}

func TestNewWatcherRequiresCallbackAndConfig(t *testing.T) {
	if _, err := NewWatcher("x", Default(), WatchOptions{}); err == nil {
		t.Error("NewWatcher without OnChange: no error")
	}
	if _, err := NewWatcher("x", nil, WatchOptions{OnChange: func(*Config) {}}); err == nil {
		t.Error("NewWatcher without a current config: no error")
	}
	w, err := NewWatcher("x", Default(), WatchOptions{OnChange: func(*Config) {}})
	if err != nil || w.opts.Interval != DefaultReloadInterval {
		t.Errorf("NewWatcher defaults: %v, interval %v", err, w.opts.Interval)
	}
}
