package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"
)

// ContainerSpec describes a container of a pod.
type ContainerSpec struct {
	// Name is required and unique in the pod, with Attempt.
	Name string
	// Attempt counts the kubelet's re-creations of the container: a
	// container exited, the next one of its name has the next attempt.
	Attempt uint32
	// Resources are its requests and limits.
	Resources Resources
	// Image defaults to BusyboxImage.
	Image string
	// Command and Args override the image's Cmd when set.
	Command []string
	Args    []string
	// Mounts are hostPath mounts, as the kubelet passes a pod's hostPath
	// volumes to CRI.
	Mounts []Mount
	// Devices are device nodes given to the container, as the kubelet
	// passes a device plugin's DeviceSpecs to CRI.
	Devices []Device
}

// Device is a host device node given to a container.
type Device struct {
	// HostPath is the node on the host ("/dev/vdb"), ContainerPath its
	// path in the container; Permissions are cgroup's "r", "w" and "m".
	HostPath, ContainerPath, Permissions string
}

// Mount is a hostPath volume mounted into a container.
type Mount struct {
	HostPath, ContainerPath string
	ReadOnly                bool
}

// Container is a container created through a Pod.
type Container struct {
	// ID is the container id.
	ID string
	// Name is its name in the pod, Attempt its re-creation count.
	Name    string
	Attempt uint32
	// Pod is the pod it belongs to.
	Pod *Pod
	// Resources are the resources it was created with, or last updated to
	// through the harness.
	Resources Resources
}

// StartContainer creates and starts a container in the pod.
func (p *Pod) StartContainer(ctx context.Context, spec ContainerSpec) (*Container, error) {
	c, err := p.CreateContainer(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// CreateContainer creates a container in the pod without starting it, with
// its resources converted as the kubelet converts them.
func (p *Pod) CreateContainer(ctx context.Context, spec ContainerSpec) (*Container, error) {
	if spec.Name == "" {
		return nil, errors.New("create container: Name is required")
	}
	if c := p.Container(spec.Name); c != nil && c.Attempt >= spec.Attempt {
		return nil, fmt.Errorf("create container %s: the pod already has a container of that name, attempt %d", spec.Name, c.Attempt)
	}
	image := spec.Image
	if image == "" {
		image = BusyboxImage
	}
	config := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: spec.Name, Attempt: spec.Attempt},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  spec.Command,
		Args:     spec.Args,
		Mounts:   criMounts(spec.Mounts),
		Devices:  criDevices(spec.Devices),
		Labels: map[string]string{
			labelPodName:       p.Spec.Name,
			labelPodNamespace:  p.Spec.Namespace,
			labelPodUID:        p.Spec.UID,
			labelContainerName: spec.Name,
		},
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       spec.Resources.LinuxResources(),
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: p.namespaces()},
		},
	}
	resp, err := p.cri.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  p.ID,
		Config:        config,
		SandboxConfig: p.config,
	})
	if err != nil {
		return nil, fmt.Errorf("create container %s/%s with %s: %w", p.Spec.Name, spec.Name, spec.Resources, err)
	}
	c := &Container{ID: resp.GetContainerId(), Name: spec.Name, Attempt: spec.Attempt, Pod: p, Resources: spec.Resources}
	p.Containers = append(p.Containers, c)
	p.cri.logf("container %s/%s created as %.12s with %s", p.Spec.Name, spec.Name, c.ID, spec.Resources)
	return c, nil
}

// criMounts converts hostPath mounts to CRI's, private propagation as
// the kubelet's default.
func criMounts(mounts []Mount) []*runtimeapi.Mount {
	var out []*runtimeapi.Mount
	for _, m := range mounts {
		out = append(out, &runtimeapi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, Readonly: m.ReadOnly,
			Propagation: runtimeapi.MountPropagation_PROPAGATION_PRIVATE})
	}
	return out
}

// criDevices converts device nodes to CRI's.
func criDevices(devices []Device) []*runtimeapi.Device {
	var out []*runtimeapi.Device
	for _, d := range devices {
		out = append(out, &runtimeapi.Device{HostPath: d.HostPath, ContainerPath: d.ContainerPath, Permissions: d.Permissions})
	}
	return out
}

// String names the container for messages: "<pod>/<container>".
func (c *Container) String() string { return c.Pod.Spec.Name + "/" + c.Name }

