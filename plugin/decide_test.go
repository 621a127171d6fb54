package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// newTestPlugin returns a plugin without an NRI connection on a 4-CPU
// machine with CPU 0 reserved, and its store.
func newTestPlugin(t *testing.T) (*Plugin, *state.Store) {
	t.Helper()
	return newTestPluginWith(t, func(o *Options) { o.LendWait = 300 * time.Millisecond })
}

// testPolicy is the policy of a 4-CPU machine with CPU 0 reserved.
func testPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	return testPolicyOf(t, 4)
}

// testPolicyOf is the policy of an n-CPU machine (one CPU per core) with
// CPU 0 reserved.
func testPolicyOf(t testing.TB, n int) *policy.Policy {
	t.Helper()
	var cpus []cpuallocator.CPUInfo
	for i := 0; i < n; i++ {
		cpus = append(cpus, cpuallocator.CPUInfo{ID: i, Core: i})
	}
	topo, err := cpuallocator.NewTopology(cpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := cpuallocator.NewAllocator(topo, cpuallocator.StaticPolicyOptions{}, cpuallocator.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(alloc, policy.Options{Reserved: cpuset.New(0), InPlaceResize: true})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// newTestPluginWith is newTestPlugin with options set by configure.
func newTestPluginWith(t *testing.T, configure func(*Options)) (*Plugin, *state.Store) {
	t.Helper()
	return newTestPluginOn(t, testPolicy(t), configure)
}

// newTestPluginOn is newTestPluginWith on the policy pol.
func newTestPluginOn(t *testing.T, pol *policy.Policy, configure func(*Options)) (*Plugin, *state.Store) {
	t.Helper()
	store, err := state.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	opts := Options{Log: quietLog().Logger}
	configure(&opts)
	p, err := New(pol, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, store
}

func guaranteedCtr(id string, n int64) (*api.PodSandbox, *api.Container) {
	pod := &api.PodSandbox{Id: "sb-" + id, Uid: "uid-" + id, Name: id, Namespace: "ns",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/poduid-" + id}}
	ctr := &api.Container{Id: id, PodSandboxId: pod.Id, Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(uint64(n * 1024)), Quota: api.Int64(n * 100000), Period: api.UInt64(100000)},
		Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
	}}}
	return pod, ctr
}

// lend simulates an unsolicited update in flight that carries cpus.
func lend(p *Plugin, cpus cpuset.CPUSet) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.model = p.model.Lend(cpus)
	done := make(chan struct{})
	p.ledger.sendDone = done
	return done
}

func unlend(p *Plugin, cpus cpuset.CPUSet, done chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.model = p.model.Unlend(cpus)
	p.ledger.sendDone = nil
	close(done)
}

// TestDecisionWaitsForLentCPUs: a creation that needs CPUs lent to an
// unsolicited update in flight waits for it to return and then succeeds.
func TestDecisionWaitsForLentCPUs(t *testing.T) {
	// A LendWait far beyond the 30 ms the update takes: a busy machine
	// must not turn the wait into a refusal.
	p, _ := newTestPluginWith(t, func(o *Options) { o.LendWait = 5 * time.Second })
	lent := cpuset.New(1, 2, 3)
	done := lend(p, lent)
	go func() {
		time.Sleep(30 * time.Millisecond)
		unlend(p, lent, done)
	}()
	pod, ctr := guaranteedCtr("a", 2)
	start := time.Now()
	adj, _, err := p.CreateContainer(context.Background(), pod, ctr)
	if err != nil {
		t.Fatalf("create after the update returned: %v", err)
	}
	if got := adj.GetLinux().GetResources().GetCpu().GetCpus(); got != "1-2" {
		t.Errorf("cpuset %q, want 1-2", got)
	}
	if waited := time.Since(start); waited < 30*time.Millisecond {
		t.Errorf("did not wait for the lent CPUs (%v)", waited)
	}
}

// TestDecisionRefusedWhenLentCPUsStayOut: when the update in flight does
// not return within LendWait, the request is refused as Deferred and
// nothing changes.
func TestDecisionRefusedWhenLentCPUsStayOut(t *testing.T) {
	p, _ := newTestPlugin(t)
	lent := cpuset.New(1, 2, 3)
	done := lend(p, lent)
	defer unlend(p, lent, done)
	before := p.model
	pod, ctr := guaranteedCtr("a", 2)
	start := time.Now()
	_, _, err := p.CreateContainer(context.Background(), pod, ctr)
	if err == nil || !strings.HasPrefix(err.Error(), "Deferred: allocateCPUsError:") {
		t.Fatalf("create with every free CPU lent: %v", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("gave up after %v, before LendWait", waited)
	}
	if p.model != before {
		t.Errorf("a refusal changed the model")
	}
}

// TestCommitFailureRefusesAndChangesNothing: when the checkpoint cannot be
// written, the creation fails with a clear error and the model is kept.
func TestCommitFailureRefusesAndChangesNothing(t *testing.T) {
	p, store := newTestPlugin(t)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	before := p.model
	pod, ctr := guaranteedCtr("a", 1)
	_, _, err := p.CreateContainer(context.Background(), pod, ctr)
	if err == nil || !strings.Contains(err.Error(), "cannot persist the CPU assignment") {
		t.Fatalf("create with a closed store: %v", err)
	}
	if p.model != before {
		t.Errorf("a failed commit changed the model")
	}
}

// TestCheckpointRewrittenAfterAWriteFailedLate: a write that fails after
// its rename (the fsync of the directory) leaves the refused decision in
// the file; the next commit writes the committed state again, even when
// its own decision changes nothing, so that a restart never loads CPUs
// the runtime was refused.
func TestCheckpointRewrittenAfterAWriteFailedLate(t *testing.T) {
	p, store := newTestPlugin(t)
	ctx := context.Background()
	bePod := &api.PodSandbox{Id: "sb-be", Uid: "uid-be", Name: "be", Namespace: "ns", Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/besteffort/poduid-be"}}
	be := &api.Container{Id: "be", PodSandboxId: bePod.Id, Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2)}}}}
	if _, _, err := p.CreateContainer(ctx, bePod, be); err != nil {
		t.Fatal(err)
	}
	failAfterWrite := true
	p.save = func(st *state.State) error {
		if err := store.Save(st); err != nil || !failAfterWrite {
			return err
		}
		failAfterWrite = false
		return errors.New("fsync directory: input/output error")
	}
	pod, ctr := guaranteedCtr("a", 1)
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err == nil {
		t.Fatal("a creation whose checkpoint write failed was not refused")
	}
	online := cpuset.New(0, 1, 2, 3)
	if st, err := store.Load(online); err != nil || st.NumAssignments() != 1 {
		t.Fatalf("the refused decision is not in the file (%v): the test does not model the failure", err)
	}
	// A decision that changes no state: a shared container's update to
	// the resources it has.
	before := p.model.State
	if _, err := p.UpdateContainer(ctx, bePod, be, be.Linux.Resources); err != nil {
		t.Fatal(err)
	}
	if p.model.State != before {
		t.Fatal("a shared container's update changed the state: the test needs a decision that does not")
	}
	st, err := store.Load(online)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.NumAssignments(); n != 0 {
		t.Errorf("the file still holds %d assignments after the next commit, want the committed state's 0", n)
	}
}

