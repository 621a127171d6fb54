package fakeruntime

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
)

// TestMain keeps the NRI libraries' logs (logrus' standard logger) out of
// the output unless -v is given.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		logrus.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}

// recorder is an NRI plugin that records the pod and container events it
// gets, one line each, and changes nothing. It connects again whenever its
// connection drops, as a plugin's daemon does.
type recorder struct {
	mu     sync.Mutex
	events []string
	// synced holds what the last Synchronize carried.
	synced struct {
		pods []*api.PodSandbox
		ctrs []*api.Container
	}
	// sandboxes holds the sandboxes RunPodSandbox carried, by id; podUpdates
	// the overhead and resources of each UpdatePodSandbox, in order.
	sandboxes  map[string]*api.PodSandbox
	podUpdates []podUpdate
}

// podUpdate is what an UpdatePodSandbox carried.
type podUpdate struct {
	pod                 string
	overhead, resources *api.LinuxResources
}

// recorders counts the recorders started, for their names.
var recorders atomic.Int32

// startRecorder connects a recorder to rt and waits until it is
// synchronized.
func startRecorder(t *testing.T, rt *Runtime) *recorder {
	t.Helper()
	rec := &recorder{}
	idx := fmt.Sprint(10 + recorders.Add(1)%90)
	syncs := rt.Syncs()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s, err := stub.New(rec, stub.WithPluginName("recorder"), stub.WithPluginIdx(idx),
				stub.WithSocketPath(rt.Socket()))
			if err != nil {
				t.Error(err)
				return
			}
			_ = s.Run(ctx) // returns when the connection drops
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond): // the reconnection's backoff
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	rt.WaitSynced(syncs + 1)
	return rec
}

func (rec *recorder) add(format string, args ...any) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.events = append(rec.events, fmt.Sprintf(format, args...))
}

// Events returns the events recorded since mark (a length of Events).
func (rec *recorder) Events(mark int) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.events[mark:])
}

// Synced returns the pods and containers of the last Synchronize.
func (rec *recorder) Synced() ([]*api.PodSandbox, []*api.Container) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.synced.pods, rec.synced.ctrs
}

// Mark returns how many events were recorded so far.
func (rec *recorder) Mark() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.events)
}

func (rec *recorder) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	var ps, cs []string
	for _, p := range pods {
		ps = append(ps, p.Id)
	}
	for _, c := range ctrs {
		cs = append(cs, c.Id)
	}
	slices.Sort(ps)
	rec.add("Synchronize pods [%s] containers [%s]", strings.Join(ps, " "), strings.Join(cs, " "))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.synced.pods, rec.synced.ctrs = pods, ctrs
	return nil, nil
}

func (rec *recorder) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	rec.add("RunPodSandbox %s", pod.Id)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.sandboxes == nil {
		rec.sandboxes = map[string]*api.PodSandbox{}
	}
	rec.sandboxes[pod.Id] = pod
	return nil
}

// Sandbox returns the sandbox RunPodSandbox carried with id (nil when none
// came).
func (rec *recorder) Sandbox(id string) *api.PodSandbox {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.sandboxes[id]
}

func (rec *recorder) UpdatePodSandbox(_ context.Context, pod *api.PodSandbox, overhead, resources *api.LinuxResources) error {
	rec.add("UpdatePodSandbox %s", pod.Id)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.podUpdates = append(rec.podUpdates, podUpdate{pod: pod.Id, overhead: overhead, resources: resources})
	return nil
}

// PodUpdates returns what every UpdatePodSandbox carried, in order.
func (rec *recorder) PodUpdates() []podUpdate {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.podUpdates)
}

func (rec *recorder) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	rec.add("StopPodSandbox %s", pod.Id)
	return nil
}

func (rec *recorder) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	rec.add("RemovePodSandbox %s", pod.Id)
	return nil
}

func (rec *recorder) CreateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	rec.add("CreateContainer %s in %s", c.Id, pod.Id)
	return nil, nil, nil
}

func (rec *recorder) StopContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) ([]*api.ContainerUpdate, error) {
	status := ""
	if c.State != api.ContainerState_CONTAINER_STOPPED || c.FinishedAt == 0 {
		status = fmt.Sprintf(" (%s, finished at %d)", c.State, c.FinishedAt)
	}
	rec.add("StopContainer %s in %s, exit code %d%s", c.Id, pod.GetId(), c.ExitCode, status)
	return nil, nil
}

func (rec *recorder) RemoveContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) error {
	rec.add("RemoveContainer %s in %s", c.Id, pod.GetId())
	return nil
}
