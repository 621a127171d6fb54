package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// The tests below run the plugin's command, as the DaemonSet does, and
// check that the kubelet's probes and the NRI link survive what a tenant
// or a busy node does to them.

// wantProbesOK fails unless the kubelet's exec probes, live and ready,
// answer yes within 1 s each.
func wantProbesOK(t *testing.T, pp *pluginProcess, when string) {
	t.Helper()
	for _, kind := range []string{"live", "ready"} {
		if ok, out := pp.probe(kind); !ok {
			t.Errorf("%s: probe %s said no: %s", when, kind, out)
		}
	}
}

// TestProbesAnswerWhatever holds the ports: the kubelet's exec probes ask
// the plugin's probe socket, which nothing on the network reaches, so
// they answer while the plugin's ports are held in every shape the issue
// found (8 connections from the node's own address, the kubelet's
// prober's source; two other sources taking every slot) and while a
// flood of connections hits the metrics port; the metrics port still
// serves a scrape from a source that holds nothing.
func TestProbesAnswerWhatever(t *testing.T) {
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4}
	rt := fakeruntime.New(t, cpusOf(t, spec))
	pp := startProcess(t, rt, processConfig{sysfsRoot: sysfsTree(t, spec), stateDir: t.TempDir(), metrics: true, healthOverHTTP: true})
	for _, tc := range []struct {
		name    string
		sources []string
		per     int
	}{
		{"the node's address holds 8 connections", []string{"127.0.0.1"}, 8},
		{"two sources hold every slot", []string{"127.0.0.2", "127.0.0.3"}, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, address := range []string{pp.metrics, pp.health} {
				for _, source := range tc.sources {
					holdConnections(t, address, source, tc.per)
				}
			}
			wantProbesOK(t, pp, tc.name)
			if _, err := pp.scrapeFrom("127.0.0.9"); err != nil {
				t.Errorf("a scrape from another source while %s: %v", tc.name, err)
			}
		})
	}
	t.Run("a flood of connections against the metrics port", func(t *testing.T) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if c, err := net.Dial("tcp", pp.metrics); err == nil {
						_, _ = fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: plugin\r\n\r\n")
						_ = c.Close()
					}
				}
			})
		}
		for range 10 {
			wantProbesOK(t, pp, "during a flood of connections against the metrics port")
		}
		close(stop)
		wg.Wait()
	})
}

