package fakeruntime

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// nriState is a pod's or a container's state in containerd's NRI state
// map (internal/nri/nri.go); an id the map does not hold is removed.
type nriState int

const (
	nriCreated nriState = iota + 1
	nriRunning
	nriStopped
)

// The relays below are containerd 2.4's internal/nri wrapper: each sends
// an event through the NRI adaptation, or not, as the state map says, and
// updates the map as it does. They are called with mu held.
//
// The map holds pods from RunPodSandbox on, and containers from
// CreateContainer or a Synchronize on. StopContainer and StopPodSandbox
// are sent only for ids it holds as created or running, RemoveContainer
// and RemovePodSandbox for ids it holds at all.

func (r *Runtime) setState(id string, s nriState) { r.relayed[id] = s }

func (r *Runtime) needsStopping(id string) bool {
	s := r.relayed[id]
	return s == nriCreated || s == nriRunning
}

func (r *Runtime) needsRemoval(id string) bool { return r.relayed[id] != 0 }

func (r *Runtime) runPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	err := r.timed("RunPodSandbox", func() error {
		return r.nri.Load().RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod})
	})
	r.setState(pod.Id, nriRunning)
	return err
}

func (r *Runtime) stopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	if !r.needsStopping(pod.Id) {
		return nil
	}
	err := r.timed("StopPodSandbox", func() error {
		return r.nri.Load().StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod})
	})
	r.setState(pod.Id, nriStopped)
	return err
}

func (r *Runtime) removePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	if !r.needsRemoval(pod.Id) {
		return nil
	}
	err := r.timed("RemovePodSandbox", func() error {
		return r.nri.Load().RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod})
	})
	delete(r.relayed, pod.Id)
	return err
}

func (r *Runtime) createContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) (*api.CreateContainerResponse, error) {
	var rpl *api.CreateContainerResponse
	err := r.timed("CreateContainer", func() (err error) {
		rpl, err = r.nri.Load().CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
		return err
	})
	r.setState(c.Id, nriCreated)
	return rpl, err
}

func (r *Runtime) startContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) error {
	err := r.timed("StartContainer", func() error {
		return r.nri.Load().StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: c})
	})
	r.setState(c.Id, nriRunning)
	return err
}

// stopContainer also applies the reply's updates.
func (r *Runtime) stopContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) error {
	if !r.needsStopping(c.Id) {
		return nil
	}
	var rpl *api.StopContainerResponse
	err := r.timed("StopContainer", func() (err error) {
		rpl, err = r.nri.Load().StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: c})
		return err
	})
	r.setState(c.Id, nriStopped)
	if err != nil {
		return err
	}
	r.apply("post-stop", rpl.GetUpdate())
	return nil
}

// removeContainer stops the container first when the map holds it as
// created or running.
func (r *Runtime) removeContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) error {
	if !r.needsRemoval(c.Id) {
		return nil
	}
	_ = r.stopContainer(ctx, pod, c) // containerd ignores its error
	err := r.timed("RemoveContainer", func() error {
		return r.nri.Load().RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: c})
	})
	delete(r.relayed, c.Id)
	return err
}

// syncState records the containers a Synchronize lists in the map.
func (r *Runtime) syncState(ctrs []*api.Container) {
	for _, c := range ctrs {
		switch c.State {
		case api.ContainerState_CONTAINER_CREATED:
			r.setState(c.Id, nriCreated)
		case api.ContainerState_CONTAINER_RUNNING, api.ContainerState_CONTAINER_PAUSED:
			r.setState(c.Id, nriRunning)
		case api.ContainerState_CONTAINER_STOPPED:
			r.setState(c.Id, nriStopped)
		default:
			delete(r.relayed, c.Id)
		}
	}
}

// life is one life of containerd: its NRI adaptation, from its start to
// its restart.
type life struct {
	nri *adaptation.Adaptation
	// started is set by the adaptation's first Synchronize, its start's.
	started atomic.Bool
	// dead makes every request to a plugin fail as on a closed connection.
	dead atomic.Bool
}

// intercept is the ttrpc interceptor of the life's requests to plugins.
func (l *life) intercept(ctx context.Context, req *ttrpc.Request, resp *ttrpc.Response, _ *ttrpc.UnaryClientInfo, invoker ttrpc.Invoker) error {
	if l.dead.Load() {
		return ttrpc.ErrClosed
	}
	return invoker(ctx, req, resp)
}