// TestCheckpointOfANewerVersionStopsTheStart: a checkpoint written by a
// newer nri-cpumanager (a rollback of the plugin) makes New fail, so that
// the process exits instead of rebuilding the state and losing the
// baseline CPUs, and the file stays as it was.
func TestCheckpointOfANewerVersionStopsTheStart(t *testing.T) {
	dir := t.TempDir()
	future := []byte(`{"policyName":"static","formatVersion":99,"defaultCpuSet":"0-3","checksum":1}`)
	path := filepath.Join(dir, state.CheckpointFile)
	if err := os.WriteFile(path, future, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := state.NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	_, err = New(testPolicy(t), store, Options{Log: quietLog().Logger})
	var newer *state.NewerFormatError
	if !errors.As(err, &newer) || !strings.Contains(err.Error(), "written by a newer nri-cpumanager (format 99") {
		t.Fatalf("New: %v, want the newer format refused", err)
	}
	if kept, err := os.ReadFile(path); err != nil || !bytes.Equal(kept, future) {
		t.Errorf("the checkpoint changed (%v): %s", err, kept)
	}
}

// TestRemovedContainersLeaveNoBookkeeping: after the usual stop and
// removal, the plugin keeps nothing about a container.
func TestRemovedContainersLeaveNoBookkeeping(t *testing.T) {
	p, _ := newTestPlugin(t)
	ctx := context.Background()
	pod, ctr := guaranteedCtr("a", 2)
	ctr.Linux.CgroupsPath = "/kubepods/poduid-a/a"
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	if _, err := p.StopContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	if err := p.RemoveContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.ledger.views) + len(p.ledger.pending); n != 0 {
		t.Errorf("bookkeeping left after removal: containers %v, pending %v", slices.Sorted(maps.Keys(p.ledger.views)), p.ledger.pending)
	}
}

