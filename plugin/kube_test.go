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

// TestHoldSettledWithTheSpecOnceTheAPIHasIt: a pod resize put back while
// the API's view lagged (UpdatePodSandbox without the pod's spec) leaves
// a stopped member the larger limit it was re-created with, so the CPU
// its sibling's decrease released stays held for the pod; once the API
// has the spec, the maintenance loop's pass records the member's limit
// and returns the CPU to the shared pool, in the checkpoint on disk too
// (make e2e-vm-kube's back-off case failed so on a loaded machine).
func TestHoldSettledWithTheSpecOnceTheAPIHasIt(t *testing.T) {
	kube := &fakeAPI{}
	p, store := newTestPluginOn(t, testPolicyOf(t, 8), func(o *Options) { o.API = kube })
	ctx := context.Background()
	podTotal := func(n int64) *api.LinuxResources {
		return &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(n * 100000), Period: api.UInt64(100000)}}
	}
	pod, steady := guaranteedCtr("gu", 1)
	steady.Name = "steady"
	pod.Linux.PodResources = podTotal(3)
	crash := &api.Container{Id: "gu-crash-1", PodSandboxId: pod.Id, Name: "crash", Linux: &api.LinuxContainer{Resources: guaranteedResources(2)}}
	for _, c := range []*api.Container{steady, crash} {
		if _, _, err := p.CreateContainer(ctx, pod, c); err != nil {
			t.Fatal(err)
		}
	}
	otherPod, other := guaranteedCtr("other", 3)
	if _, _, err := p.CreateContainer(ctx, otherPod, other); err != nil { // one free CPU left
		t.Fatal(err)
	}
	stop := func(c *api.Container) {
		t.Helper()
		c.ExitCode, c.FinishedAt = 1, 1
		if _, err := p.StopContainer(ctx, pod, c); err != nil {
			t.Fatal(err)
		}
	}
	stop(crash)
	// The pod grows (steady to 2 CPUs); crash, re-created with 4 CPUs
	// that do not fit, restarts on its 2.
	if err := p.UpdatePodSandbox(ctx, pod, nil, podTotal(4)); err != nil {
		t.Fatalf("the pod's growth: %v", err)
	}
	again := &api.Container{Id: "gu-crash-2", PodSandboxId: pod.Id, Name: "crash", Linux: &api.LinuxContainer{Resources: guaranteedResources(4)}}
	if _, _, err := p.CreateContainer(ctx, pod, again); err != nil {
		t.Fatal(err)
	}
	stop(again)
	if _, err := p.UpdateContainer(ctx, pod, steady, guaranteedResources(2)); err != nil {
		t.Fatalf("steady's growth: %v", err)
	}
	if err := p.PostUpdateContainer(ctx, pod, steady); err != nil {
		t.Fatal(err)
	}
	// Put back, the API's view lagging: steady's decrease, then the
	// pod's totals alone.
	before := p.model.CPUsOf(steady.Id)
	if _, err := p.UpdateContainer(ctx, pod, steady, guaranteedResources(1)); err != nil {
		t.Fatalf("steady's decrease: %v", err)
	}
	if err := p.PostUpdateContainer(ctx, pod, steady); err != nil {
		t.Fatal(err)
	}
	if err := p.UpdatePodSandbox(ctx, pod, nil, podTotal(3)); err != nil {
		t.Fatalf("UpdatePodSandbox without the spec: %v", err)
	}
	released := before.Difference(p.model.CPUsOf(steady.Id))
	if h, held := p.model.State.Hold(pod.Uid); released.Size() != 1 || !held || !h.CPUs.Equals(released) {
		t.Fatalf("steady %s → %s: held %v %s, want the released CPU held (crash's limit is 4 CPUs: the pod does not add up)", before, p.model.CPUsOf(steady.Id), held, h.CPUs)
	}

	p.settleHoldsWithSpec() // the API has no spec yet: nothing changes
	if _, held := p.model.State.Hold(pod.Uid); !held {
		t.Fatalf("the hold ended without the spec")
	}
	kube.mu.Lock()
	kube.spec = policy.PodSpec{"steady": boundedResources(guaranteedResources(1), nil), "crash": boundedResources(guaranteedResources(2), nil)}
	kube.mu.Unlock()
	p.settleHoldsWithSpec()
	if h, held := p.model.State.Hold(pod.Uid); held {
		t.Errorf("CPUs %s still held once the API has the spec", h.CPUs)
	}
	if !released.IsSubsetOf(p.model.SharedPool()) {
		t.Errorf("the shared pool %s should have the CPU %s steady released", p.model.SharedPool(), released)
	}
	saved, err := store.Load(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7))
	if err != nil {
		t.Fatal(err)
	}
	if h, held := saved.Hold(pod.Uid); held {
		t.Errorf("the checkpoint on disk still holds %s for the pod", h.CPUs)
	}
}
