package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// recordingStub records the unsolicited updates sent to it.
type recordingStub struct {
	stub.Stub
	mu    sync.Mutex
	calls [][]*api.ContainerUpdate
}

func (s *recordingStub) UpdateContainers(u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, u)
	return nil, nil
}

func (s *recordingStub) sent() [][]*api.ContainerUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]*api.ContainerUpdate(nil), s.calls...)
}

// sharedCtr returns a BestEffort pod and its container.
func sharedCtr(id string) (*api.PodSandbox, *api.Container) {
	pod := &api.PodSandbox{Id: "sb-" + id, Uid: "uid-" + id, Name: id, Namespace: "ns",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/besteffort/poduid-" + id}}
	return pod, &api.Container{Id: id, PodSandboxId: pod.Id, Name: "app", Linux: &api.LinuxContainer{CgroupsPath: "/" + id}}
}

// writeCgroupCPUs writes the cpuset.cpus file of the cgroup at path below
// root, as a container's cgroup would show it.
func writeCgroupCPUs(t *testing.T, root, path, cpus string) {
	t.Helper()
	dir := filepath.Join(root, path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte(cpus+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// verifyingPlugin returns a plugin connected to s that verifies cpusets
// in the cgroup tree at root (empty), and the hook of its log.
func verifyingPlugin(t *testing.T, s stub.Stub) (p *Plugin, root string, hook *test.Hook) {
	t.Helper()
	root = t.TempDir()
	log, hook := test.NewNullLogger()
	p, _ = newTestPluginWith(t, func(o *Options) { o.CgroupfsRoot = root; o.Log = log })
	connected(t, p, s)
	return p, root, hook
}

// connected makes p synchronized with an empty runtime and connected to s.
func connected(t *testing.T, p *Plugin, s stub.Stub) {
	t.Helper()
	if _, err := p.Synchronize(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.conn.stub = s
	p.mu.Unlock()
}

// TestUnsolicitedUpdatesWaitForAQuietRuntime: the shared containers'
// growth after removals goes out only once the runtime delivered no event
// for SendDelay, as one update with one entry per container, however many
// events made it pending.
func TestUnsolicitedUpdatesWaitForAQuietRuntime(t *testing.T) {
	// Removals 20 ms apart against a SendDelay of 300 ms: a busy machine
	// would have to stall the test for 280 ms to open a quiet gap.
	const delay = 300 * time.Millisecond
	p, _ := newTestPluginWith(t, func(o *Options) { o.SendDelay = delay })
	rec := &recordingStub{}
	connected(t, p, rec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.sendLoop(ctx)

	spod, sctr := sharedCtr("s")
	if _, _, err := p.CreateContainer(ctx, spod, sctr); err != nil {
		t.Fatal(err)
	}
	// Three pods of a pinned container removed without a stop, 20 ms apart: each
	// makes the shared container's growth pending.
	for _, id := range []string{"a", "b", "c"} {
		pod, ctr := guaranteedCtr(id, 1)
		if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for _, id := range []string{"a", "b", "c"} {
		pod, _ := guaranteedCtr(id, 1)
		if err := p.RemovePodSandbox(ctx, pod); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if calls := rec.sent(); len(calls) != 0 && time.Since(start) < delay {
			t.Fatalf("sent %d unsolicited updates while events kept coming", len(calls))
		}
	}
	waitUntil(t, "an unsolicited update", 5*time.Second, func() bool { return len(rec.sent()) > 0 })
	waitUntil(t, "nothing left to send", 5*time.Second, func() bool { return nothingToSend(p) })
	calls := rec.sent()
	if len(calls) != 1 || len(calls[0]) != 1 || calls[0][0].GetContainerId() != "s" ||
		calls[0][0].GetLinux().GetResources().GetCpu().GetCpus() != "0-3" {
		t.Fatalf("unsolicited updates %v; want one, growing s to 0-3", calls)
	}
}

// TestPendingUpdatesRideOnReplies: a pending growth goes out with the next
// event's reply, and not on its own.
func TestPendingUpdatesRideOnReplies(t *testing.T) {
	p, _ := newTestPluginWith(t, func(o *Options) { o.SendDelay = 100 * time.Millisecond })
	rec := &recordingStub{}
	connected(t, p, rec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.sendLoop(ctx)

	spod, sctr := sharedCtr("s")
	if _, _, err := p.CreateContainer(ctx, spod, sctr); err != nil {
		t.Fatal(err)
	}
	pod, ctr := guaranteedCtr("a", 2)
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	if err := p.RemovePodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod2, ctr2 := guaranteedCtr("b", 1)
	_, updates, err := p.CreateContainer(ctx, pod2, ctr2)
	if err != nil {
		t.Fatal(err)
	}
	if len(updates) != 1 || updates[0].GetContainerId() != "s" || updates[0].GetLinux().GetResources().GetCpu().GetCpus() != "0,2-3" {
		t.Fatalf("reply %v; want s on 0,2-3", updates)
	}
	if !nothingToSend(p) {
		t.Fatal("an update is still pending, though the reply carried it")
	}
	if calls := rec.sent(); len(calls) != 0 {
		t.Errorf("sent %v unsolicited, though the reply carried the update", calls)
	}
}

// TestVerifyDeclaresDriftOnlyAgainstWhatWasApplied: a cgroup read that
// still shows the cpuset a container ran on before a reply is no drift
// until the runtime delivered a later event (it applies a reply's updates
// of other containers before the next event); after that it is, once.
// A container whose cgroup does not exist yet is neither.
func TestVerifyDeclaresDriftOnlyAgainstWhatWasApplied(t *testing.T) {
	rec := &recordingStub{}
	p, root, hook := verifyingPlugin(t, rec)
	ctx := context.Background()
	spod, sctr := sharedCtr("s")
	if _, _, err := p.CreateContainer(ctx, spod, sctr); err != nil {
		t.Fatal(err)
	}
	writeCgroupCPUs(t, root, "s", "0-3")
	p.verify(false)
	pod, ctr := guaranteedCtr("a", 2)
	ctr.Linux.CgroupsPath = "/a" // its cgroup is not there: not started yet
	_, updates, err := p.CreateContainer(ctx, pod, ctr)
	if err != nil || len(updates) != 1 {
		t.Fatalf("create: %v %v", updates, err)
	}
	// The runtime has not applied the shrink of s yet.
	p.verify(false)
	p.verify(true)
	warnings := func() int { return len(driftWarnings(hook)) }
	if n := warnings(); n != 0 {
		t.Fatalf("%d drift warnings before the runtime could have applied the reply: %v", n, hook.LastEntry())
	}
	if err := p.PostCreateContainer(ctx, pod, ctr); err != nil { // a later event: the reply landed
		t.Fatal(err)
	}
	p.verify(false)
	if n := warnings(); n != 1 || hook.LastEntry().Message != "container cpuset differs from what the runtime was given; re-sending" {
		t.Fatalf("after the next event, s still on 0-3: %d warnings, last %v", n, hook.LastEntry())
	}
	for _, e := range hook.AllEntries() {
		if e.Level <= logrus.WarnLevel && e.Data["id"] == "a" {
			t.Errorf("a warning about a, whose cgroup does not exist yet: %s %v", e.Message, e.Data)
		}
	}
	p.mu.Lock()
	pending := p.ledger.pending["s"]
	p.mu.Unlock()
	if !pending {
		t.Error("the drifted container is not pending")
	}
}

// TestEmptyCpusetBeforeTheStartIsNotDrift: on cgroup v2 a container's
// cgroup exists with an empty cpuset.cpus (its parent's CPUs) from the
// moment runc creates it until runc writes the cpuset, before the start: a
// read meanwhile is no drift. After the start an empty cpuset.cpus was
// cleared by someone else, and a cpuset never handed is drift either way.
func TestEmptyCpusetBeforeTheStartIsNotDrift(t *testing.T) {
	tests := []struct {
		name      string
		started   bool   // PostStartContainer came before the reads
		text      string // what cpuset.cpus holds at the reads
		written   bool   // runc writes the cpuset handed after the reads
		wantDrift bool
	}{
		{"created, cpuset not written yet", false, "", false, false},
		{"created, cpuset written later", false, "", true, false},
		{"started, cpuset cleared by hand", true, "", false, true},
		{"created, a cpuset never handed", false, "0", false, true}, // the reserved CPU
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, root, hook := verifyingPlugin(t, &recordingStub{})
			// A cgroup v2 tree: no cpuset hierarchy below the root.
			if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset cpu memory\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			pod, ctr := guaranteedCtr("a", 2)
			ctr.Linux.CgroupsPath = "/kubepods/poduid-a/a"
			adj, _, err := p.CreateContainer(ctx, pod, ctr)
			if err != nil {
				t.Fatal(err)
			}
			given := adj.GetLinux().GetResources().GetCpu().GetCpus()
			if tc.started {
				writeCgroupCPUs(t, root, ctr.Linux.CgroupsPath, given)
				if err := p.PostStartContainer(ctx, pod, ctr); err != nil {
					t.Fatal(err)
				}
				p.verify(false)
			}
			writeCgroupCPUs(t, root, ctr.Linux.CgroupsPath, tc.text)
			p.verify(false)
			p.verify(true)
			p.verify(true)
			if tc.written {
				writeCgroupCPUs(t, root, ctr.Linux.CgroupsPath, given)
				p.verify(false)
				p.mu.Lock()
				due := p.ledger.views["a"].due
				p.mu.Unlock()
				if due {
					t.Errorf("still due for a read after the cgroup showed %s, the cpuset handed", given)
				}
			}
			warned := driftWarnings(hook)
			p.mu.Lock()
			pending := p.ledger.pending["a"]
			p.mu.Unlock()
			switch {
			case !tc.wantDrift && (len(warned) != 0 || pending):
				t.Errorf("cpuset.cpus %q read before the start: %d drift warnings (%v), pending %v; want none",
					tc.text, len(warned), warned, pending)
			case tc.wantDrift && (len(warned) != 1 || warned[0].Data["actual"] != tc.text || !pending):
				t.Errorf("cpuset.cpus %q, started %v: drift warnings %v, pending %v; want one with actual=%q, pending",
					tc.text, tc.started, warned, pending, tc.text)
			}
		})
	}
}

// TestReadBeforeAConfirmationIsNotDrift: a cgroup read that began before
// the runtime applied a resize's target, and is judged after
// PostUpdateContainer confirmed it, shows the old cpuset: that is no drift.
func TestReadBeforeAConfirmationIsNotDrift(t *testing.T) {
	p, root, hook := verifyingPlugin(t, &recordingStub{})
	ctx := context.Background()
	pod, ctr := guaranteedCtr("a", 1)
	ctr.Linux.CgroupsPath = "/a"
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	writeCgroupCPUs(t, root, "a", "1")
	p.verify(false)
	ctr.Linux.Resources.Cpu.Cpus = "1"
	if _, err := p.UpdateContainer(ctx, pod, ctr, &api.LinuxResources{
		Cpu: &api.LinuxCPU{Shares: api.UInt64(2048), Quota: api.Int64(200000), Period: api.UInt64(100000)}}); err != nil {
		t.Fatal(err)
	}
	probes, seq := p.probes(nil, filepath.Clean(p.cgroups.cpusetRoot()), false)
	read := p.readCgroups(&verifier{}, probes) // before the runtime applied the target
	if err := p.PostUpdateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	p.judgeReads(probes, read, seq, false)
	for _, e := range driftWarnings(hook) {
		t.Errorf("warning: %s %v", e.Message, e.Data)
	}
	p.mu.Lock()
	due := p.ledger.views["a"].due
	p.mu.Unlock()
	if !due {
		t.Error("the container is not due for another read")
	}
}

// TestUpdateHandedBeforeStartIsSentAgain: containerd applies an update of a
// container that is not running yet to its spec only, which the task being
// started may have read already; so a cpuset handed to a container between
// its creation and its start goes out again after PostStartContainer, and
// a cgroup read showing the creation cpuset meanwhile is no drift. A
// container started before it was handed a cpuset gets nothing more.
func TestUpdateHandedBeforeStartIsSentAgain(t *testing.T) {
	tests := []struct {
		name        string
		synchronize bool // s existed, created not started, when the plugin connected
		startFirst  bool // s started before the pinned container's reply
		wantResend  bool
	}{
		{"handed between creation and start", false, false, true},
		{"created before the plugin connected", true, false, true},
		{"started before it was handed", false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			log, hook := test.NewNullLogger()
			p, _ := newTestPluginWith(t, func(o *Options) {
				o.CgroupfsRoot, o.Log, o.SendDelay = root, log, 20*time.Millisecond
			})
			rec := &recordingStub{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			spod, sctr := sharedCtr("s")
			if tc.synchronize {
				sctr.State = api.ContainerState_CONTAINER_CREATED
				sctr.Linux.Resources = &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-3"}}
				if _, err := p.Synchronize(ctx, []*api.PodSandbox{spod}, []*api.Container{sctr}); err != nil {
					t.Fatal(err)
				}
				p.mu.Lock()
				p.conn.stub = rec
				p.mu.Unlock()
			} else {
				connected(t, p, rec)
				if _, _, err := p.CreateContainer(ctx, spod, sctr); err != nil {
					t.Fatal(err)
				}
			}
			writeCgroupCPUs(t, root, "s", "0-3")
			if tc.startFirst {
				if err := p.PostStartContainer(ctx, spod, sctr); err != nil {
					t.Fatal(err)
				}
			}
			pod, ctr := guaranteedCtr("a", 1)
			_, updates, err := p.CreateContainer(ctx, pod, ctr)
			if err != nil || len(updates) != 1 || updates[0].GetContainerId() != "s" {
				t.Fatalf("create: reply %v, %v; want an update of s", updates, err)
			}
			shrunk := updates[0].GetLinux().GetResources().GetCpu().GetCpus()
			go p.sendLoop(ctx)
			if err := p.PostCreateContainer(ctx, pod, ctr); err != nil {
				t.Fatal(err)
			}
			if !tc.startFirst {
				// The runtime put the reply in s's spec only: s runs on 0-3.
				if err := p.PostStartContainer(ctx, spod, sctr); err != nil {
					t.Fatal(err)
				}
				p.verify(false)
				for _, e := range driftWarnings(hook) {
					t.Errorf("drift warning before the re-send landed: %s %v", e.Message, e.Data)
				}
			}
			p.mu.Lock()
			kept := p.ledger.views["s"].spec
			p.mu.Unlock()
			if !kept.IsEmpty() {
				t.Errorf("the creation cpuset %s is still kept after the start (a shared one is a whole pool)", kept)
			}
			if tc.wantResend {
				waitUntil(t, "the re-send", 5*time.Second, func() bool { return len(rec.sent()) > 0 })
			}
			waitUntil(t, "nothing left to send", 5*time.Second, func() bool { return nothingToSend(p) })
			calls := rec.sent()
			switch {
			case !tc.wantResend && len(calls) != 0:
				t.Errorf("sent %v unsolicited, though s was running when handed its cpuset", calls)
			case tc.wantResend && (len(calls) != 1 || len(calls[0]) != 1 || calls[0][0].GetContainerId() != "s" ||
				calls[0][0].GetLinux().GetResources().GetCpu().GetCpus() != shrunk):
				t.Errorf("unsolicited updates %v; want one, s on %s again", calls, shrunk)
			}
		})
	}
}

// driftWarnings returns the drift warnings logged so far (or worse).
func driftWarnings(hook *test.Hook) []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level <= logrus.WarnLevel && strings.Contains(e.Message, "differs from") {
			out = append(out, e)
		}
	}
	return out
}

// TestNoSpinWhileDisconnected: updates pending when the runtime goes away
// wait for the next Synchronize, which sends every container its cpuset;
// the sender does not spin meanwhile. (It re-armed a zero timer for as
// long as the runtime was away: 1.4 s of CPU per 2 s.)
func TestNoSpinWhileDisconnected(t *testing.T) {
	p, _ := newTestPluginWith(t, func(o *Options) { o.SendDelay, o.SendMaxDelay = 10*time.Millisecond, 20*time.Millisecond })
	connected(t, p, &recordingStub{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spod, sctr := sharedCtr("s")
	if _, _, err := p.CreateContainer(ctx, spod, sctr); err != nil {
		t.Fatal(err)
	}
	pod, ctr := guaranteedCtr("a", 1)
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	if err := p.RemovePodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	pending := len(p.ledger.pending)
	p.mu.Unlock()
	if pending == 0 {
		t.Fatal("the removal left nothing pending: the test would prove nothing")
	}
	p.disconnected()
	go p.sendLoop(ctx)
	p.mu.Lock()
	p.setPending("s") // wakes the sender
	p.mu.Unlock()

	before := cpuTime(t)
	time.Sleep(1500 * time.Millisecond)
	if used := cpuTime(t) - before; used > 300*time.Millisecond {
		t.Errorf("the process used %s of CPU in 1.5 s while disconnected with updates pending", used)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ledger.pending) != 0 {
		t.Errorf("still pending while disconnected: %v", p.ledger.pending)
	}
}

// nothingToSend reports whether the sender has nothing left to send:
// nothing pending and no unsolicited update in flight. The sender sends
// only what is pending, so nothing will go out until an event makes
// something pending again.
func nothingToSend(p *Plugin) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ledger.pending) == 0 && p.ledger.sendDone == nil
}

// cpuTime returns the CPU time the process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hangingStub never answers an unsolicited update until its connection
// is closed; then the call fails, as a ttrpc call on a closed connection
// does.
type hangingStub struct {
	stub.Stub
	closed chan struct{}
}

func (s *hangingStub) UpdateContainers([]*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	<-s.closed
	return nil, errors.New("ttrpc: closed")
}

// TestUnsolicitedUpdateHasADeadline: a runtime that does not answer an
// unsolicited update within UnsolicitedTimeout gets its connection
// closed (the plugin then dials again and synchronizes); the update is
// due again, and the CPUs it lent come back once the call has returned.
func TestUnsolicitedUpdateHasADeadline(t *testing.T) {
	p, _ := newTestPluginWith(t, func(o *Options) { o.UnsolicitedTimeout = 50 * time.Millisecond })
	hang := &hangingStub{closed: make(chan struct{})}
	connected(t, p, hang)
	var drops atomic.Int32
	p.mu.Lock()
	p.conn.drop = func() {
		if drops.Add(1) == 1 {
			close(hang.closed)
		}
	}
	p.mu.Unlock()
	ctx := context.Background()
	spod, sctr := sharedCtr("s")
	if _, _, err := p.CreateContainer(ctx, spod, sctr); err != nil {
		t.Fatal(err)
	}
	pod, ctr := guaranteedCtr("a", 1)
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	if err := p.RemovePodSandbox(ctx, pod); err != nil { // the shared container's growth is pending
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ledger.lastEvent, p.ledger.pendingSince = time.Now().Add(-time.Hour), time.Now().Add(-time.Hour) // the runtime is quiet
	p.mu.Unlock()
	if p.sendPending() {
		t.Fatal("an update the runtime never answered counts as delivered")
	}
	if drops.Load() != 1 {
		t.Errorf("the connection was dropped %d times, want once", drops.Load())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.model.Lending.IsEmpty() || !p.ledger.pending["s"] {
		t.Errorf("after the timeout: lending %s, s pending %v; want nothing lent and s due again", p.model.Lending, p.ledger.pending["s"])
	}
}