// TestReplyDeliversAPendingTarget: a container whose update was pending
// (a failed send, drift) and that is resized gets its cpuset in the reply;
// it is no longer pending, so the sender does not send it again.
func TestReplyDeliversAPendingTarget(t *testing.T) {
	p, _ := newTestPlugin(t)
	ctx := context.Background()
	pod, ctr := guaranteedCtr("a", 1)
	if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ledger.pending[ctr.Id] = true
	p.mu.Unlock()
	ctr.Linux.Resources.Cpu.Cpus = "1"
	updates, err := p.UpdateContainer(ctx, pod, ctr, &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(2048), Quota: api.Int64(200000), Period: api.UInt64(100000)},
		Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(updates); n == 0 || updates[n-1].GetContainerId() != ctr.Id || updates[n-1].GetLinux().GetResources().GetCpu().GetCpus() != "1-2" {
		t.Fatalf("reply %v, want the target on 1-2 last", updates)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ledger.pending[ctr.Id] {
		t.Error("the resized container is still pending after its reply carried its cpuset")
	}
}

// sendBlockingStub is a stub whose unsolicited update blocks until
// released, to play events that come while it is in flight.
type sendBlockingStub struct {
	stub.Stub
	entered, release chan struct{}
}

func (s *sendBlockingStub) UpdateContainers([]*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	close(s.entered)
	<-s.release
	return nil, nil
}

// TestStopDuringASendIsNotUndone: a container stopped while an unsolicited
// update to it is in flight is not believed to run on the sent cpuset once
// the update returns.
func TestStopDuringASendIsNotUndone(t *testing.T) {
	p, _ := newTestPlugin(t)
	ctx := context.Background()
	if _, err := p.Synchronize(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	spod := &api.PodSandbox{Id: "sb-s", Uid: "uid-s", Name: "s", Namespace: "ns",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/besteffort/poduid-s"}}
	sctr := &api.Container{Id: "s", PodSandboxId: "sb-s", Name: "app", Linux: &api.LinuxContainer{CgroupsPath: "/s"}}
	if _, _, err := p.CreateContainer(ctx, spod, sctr); err != nil {
		t.Fatal(err)
	}
	epod, ectr := guaranteedCtr("e", 1)
	if _, _, err := p.CreateContainer(ctx, epod, ectr); err != nil {
		t.Fatal(err)
	}
	// The pod removed without a stop: the shared container grows unsolicited.
	if err := p.RemovePodSandbox(ctx, epod); err != nil {
		t.Fatal(err)
	}
	blocking := &sendBlockingStub{entered: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	if !p.ledger.pending["s"] {
		p.mu.Unlock()
		t.Fatal("the shared container's growth is not pending")
	}
	p.conn.stub = blocking
	p.ledger.lastEvent, p.ledger.pendingSince = time.Now().Add(-time.Hour), time.Now().Add(-time.Hour) // the runtime is quiet
	p.mu.Unlock()
	sent := make(chan bool)
	go func() { sent <- p.sendPending() }()
	<-blocking.entered
	if _, err := p.StopContainer(ctx, spod, sctr); err != nil {
		t.Fatal(err)
	}
	close(blocking.release)
	<-sent
	p.mu.Lock()
	defer p.mu.Unlock()
	if v := p.ledger.views["s"]; v != nil && v.known {
		t.Errorf("the stopped container is believed to run on %s", v.applied)
	}
}

// TestEveryHandlerSurvivesAPanic: a bug that panics in any handler (here
// a ledger that is not there) fails that request with an internal error
// naming the event, and leaves the plugin's lock free.
func TestEveryHandlerSurvivesAPanic(t *testing.T) {
	p, _ := newTestPlugin(t)
	ctx := context.Background()
	pod, ctr := guaranteedCtr("a", 1)
	for _, h := range []struct {
		event string
		call  func() error
	}{
		{"Synchronize", func() error { _, err := p.Synchronize(ctx, []*api.PodSandbox{pod}, nil); return err }},
		{"RunPodSandbox", func() error { return p.RunPodSandbox(ctx, pod) }},
		{"UpdatePodSandbox", func() error { return p.UpdatePodSandbox(ctx, pod, nil, nriResources(1024, 100000, 1)) }},
		{"StopPodSandbox", func() error { return p.StopPodSandbox(ctx, pod) }},
		{"RemovePodSandbox", func() error { return p.RemovePodSandbox(ctx, pod) }},
		{"CreateContainer", func() error { _, _, err := p.CreateContainer(ctx, pod, ctr); return err }},
		{"UpdateContainer", func() error { _, err := p.UpdateContainer(ctx, pod, ctr, nriResources(2048, 200000, 1)); return err }},
		{"PostUpdateContainer", func() error { return p.PostUpdateContainer(ctx, pod, ctr) }},
		{"PostUpdatePodSandbox", func() error { return p.PostUpdatePodSandbox(ctx, pod) }},
		{"PostCreateContainer", func() error { return p.PostCreateContainer(ctx, pod, ctr) }},
		{"PostStartContainer", func() error { return p.PostStartContainer(ctx, pod, ctr) }},
		{"StopContainer", func() error { _, err := p.StopContainer(ctx, pod, ctr); return err }},
		{"RemoveContainer", func() error { return p.RemoveContainer(ctx, pod, ctr) }},
	} {
		ledger := p.ledger
		p.ledger = nil
		err := h.call()
		p.ledger = ledger
		if want := "nri-cpumanager: internal error while handling " + h.event; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s with a panic: %v, want %q", h.event, err, want)
		}
		done := make(chan struct{})
		go func() { p.Topology(); close(done) }() // takes the lock
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("after %s's panic, the plugin's lock is still held", h.event)
		}
	}
}

// TestFailingWritesLoggedOnceAMinute: a failing disk fails every request
// (each refused, each counted); its error is logged once per distinct
// error per minute, not once per attempt onto what may be the same disk.
func TestFailingWritesLoggedOnceAMinute(t *testing.T) {
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.InfoLevel)
	p, _ := newTestPluginWith(t, func(o *Options) { o.Log = log })
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	p.writeErrors.now = func() time.Time { return now }
	failure := errors.New("write state: input/output error")
	p.save = func(*state.State) error { return failure }
	ctx := context.Background()
	errorLines := func() int {
		n := 0
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.ErrorLevel && strings.HasPrefix(e.Message, "checkpoint write failed") {
				n++
			}
		}
		return n
	}
	create := func(id string) {
		t.Helper()
		pod, ctr := guaranteedCtr(id, 1)
		if _, _, err := p.CreateContainer(ctx, pod, ctr); err == nil {
			t.Fatalf("creation %s whose checkpoint write failed was not refused", id)
		}
	}
	for i := range 10 {
		create(fmt.Sprintf("a%d", i))
	}
	if got := errorLines(); got != 1 {
		t.Errorf("%d error lines for 10 failed writes within a minute, want 1", got)
	}
	failure = errors.New("write state: no space left on device")
	create("b")
	now = now.Add(time.Minute)
	create("c")
	if got := errorLines(); got != 3 {
		t.Errorf("%d error lines after another error and a minute, want 3", got)
	}
}

