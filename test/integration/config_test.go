package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// withConfig starts the plugin with n's configuration recorded, as the
// command does.
func withConfig(n *node) func(*plugin.Options) {
	return func(o *plugin.Options) {
		o.Config = assemble.Record(n.cfg, n.pol)
		o.RecordedPolicy = assemble.RecordedPolicy(n.cfg, n.topo)
		o.ReleasedPolicy = assemble.ReleasedPolicy(n.cfg, n.topo)
	}
}

// TestRestartUnderAReservationOfPinnedCPUs: a reservation changed while
// the plugin was down (a ConfigMap edit, then a rollout) that reserves a
// pinned container's CPU is not applied at start: the plugin runs on the
// configuration the checkpoint was made under, says so in
// config_pending, and applies the new one live once the container is
// gone. A growth meanwhile never takes a CPU the new configuration
// reserves beyond what the container already held.
func TestRestartUnderAReservationOfPinnedCPUs(t *testing.T) {
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}
	before := newNode(t, spec, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, before.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPluginWith(t, rt, before.pol, stateDir, withConfig(before))
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	wantCPUs(t, rt, g, "1-2")
	rp.Stop()

	after := newNode(t, spec, `reservedSystemCPUs: "0-1"`)
	rp = startPluginWith(t, rt, after.pol, stateDir, withConfig(after))
	if !rp.ConfigPending() || metricValue(t, rp, "nri_cpumanager_config_pending", nil) != 1 {
		t.Fatalf("pending %v, config_pending %v: want the new reservation waiting", rp.ConfigPending(), metricValue(t, rp, "nri_cpumanager_config_pending", nil))
	}
	wantCPUs(t, rt, g, "1-2")
	if rec, _ := checkpointState(t, stateDir, after.topo.CPUs()).ConfigRecord(); !rec.ReservedCPUs.Equals(cpuset.New(0)) {
		t.Errorf("the checkpoint records reserved CPUs %s, want the running 0", rec.ReservedCPUs)
	}
	other := mustCreate(t, rt, pod(t, rt, "other", "guaranteed"), "app", guaranteed(1))
	wantCPUs(t, rt, other, "3")

	if err := rt.RemovePod(rt.PodOf(g)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new configuration applied", func() bool { return !rp.ConfigPending() })
	if metricValue(t, rp, "nri_cpumanager_config_pending", nil) != 0 {
		t.Errorf("config_pending still 1 after the configuration was applied")
	}
	next := mustCreate(t, rt, pod(t, rt, "next", "guaranteed"), "app", guaranteed(2))
	if got, _ := rt.CPUs(next.Id); got.Contains(1) || got.Contains(0) {
		t.Errorf("a new container got %s: the now reserved CPU 1 is given out", got)
	}
	if rec, _ := checkpointState(t, stateDir, after.topo.CPUs()).ConfigRecord(); !rec.ReservedCPUs.Equals(cpuset.New(0, 1)) {
		t.Errorf("the checkpoint records reserved CPUs %s, want 0-1", rec.ReservedCPUs)
	}
	noViolations(t, rt)
}

// TestKubeletImportUnderAReservationOfPinnedCPUs: the kubelet's
// checkpoint, imported at the first start, records no configuration of
// the plugin's; its pinned container sits on CPU 1, which the plugin's
// configuration reserves. The plugin runs with CPU 1 released from the
// reservation (recorded as such in the checkpoint, and again after a
// restart), the container keeps its CPUs, no other container gets CPU 1,
// and the configuration as given applies once the container is gone.
func TestKubeletImportUnderAReservationOfPinnedCPUs(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0-1"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rt.SetChecking(false) // no plugin yet: containers get every CPU
	app := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	rt.Locked(func() { app.Linux.Resources.Cpu.Cpus = "1-2" }) // where the kubelet's static policy (reserving 0) put it
	kubelet := filepath.Join(t.TempDir(), "cpu_manager_state")
	text := `{"policyName":"static","defaultCpuSet":"0,3-7","entries":{"gu-uid":{"app":"1-2"}},"checksum":1}`
	if err := os.WriteFile(kubelet, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(stateDir string) *runningPlugin {
		return startPluginWith(t, rt, n.pol, stateDir, func(o *plugin.Options) {
			withConfig(n)(o)
			o.KubeletCheckpoint = kubelet
		})
	}
	stateDir := t.TempDir()
	rp := start(stateDir)
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	rt.SetChecking(true)
	wantReserved := func(want string) {
		t.Helper()
		rec, ok := checkpointState(t, stateDir, n.topo.CPUs()).ConfigRecord()
		if !ok || rec.ReservedCPUs.String() != want || rec.Keys["reservedSystemCPUs"] != strconv.Quote(want) {
			t.Errorf("the checkpoint records reserved CPUs %s (keys %v), want %s", rec.ReservedCPUs, rec.Keys, want)
		}
	}
	wantCPUs(t, rt, app, "1-2")
	if !rp.ConfigPending() {
		t.Errorf("the given reservation 0-1 does not wait for the container on CPU 1")
	}
	wantReserved("0")

	rp.Stop()
	rp = start(stateDir)
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	if !rp.ConfigPending() {
		t.Errorf("after a restart, the given reservation 0-1 does not wait for the container on CPU 1")
	}
	wantReserved("0")
	other := mustCreate(t, rt, pod(t, rt, "other", "guaranteed"), "app", guaranteed(1))
	wantCPUs(t, rt, other, "3")

	if err := rt.RemovePod(rt.PodOf(app)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the given configuration applied", func() bool { return !rp.ConfigPending() })
	wantReserved("0-1")
	next := mustCreate(t, rt, pod(t, rt, "next", "guaranteed"), "app", guaranteed(2))
	if got, _ := rt.CPUs(next.Id); got.Contains(0) || got.Contains(1) {
		t.Errorf("a new container got %s: the reserved CPU 1 is given out", got)
	}
	noViolations(t, rt)
}

// TestReloadThroughTheFileWatcher changes the configuration file under
// the real watcher, as a ConfigMap update does: a valid change is applied,
// a file that would not start (a stateDir that is not there) is rejected
// whole and config_rejected says so, and the file put right clears it.
func TestReloadThroughTheFileWatcher(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPluginWith(t, rt, n.pol, stateDir, withConfig(n))
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))

	path := filepath.Join(t.TempDir(), "config.yaml")
	write := func(text string) {
		t.Helper()
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // atomic, as the kubelet swaps a ConfigMap
			t.Fatal(err)
		}
	}
	base := "reservedSystemCPUs: \"0\"\nstateDir: " + stateDir + "\n"
	write(base)
	running := mustLoad(t, path)
	r := assemble.NewReloader(testLogger(t), rp.Plugin, n.topo, running)
	// The watcher's callbacks run on its goroutine; the test reads what
	// they saw through these.
	var mu sync.Mutex
	var rejected []bool
	saw := func(bad bool) {
		mu.Lock()
		defer mu.Unlock()
		rejected = append(rejected, bad)
	}
	applied := func() *config.Config {
		mu.Lock()
		defer mu.Unlock()
		return r.Applied()
	}
	lastRejected := func(n int) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(rejected) < n {
			return false, false
		}
		return rejected[len(rejected)-1], true
	}
	w, err := config.NewWatcher(path, running, config.WatchOptions{
		Interval: 10 * time.Millisecond,
		OnChange: func(next *config.Config) {
			mu.Lock()
			bad := r.Apply(next) != nil
			mu.Unlock()
			saw(bad)
		},
		OnError: func(error) { saw(true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()

	write(base + "inPlaceResize: false\n")
	waitFor(t, "inPlaceResize off", func() bool { return !applied().InPlaceResize })
	if err := rt.UpdateContainer(g, guaranteed(3)); err == nil || !strings.Contains(err.Error(), "featureDisabledError") {
		t.Errorf("resize with inPlaceResize off in the file: %v", err)
	}
	write(strings.Replace(base, stateDir, filepath.Join(stateDir, "not-mounted"), 1))
	waitFor(t, "the file rejected", func() bool { bad, ok := lastRejected(2); return ok && bad })
	if got := applied().StateDir; got != stateDir {
		t.Errorf("stateDir %s applied", got)
	}
	write(base)
	waitFor(t, "the file accepted again", func() bool { bad, ok := lastRejected(3); return ok && !bad && applied().InPlaceResize })
	cancel()
	<-done
	if err := rt.UpdateContainer(g, guaranteed(3)); err != nil {
		t.Errorf("resize with inPlaceResize back on: %v", err)
	}
	noViolations(t, rt)
}

func mustLoad(t *testing.T, path string) *config.Config {
	t.Helper()
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGroupSwitchThroughTheWatcher moves the node into a configuration
// group, as a change of its label does: the group's keys applied live
// take effect at once, a key applied at a restart (observeOnly) does not
// and the reloader says it waits (config_restart_pending); out of the
// group again, nothing waits any more.
func TestGroupSwitchThroughTheWatcher(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPluginWith(t, rt, n.pol, stateDir, withConfig(n))
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))

	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	for name, text := range map[string]string{
		"config.yaml":       "reservedSystemCPUs: \"0\"\nstateDir: " + stateDir + "\n",
		"group.canary.yaml": "inPlaceResize: false\nobserveOnly: true\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	running := mustLoad(t, path)
	r := assemble.NewReloader(testLogger(t), rp.Plugin, n.topo, running)
	type seen struct {
		group   string
		pending []string
		resize  bool
	}
	var mu sync.Mutex
	var last *seen
	var w *config.Watcher
	w, err := config.NewWatcher(path, running, config.WatchOptions{
		Interval: time.Hour, // the group's switch pokes it
		OnChange: func(next *config.Config) {
			if err := r.Apply(next); err != nil {
				t.Errorf("group %q rejected: %v", w.Group(), err)
			}
			mu.Lock()
			defer mu.Unlock()
			last = &seen{group: w.Group(), pending: r.RestartPending(), resize: r.Applied().InPlaceResize}
		},
		OnError: func(err error) { t.Errorf("watcher: %v", err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	now := func() seen {
		mu.Lock()
		defer mu.Unlock()
		if last == nil {
			return seen{group: "(nothing yet)"}
		}
		return *last
	}

	w.SetGroup("canary")
	waitFor(t, "the canary group", func() bool { return now().group == "canary" })
	if s := now(); s.resize || !slices.Equal(s.pending, []string{"observeOnly"}) {
		t.Errorf("in the canary group: inPlaceResize %v, keys waiting for a restart %q; want false (live) and observeOnly", s.resize, s.pending)
	}
	if err := rt.UpdateContainer(g, guaranteed(3)); err == nil || !strings.Contains(err.Error(), "featureDisabledError") {
		t.Errorf("resize in the canary group (inPlaceResize: false): %v", err)
	}
	wantCPUs(t, rt, g, "1-2") // pinned still: observeOnly waits for a restart

	w.SetGroup("")
	waitFor(t, "out of the group", func() bool { return now().group == "" })
	if s := now(); !s.resize || len(s.pending) != 0 {
		t.Errorf("out of the group: inPlaceResize %v, keys waiting for a restart %q; want true and none", s.resize, s.pending)
	}
	cancel()
	<-done
	noViolations(t, rt)
}
