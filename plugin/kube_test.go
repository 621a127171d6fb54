package plugin

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// fakeAPI is the Kubernetes API as the plugin sees it.
type fakeAPI struct {
	mu      sync.Mutex
	spec    policy.PodSpec
	refused []string
	resized []string
	changed int
}

func (f *fakeAPI) PodInfo(string, time.Duration) (policy.PodInfo, bool) {
	return policy.PodInfo{}, false
}

func (f *fakeAPI) PodActive(string) bool { return true }

func (f *fakeAPI) ContainerSpec(string, string, int64, time.Duration) (policy.PodSpec, bool) {
	return nil, false
}

func (f *fakeAPI) PodSpec(string, int64, time.Duration) (policy.PodSpec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spec, f.spec != nil
}

func (f *fakeAPI) Refused(pod policy.Pod, container, _ string, r *policy.Refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused = append(f.refused, pod.Name+"/"+container+": "+string(r.Reason))
}

func (f *fakeAPI) Resized(pod policy.Pod, container string, before, after cpuset.CPUSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resized = append(f.resized, pod.Name+"/"+container+": "+before.String()+" → "+after.String())
}

func (f *fakeAPI) Changed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changed++
}

// TestKubernetesAPIHooks: with the API, UpdatePodSandbox decides the
// resize from the pod's spec (here one that keeps the pod's total, which
// the totals alone cannot see through: a container would move to the
// shared pool, another grow), a refusal is reported once however often
// the kubelet retries it, and an applied resize and every change of the
// exclusive CPUs are reported.
func TestKubernetesAPIHooks(t *testing.T) {
	kube := &fakeAPI{}
	p, _ := newTestPluginWith(t, func(o *Options) { o.API = kube })
	ctx := context.Background()
	pod, a := guaranteedCtr("gu", 1)
	pod.Linux.PodResources = &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(200000), Period: api.UInt64(100000)}}
	b := &api.Container{Id: "gu-b", PodSandboxId: pod.Id, Name: "b", Linux: &api.LinuxContainer{Resources: a.Linux.Resources}}
	b.Linux.Resources = guaranteedResources(1)
	for _, c := range []*api.Container{a, b} {
		if _, _, err := p.CreateContainer(ctx, pod, c); err != nil {
			t.Fatal(err)
		}
	}
	if kube.changed == 0 {
		t.Error("the creations changed the exclusive CPUs without telling the API")
	}
	total := &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048), Quota: api.Int64(200000), Period: api.UInt64(100000)}}
	kube.spec = policy.PodSpec{
		"app": {CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 1 << 30},
		"b":   policy.Resources{CPUShares: 1536, CPUQuota: 150000, CPUPeriod: 100000, MemoryLimit: 1 << 30},
	}
	for range 3 { // the kubelet's retries
		err := p.UpdatePodSandbox(ctx, pod, nil, total)
		if err == nil || !strings.Contains(err.Error(), "inconsistentCPUAllocationError: pod ns/gu's resize is refused as a whole, its containers unchanged: container app:") {
			t.Fatalf("UpdatePodSandbox with the spec: %v", err)
		}
	}
	kube.spec = nil
	if err := p.UpdatePodSandbox(ctx, pod, nil, total); err != nil {
		t.Fatalf("UpdatePodSandbox without the spec: %v", err)
	}
	if _, err := p.UpdateContainer(ctx, pod, b, guaranteedResources(2)); err != nil {
		t.Fatal(err)
	}
	kube.mu.Lock()
	defer kube.mu.Unlock()
	if len(kube.refused) != 1 || kube.refused[0] != "gu/: inconsistentCPUAllocationError" {
		t.Errorf("refusals reported %q, want one of the pod", kube.refused)
	}
	if len(kube.resized) != 1 || kube.resized[0] != "gu/b: 2 → 2-3" {
		t.Errorf("resizes reported %q, want b 2 → 2-3", kube.resized)
	}
}

// guaranteedResources are a Guaranteed container's NRI resources with n
// CPUs.
func guaranteedResources(n int64) *api.LinuxResources {
	return &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(uint64(n * 1024)), Quota: api.Int64(n * 100000), Period: api.UInt64(100000)},
		Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
	}
}
