package harness

import (
	"context"
	"fmt"
	"path"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Attach returns a container someone else created (the kubelet), given its
// id as Kubernetes reports it ("containerd://<id>" or the bare id), so that
// the Container readers (Cgroup, ExecSync, CPUsAllowed, …) work on it. Its
// Pod knows the sandbox, the pod's name, namespace and UID and the pod
// cgroup; the pod is not tracked, so Cleanup leaves it alone. Resources
// stay zero: the harness did not set them.
func (c *CRI) Attach(ctx context.Context, containerID string) (*Container, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	resp, err := c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return nil, fmt.Errorf("attach to container %.12s: %w", id, err)
	}
	st := resp.GetStatus()
	labels := st.GetLabels()
	info, err := parseContainerInfo(resp.GetInfo())
	if err != nil {
		return nil, fmt.Errorf("attach to container %.12s: %w", id, err)
	}
	dir, err := CgroupDir(info.RuntimeSpec.Linux.CgroupsPath)
	if err != nil {
		return nil, fmt.Errorf("attach to container %.12s: %w", id, err)
	}
	list, err := c.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil || len(list.GetContainers()) != 1 {
		return nil, fmt.Errorf("attach to container %.12s: find its sandbox: %d found, %v", id, len(list.GetContainers()), err)
	}
	pod := &Pod{
		ID: list.GetContainers()[0].GetPodSandboxId(),
		Spec: PodSpec{
			Name:      labels[labelPodName],
			Namespace: labels[labelPodNamespace],
			UID:       labels[labelPodUID],
		},
		// Containers sit right under their pod's cgroup with either
		// driver.
		CgroupParent: path.Dir(dir),
		cri:          c,
	}
	ctr := &Container{ID: id, Name: st.GetMetadata().GetName(), Pod: pod}
	pod.Containers = []*Container{ctr}
	return ctr, nil
}