// Start starts the created container.
func (c *Container) Start(ctx context.Context) error {
	if _, err := c.Pod.cri.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ID}); err != nil {
		return fmt.Errorf("start container %s: %w", c, err)
	}
	return nil
}

// Update sends UpdateContainerResources with r converted as the kubelet
// converts it; on success r becomes the container's Resources.
func (c *Container) Update(ctx context.Context, r Resources) error {
	_, err := c.Pod.cri.Runtime.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: c.ID,
		Linux:       r.LinuxResources(),
	})
	if err != nil {
		return fmt.Errorf("update container %s from %s to %s: %w", c, c.Resources, r, err)
	}
	c.Resources = r
	return nil
}

// Stop stops the container, giving it timeout after SIGTERM before SIGKILL
// (0: SIGKILL at once). The workload image's sleep ignores SIGTERM.
func (c *Container) Stop(ctx context.Context, timeout time.Duration) error {
	_, err := c.Pod.cri.Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ID, Timeout: int64(timeout / time.Second)})
	if err != nil {
		return fmt.Errorf("stop container %s: %w", c, err)
	}
	return nil
}

// Remove removes the container (stopping it first if needed) and drops it
// from the pod's list.
func (c *Container) Remove(ctx context.Context) error {
	if _, err := c.Pod.cri.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ID}); err != nil {
		return fmt.Errorf("remove container %s: %w", c, err)
	}
	c.Pod.forget(c)
	return nil
}

// Status returns the runtime's status of the container.
func (c *Container) Status(ctx context.Context) (*runtimeapi.ContainerStatus, error) {
	resp, err := c.Pod.cri.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ID})
	if err != nil {
		return nil, fmt.Errorf("status of container %s: %w", c, err)
	}
	return resp.GetStatus(), nil
}

// State returns the container's state (CONTAINER_RUNNING, …).
func (c *Container) State(ctx context.Context) (runtimeapi.ContainerState, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return runtimeapi.ContainerState_CONTAINER_UNKNOWN, err
	}
	return st.GetState(), nil
}

// containerInfo is the part of containerd's verbose container status the
// harness reads.
type containerInfo struct {
	Pid         int `json:"pid"`
	RuntimeSpec struct {
		Linux struct {
			CgroupsPath string `json:"cgroupsPath"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

// info returns containerd's verbose information about the container.
func (c *Container) info(ctx context.Context) (containerInfo, error) {
	resp, err := c.Pod.cri.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ID, Verbose: true})
	if err != nil {
		return containerInfo{}, fmt.Errorf("verbose status of container %s: %w", c, err)
	}
	return parseContainerInfo(resp.GetInfo())
}

// parseContainerInfo decodes the "info" entry of a verbose status.
func parseContainerInfo(info map[string]string) (containerInfo, error) {
	raw, ok := info["info"]
	if !ok {
		return containerInfo{}, errors.New("verbose container status has no \"info\" entry")
	}
	var ci containerInfo
	if err := json.Unmarshal([]byte(raw), &ci); err != nil {
		return containerInfo{}, fmt.Errorf("decode verbose container status: %w", err)
	}
	return ci, nil
}

// PID returns the host pid of the container's command (0 when not running).
func (c *Container) PID(ctx context.Context) (int, error) {
	ci, err := c.info(ctx)
	if err != nil {
		return 0, err
	}
	return ci.Pid, nil
}

// Cgroup returns the container's cgroup, found from the cgroups path in the
// OCI spec runc was given (so whatever a plugin adjusted is honoured).
func (c *Container) Cgroup(ctx context.Context) (*Cgroup, error) {
	ci, err := c.info(ctx)
	if err != nil {
		return nil, err
	}
	if ci.RuntimeSpec.Linux.CgroupsPath == "" {
		return nil, fmt.Errorf("container %s: its runtime spec has no cgroups path", c)
	}
	return NewCgroup(ci.RuntimeSpec.Linux.CgroupsPath)
}

// CgroupCPUs returns the CPUs the container's cgroup allows (see
// Cgroup.AllowedCPUs): its cpuset as the runtime applied it.
func (c *Container) CgroupCPUs(ctx context.Context) (cpuset.CPUSet, error) {
	cg, err := c.Cgroup(ctx)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	return cg.AllowedCPUs()
}