// TestUnchangedStateIsNotWrittenAgain: a decision that copies the state
// and changes nothing in it (a shared container's creation, the removal
// of a container its stop already released) writes no checkpoint, and the
// file still holds the plugin's state; a decision that changes it writes.
func TestUnchangedStateIsNotWrittenAgain(t *testing.T) {
	p, store := newTestPlugin(t)
	ctx := context.Background()
	saves := 0
	p.save = func(st *state.State) error { saves++; return store.Save(st) }
	pod, ctr := guaranteedCtr("a", 1)
	bePod := &api.PodSandbox{Id: "sb-be", Uid: "uid-be", Name: "be", Namespace: "ns", Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/besteffort/poduid-be"}}
	be := &api.Container{Id: "be", PodSandboxId: bePod.Id, Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2)}}}}
	for _, step := range []struct {
		name  string
		event func() error
		saves int
	}{
		{"a pinned container's creation", func() error { _, _, err := p.CreateContainer(ctx, pod, ctr); return err }, 1},
		{"a shared container's creation", func() error { _, _, err := p.CreateContainer(ctx, bePod, be); return err }, 0},
		{"the pinned container's stop", func() error { _, err := p.StopContainer(ctx, pod, ctr); return err }, 1},
		{"its removal", func() error { return p.RemoveContainer(ctx, pod, ctr) }, 0},
	} {
		before, saved := saves, p.model.State
		if err := step.event(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.saves == 0 && p.model.State == saved {
			t.Fatalf("%s kept the state it was given: the test needs a decision that copies it", step.name)
		}
		if got := saves - before; got != step.saves {
			t.Errorf("%s wrote the checkpoint %d times, want %d", step.name, got, step.saves)
		}
		if st, err := store.Load(cpuset.New(0, 1, 2, 3)); err != nil || !st.Equal(p.model.State) {
			t.Fatalf("after %s the file does not hold the plugin's state (%v)", step.name, err)
		}
	}
}
