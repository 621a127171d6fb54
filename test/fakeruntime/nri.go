package fakeruntime

import (
	"context"

	"github.com/containerd/nri/pkg/api"
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
		return r.nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod})
	})
	r.setState(pod.Id, nriRunning)
	return err
}

func (r *Runtime) stopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	if !r.needsStopping(pod.Id) {
		return nil
	}
	err := r.timed("StopPodSandbox", func() error {
		return r.nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod})
	})
	r.setState(pod.Id, nriStopped)
	return err
}

func (r *Runtime) removePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	if !r.needsRemoval(pod.Id) {
		return nil
	}
	err := r.timed("RemovePodSandbox", func() error {
		return r.nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod})
	})
	delete(r.relayed, pod.Id)
	return err
}

func (r *Runtime) createContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) (*api.CreateContainerResponse, error) {
	var rpl *api.CreateContainerResponse
	err := r.timed("CreateContainer", func() (err error) {
		rpl, err = r.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
		return err
	})
	r.setState(c.Id, nriCreated)
	return rpl, err
}

func (r *Runtime) startContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) error {
	err := r.timed("StartContainer", func() error {
		return r.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: c})
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
		rpl, err = r.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: c})
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
		return r.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: c})
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
