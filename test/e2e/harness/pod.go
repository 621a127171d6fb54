package harness

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The labels the kubelet puts on pod sandboxes and containers.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// PodSpec describes a pod the way the kubelet would run it: on the host
// network (no CNI needed), in the cgroup parent of its QoS class, with the
// totals of its containers' resources as pod resources.
type PodSpec struct {
	// Name is required.
	Name string
	// Namespace defaults to "default".
	Namespace string
	// UID defaults to a random UUID.
	UID string
	// Containers are what RunPod creates and starts, in order. Their
	// resources give the pod totals and, unless QOS is set, its class.
	Containers []ContainerSpec
	// Resources, when set, are the pod totals passed with the sandbox
	// instead of the sum of Containers'; a zero Resources passes none.
	Resources *Resources
	// QOS overrides the class derived from Containers, and with it the
	// cgroup parent.
	QOS QOSClass
	// Annotations are the pod's annotations, which the kubelet passes on
	// to the sandbox (and NRI to plugins).
	Annotations map[string]string
	// SharePIDNamespace puts all containers in the pod's PID namespace
	// (shareProcessNamespace: true). By default, as the kubelet does, each
	// container has its own, so /proc/1 is the container's own command.
	SharePIDNamespace bool
}

// Pod is a pod sandbox created through a CRI client.
type Pod struct {
	// ID is the sandbox id.
	ID string
	// Spec is the spec it was run with, defaults filled in.
	Spec PodSpec
	// QOS is its class; CgroupParent the matching kubelet cgroup parent.
	QOS          QOSClass
	CgroupParent string
	// Containers are the containers created through this Pod, in order.
	Containers []*Container

	cri    *CRI
	config *runtimeapi.PodSandboxConfig
}

// RunPod runs the pod sandbox and creates and starts its containers, as the
// kubelet does for a new pod. When a container fails, the pod is returned
// with the containers made so far, together with the error; it is removed by
// Cleanup either way.
func (c *CRI) RunPod(ctx context.Context, spec PodSpec) (*Pod, error) {
	pod, err := c.RunPodSandbox(ctx, spec)
	if err != nil {
		return nil, err
	}
	for _, cs := range pod.Spec.Containers {
		if _, err := pod.StartContainer(ctx, cs); err != nil {
			return pod, err
		}
	}
	return pod, nil
}

// RunPodSandbox runs only the pod sandbox of spec; see Pod.StartContainer
// and Pod.CreateContainer for its containers.
func (c *CRI) RunPodSandbox(ctx context.Context, spec PodSpec) (*Pod, error) {
	if spec.Name == "" {
		return nil, errors.New("run pod: Name is required")
	}
	if spec.Namespace == "" {
		spec.Namespace = "default"
	}
	if spec.UID == "" {
		spec.UID = newUID()
	}
	qos := spec.QOS
	if qos == "" {
		qos = QOSOf(spec.containerResources()...)
	}
	pod := &Pod{Spec: spec, QOS: qos, CgroupParent: c.CgroupDriver.CgroupParent(qos, spec.UID), cri: c}
	pod.config = &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: spec.Name, Uid: spec.UID, Namespace: spec.Namespace},
		// No Hostname: the kubelet sets none for host-network pods, which
		// share the node's UTS namespace.
		Labels: map[string]string{
			labelPodName:      spec.Name,
			labelPodNamespace: spec.Namespace,
			labelPodUID:       spec.UID,
		},
		Annotations: spec.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    pod.CgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: pod.namespaces()},
			Resources:       spec.totals(),
		},
	}
	resp, err := c.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod.config})
	if err != nil {
		// The kubelet would create the pod cgroup; runc made it for the
		// sandbox before failing, so remove it.
		pod.removeCgroups()
		return nil, fmt.Errorf("run pod %s/%s (%s): %w", spec.Namespace, spec.Name, qos, err)
	}
	pod.ID = resp.GetPodSandboxId()
	c.track(pod)
	c.logf("pod %s/%s (%s, %s) running as sandbox %.12s", spec.Namespace, spec.Name, qos, pod.CgroupParent, pod.ID)
	return pod, nil
}