// holdConnections opens n connections from source to address at once and
// keeps each in the middle of its request's header (the server cannot
// close them before its header timeout) until the test ends.
func holdConnections(t *testing.T, address, source string, n int) {
	t.Helper()
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	for range n {
		c, err := dialer.Dial("tcp", address)
		if err != nil {
			t.Fatalf("dialing %s from %s: %v", address, source, err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\n")
	}
}

// TestSynchronizesWithinTwoSecondsOfTheRuntimesReturn: while containerd
// is away, the plugin dials its socket every half second rather than
// backing off, so that it synchronizes within 2 s of containerd's return,
// however long containerd was away, and says so once in its log.
func TestSynchronizesWithinTwoSecondsOfTheRuntimesReturn(t *testing.T) {
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4}
	rt := fakeruntime.New(t, cpusOf(t, spec))
	pp := startProcess(t, rt, processConfig{sysfsRoot: sysfsTree(t, spec), stateDir: t.TempDir()})

	rt.StopContainerd()
	// 12 s away: an exponential backoff from 500 ms would wait 8 s more
	// before its next dial.
	time.Sleep(12 * time.Second)
	syncs := rt.Syncs()
	rt.StartContainerd()
	back := time.Now()
	for rt.Syncs() == syncs {
		if time.Since(back) > 2*time.Second {
			t.Fatalf("the plugin did not synchronize within 2 s of containerd's return\n%s", pp.tail(20))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(pp.logLines("cannot reach the NRI socket")); n != 1 {
		t.Errorf("the log says %d times that the socket cannot be reached, want once per outage", n)
	}
}

// TestRedialsAContainerdThatDropsConnectionsWhileStarting: containerd
// dying during its start (restarted by systemd, a new socket each time)
// accepts the plugin's connection and drops it before registering it,
// five times; then it stays. The plugin dials again within half a second
// of each drop, rather than backing off as from a socket that keeps
// failing, and synchronizes within 2 s of containerd's return.
func TestRedialsAContainerdThatDropsConnectionsWhileStarting(t *testing.T) {
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4}
	rt := fakeruntime.New(t, cpusOf(t, spec))
	pp := startProcess(t, rt, processConfig{sysfsRoot: sysfsTree(t, spec), stateDir: t.TempDir()})

	rt.StopContainerd()
	for i := range 5 {
		// A containerd that starts, accepts the plugin and dies: a new
		// socket at the same path.
		l, err := net.Listen("unix", rt.Socket())
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan net.Conn, 1)
		go func() {
			if c, err := l.Accept(); err == nil {
				accepted <- c
			}
		}()
		select {
		case c := <-accepted:
			_ = c.Close()
		case <-time.After(5 * time.Second):
			t.Fatalf("the plugin did not dial containerd's start %d within 5 s\n%s", i+1, pp.tail(20))
		}
		_ = l.Close() // (removes the socket file)
	}
	syncs := rt.Syncs()
	rt.StartContainerd()
	back := time.Now()
	for rt.Syncs() == syncs {
		if time.Since(back) > 2*time.Second {
			t.Fatalf("the plugin did not synchronize within 2 s of containerd's return after five dropped connections\n%s", pp.tail(40))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLateSynchronizeKeepsTheConnection: containerd may hold a connected
// plugin's Synchronize while creations and removals are in flight; the
// plugin waits for it (12 s here, past the configure watchdog's 10 s)
// instead of dropping the connection and dialing again.
func TestLateSynchronizeKeepsTheConnection(t *testing.T) {
	// Twelve seconds of waiting, beside TestLoad (which is why both run in
	// parallel, after the package's other tests).
	t.Parallel()
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4}
	rt := fakeruntime.New(t, cpusOf(t, spec))
	pp := startProcess(t, rt, processConfig{sysfsRoot: sysfsTree(t, spec), stateDir: t.TempDir()})

	rt.DelaySync(12 * time.Second)
	syncs := rt.Syncs()
	rt.RestartContainerd()
	deadline := time.Now().Add(30 * time.Second)
	for rt.Syncs() == syncs {
		if time.Now().After(deadline) {
			t.Fatalf("a Synchronize 12 s late never completed in 30 s\n%s", pp.tail(20))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// NRI relays events to the plugin once its Synchronize has returned
	// and it is registered: Syncs counts the Synchronize before that.
	rt.BlockPluginSync().Unblock()
	if lines := pp.logLines("did not configure the connection"); len(lines) > 0 {
		t.Errorf("the watchdog dropped a connection the runtime had configured: %q", lines)
	}
	rt.DelaySync(0)
	sb := pod(t, rt, "after", "guaranteed")
	wantCPUs(t, rt, mustCreate(t, rt, sb, "app", guaranteed(1)), "1")
}

// TestProbesAnswerWhileTheDiskStalls: a checkpoint write stalled on a
// frozen file system (fsfreeze on a loop-mounted ext4) holds the plugin's
// lock, yet /healthz and /readyz answer 200 at once: a slow disk is not a
// reason to restart the plugin.
func TestProbesAnswerWhileTheDiskStalls(t *testing.T) {
	mnt := frozenCapableMount(t)
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4}
	rt := fakeruntime.New(t, cpusOf(t, spec))
	pp := startProcess(t, rt, processConfig{sysfsRoot: sysfsTree(t, spec), stateDir: filepath.Join(mnt, "state"), metrics: true})
	sb := pod(t, rt, "stalled", "guaranteed")

	thaw := freeze(t, mnt)
	created := make(chan error, 1)
	go func() {
		_, err := rt.CreateContainer(sb, "app", guaranteed(1))
		created <- err
	}()
	// The creation is stuck in the checkpoint write, with the lock held.
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-created:
		t.Fatalf("the creation returned (%v) while the state file system was frozen: nothing was stalled", err)
	default:
	}
	wantProbesOK(t, pp, "while a checkpoint write waits for a frozen disk")
	thaw()
	select {
	case err := <-created:
		if err != nil {
			t.Fatalf("the creation once the disk thawed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the creation did not complete within 10 s of the thaw")
	}
}

// TestReadyTellsTheDropOfAStalledPlugin: a checkpoint write stalled on a
// frozen file system under a creation holds the plugin's lock past the
// runtime's request timeout; the runtime drops the plugin (and fails the
// creation: the plugin's failure policy). From that moment readiness is
// false — /readyz answers 503 and nri_cpumanager_ready is 0 within a
// second of the drop, while the handler still waits for the disk — and
// checkpoint_write_in_progress_seconds tells the stall (the probe, over
// its socket, answers no at once: it does not wait for the lock). Once the disk
// thaws, the plugin reconnects and is ready again.
func TestReadyTellsTheDropOfAStalledPlugin(t *testing.T) {
	mnt := frozenCapableMount(t)
	// containerd's request timeout (TestMain raises it for a starved CI
	// machine): the drop comes 2 s into the stall.
	adaptation.SetPluginRequestTimeout(2 * time.Second)
	t.Cleanup(func() { adaptation.SetPluginRequestTimeout(10 * time.Second) })
	spec := fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4}
	rt := fakeruntime.New(t, cpusOf(t, spec))
	pp := startProcess(t, rt, processConfig{sysfsRoot: sysfsTree(t, spec), stateDir: filepath.Join(mnt, "state"), metrics: true})
	sb := pod(t, rt, "stalled", "guaranteed")
	syncs := rt.Syncs()

	thaw := freeze(t, mnt)
	created := make(chan error, 1)
	go func() {
		_, err := rt.CreateContainer(sb, "app", guaranteed(1))
		created <- err
	}()
	var dropped time.Time
	select {
	case err := <-created:
		dropped = time.Now()
		t.Logf("the creation failed: %v", err)
		if err == nil {
			t.Fatal("the creation succeeded while the plugin's checkpoint write was stalled: nothing was dropped")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the runtime did not time the stalled creation out within 20 s")
	}
	for {
		ready, _ := pp.probe("ready")
		m, err := pp.scrape()
		if !ready && err == nil && m["nri_cpumanager_ready{}"] == 0 {
			if stall := m["nri_cpumanager_checkpoint_write_in_progress_seconds{}"]; stall < 1 {
				t.Errorf("checkpoint_write_in_progress_seconds = %v while a write has been stalled for seconds", stall)
			}
			break
		}
		if time.Since(dropped) > time.Second {
			t.Fatalf("a second after the runtime dropped the plugin: probe ready %v, ready %v (%v); want no and 0\n%s", ready, m["nri_cpumanager_ready{}"], err, pp.tail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
	thaw()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ready, _ := pp.probe("ready")
		m, err := pp.scrape()
		if ready && err == nil && m["nri_cpumanager_ready{}"] == 1 && rt.Syncs() > syncs &&
			m["nri_cpumanager_checkpoint_write_in_progress_seconds{}"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after the thaw: probe ready %v, ready %v (%v), synchronized again %v\n%s", ready, m["nri_cpumanager_ready{}"], err, rt.Syncs() > syncs, pp.tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// frozenCapableMount mounts a fresh ext4 file system from a loop device
// and returns its mount point; it skips the test where the machine cannot
// (no root, no loop device, no mkfs.ext4).
func frozenCapableMount(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount", "fsfreeze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing (e2fsprogs, util-linux): %v", tool, err)
		}
	}
	img := filepath.Join(t.TempDir(), "state.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 32<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("this machine cannot mount a loop device: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("fsfreeze", "-u", mnt).Run()
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	return mnt
}

// freeze freezes the file system at mnt and returns the function that
// thaws it, which the test's cleanup calls too (a frozen file system must
// never outlive the test).
func freeze(t *testing.T, mnt string) (thaw func()) {
	t.Helper()
	if out, err := exec.Command("fsfreeze", "-f", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze -f: %v\n%s", err, out)
	}
	thawed := false
	thaw = func() {
		if thawed {
			return
		}
		thawed = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "fsfreeze", "-u", mnt).CombinedOutput(); err != nil && !strings.Contains(string(out), "Invalid argument") {
			t.Errorf("fsfreeze -u: %v\n%s", err, out)
		}
	}
	t.Cleanup(thaw)
	return thaw
}