// startNRI starts a life of containerd's NRI on the socket, with an empty
// state map. Called with mu held.
func (r *Runtime) startNRI() {
	r.t.Helper()
	l := &life{}
	nri, err := adaptation.New("fake-containerd", "2.4.2",
		func(ctx context.Context, cb adaptation.SyncCB) error { return r.synchronize(ctx, l, cb) },
		func(ctx context.Context, u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
			return r.updateContainers(ctx, l, u)
		},
		append([]adaptation.Option{
			adaptation.WithSocketPath(r.socket),
			adaptation.WithPluginPath(filepath.Join(r.dir, "plugins")),
			adaptation.WithPluginConfigPath(filepath.Join(r.dir, "conf.d")),
			adaptation.WithTTRPCOptions([]ttrpc.ClientOpts{ttrpc.WithChainUnaryClientInterceptor(l.intercept)}, nil),
		}, r.options...)...,
	)
	if err != nil {
		r.t.Fatal(err)
	}
	l.nri = nri
	r.life = l
	r.nri.Store(nri)
	r.relayed = map[string]nriState{}
	if err := nri.Start(); err != nil {
		r.t.Fatal(err)
	}
}

// stopNRI ends containerd's life: NRI stops, and every plugin's
// connection drops as the kernel closes it when containerd exits. NRI's
// Stop leaves the connections of external plugins open, so the life is
// marked dead first and a request of each kind is sent: NRI closes the
// connection of a plugin a request fails on. (A plugin subscribed to no
// event keeps its connection.) Called with mu held.
func (r *Runtime) stopNRI() {
	l := r.life
	l.dead.Store(true)
	ctx, cancel := r.ctx()
	defer cancel()
	pod := &api.PodSandbox{Id: "sandbox-gone", Linux: &api.LinuxPodSandbox{}}
	c := &api.Container{Id: "gone", PodSandboxId: pod.Id, Linux: &api.LinuxContainer{Resources: NRIResources(policy.Resources{})}}
	for _, send := range []func() error{
		func() error { return l.nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}) },
		func() error {
			_, err := l.nri.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: pod})
			return err
		},
		func() error { return l.nri.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: pod}) },
		func() error { return l.nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod}) },
		func() error { return l.nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}) },
		func() error {
			_, err := l.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
			return err
		},
		func() error {
			return l.nri.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: c})
		},
		func() error { return l.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: c}) },
		func() error {
			return l.nri.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: c})
		},
		func() error {
			_, err := l.nri.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: c})
			return err
		},
		func() error {
			return l.nri.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: c})
		},
		func() error {
			_, err := l.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: c})
			return err
		},
		func() error { return l.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: c}) },
	} {
		// A request stops at the first plugin that fails it when that
		// plugin's failure policy says so; the closed plugin is skipped
		// by the next.
		for range 64 {
			if send() == nil {
				break
			}
		}
	}
	l.nri.Stop()
}

// RestartContainerd plays containerd's restart: its NRI stops (every
// plugin's connection drops) and starts again on the same socket, with
// the same pods and containers and an empty NRI state map. So the stops
// and removals of the sandboxes run before the restart are no longer
// sent to plugins, nor the removals of the containers that had stopped
// before it; those of the containers that ran through it are. A plugin
// that connects again gets Synchronize (WaitSynced); until then, a
// container is created without a plugin's answer.
func (r *Runtime) RestartContainerd() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopNRI()
	r.startNRI()
}

// StopContainerd plays containerd stopped (StartContainerd starts it
// again): every plugin's connection drops, and nothing listens on the NRI
// socket until then.
func (r *Runtime) StopContainerd() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopNRI()
}

// StartContainerd ends StopContainerd: containerd's NRI starts again on
// the same socket, as in RestartContainerd.
func (r *Runtime) StartContainerd() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startNRI()
}

// Reboot plays the node's reboot: containerd stops, every container's
// process is gone without an NRI event (stopped, with exit code
// ExitCodeUnknown), every sandbox is not ready, and containerd starts
// again as in RestartContainerd.
func (r *Runtime) Reboot() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopNRI()
	for _, c := range r.containers {
		r.exited(c, ExitCodeUnknown)
	}
	for id := range r.pods {
		r.notReady[id] = true
	}
	r.startNRI()
}

// ExitCodeUnknown is the exit code containerd gives a container whose
// process it found gone at its start (unknownExitCode).
const ExitCodeUnknown = 255

// WaitSynced waits until plugins synchronized n times in all (Syncs) and
// the last of them gets events, and fails the test when that takes more
// than 30 s.
func (r *Runtime) WaitSynced(n int) {
	r.t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		syncs, synced := r.syncs, r.synced
		r.mu.Unlock()
		if syncs >= n {
			break
		}
		select {
		case <-synced:
		case <-timeout.C:
			r.t.Fatalf("plugins synchronized %d times in 30 s, want %d", syncs, n)
		}
	}
	r.BlockPluginSync().Unblock()
}