// totals returns the pod totals passed with the sandbox.
func (s PodSpec) totals() *runtimeapi.LinuxContainerResources {
	switch {
	case s.Resources == nil:
		return SumResources(s.containerResources()...).LinuxResources()
	case *s.Resources == (Resources{}):
		return nil
	}
	return s.Resources.LinuxResources()
}

// containerResources lists the resources of the spec's containers.
func (s PodSpec) containerResources() []Resources {
	rs := make([]Resources, 0, len(s.Containers))
	for _, c := range s.Containers {
		rs = append(rs, c.Resources)
	}
	return rs
}

// namespaces returns the kubelet's namespace options for the pod: host
// network, pod IPC, container (or pod) PID.
func (p *Pod) namespaces() *runtimeapi.NamespaceOption {
	pid := runtimeapi.NamespaceMode_CONTAINER
	if p.Spec.SharePIDNamespace {
		pid = runtimeapi.NamespaceMode_POD
	}
	return &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_NODE,
		Pid:     pid,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
}

// Container returns the pod's container called name, its latest
// attempt, or nil.
func (p *Pod) Container(name string) *Container {
	for _, c := range slices.Backward(p.Containers) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Resources returns the pod totals of its containers' current resources.
func (p *Pod) Resources() Resources {
	rs := make([]Resources, 0, len(p.Containers))
	for _, c := range p.Containers {
		rs = append(rs, c.Resources)
	}
	return SumResources(rs...)
}

// UpdateResources sends UpdatePodSandboxResources with total as the pod's
// resources (no overhead), as the kubelet does after resizing containers.
func (p *Pod) UpdateResources(ctx context.Context, total Resources) error {
	_, err := p.cri.Runtime.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{
		PodSandboxId: p.ID,
		Resources:    total.LinuxResources(),
	})
	if err != nil {
		return fmt.Errorf("update resources of pod %s to %s: %w", p.Spec.Name, total, err)
	}
	return nil
}

// Cgroup returns the pod-level cgroup (the cgroup parent of its containers).
func (p *Pod) Cgroup() (*Cgroup, error) {
	return NewCgroup(p.CgroupParent)
}

// Stop stops the pod sandbox and all its containers.
func (p *Pod) Stop(ctx context.Context) error {
	if _, err := p.cri.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.ID}); err != nil {
		return fmt.Errorf("stop pod %s: %w", p.Spec.Name, err)
	}
	return nil
}

// Remove stops and removes the pod sandbox with its containers, then the pod
// cgroup the kubelet would remove.
// A pod the runtime no longer knows counts as removed.
func (p *Pod) Remove(ctx context.Context) error {
	if err := p.Stop(ctx); err != nil && !isNotFound(err) {
		return err
	}
	if _, err := p.cri.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.ID}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove pod %s: %w", p.Spec.Name, err)
	}
	p.cri.untrack(p)
	if err := p.removeCgroups(); err != nil {
		return fmt.Errorf("remove pod %s: %w", p.Spec.Name, err)
	}
	return nil
}

// removeCgroups removes the pod's cgroup directory from every cgroup
// hierarchy where runc created it; with the systemd driver, it stops the
// pod's slice, as the kubelet does, and systemd removes the directory.
func (p *Pod) removeCgroups() error {
	if p.cri.CgroupDriver == SystemdDriver {
		return stopSlice(filepath.Base(p.CgroupParent))
	}
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if m.fsType != "cgroup" && m.fsType != "cgroup2" {
			continue
		}
		dir := filepath.Join(m.point, p.CgroupParent)
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove pod cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// stopSlice stops a systemd slice unit; one systemd does not know (any
// more) counts as stopped.
func stopSlice(unit string) error {
	out, err := exec.Command("systemctl", "stop", unit).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "not loaded") {
		return fmt.Errorf("stop pod slice %s: %w: %s", unit, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// forget drops a container from the pod's list.
func (p *Pod) forget(c *Container) {
	p.Containers = slices.DeleteFunc(p.Containers, func(d *Container) bool { return d == c })
}

// newUID returns a random version 4 UUID, as the API server gives pods.
func newUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// isNotFound reports whether a CRI call failed because the object is gone.
func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound // also when wrapped
}
