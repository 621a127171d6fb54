package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// TestNoPoisonPills sends, through NRI, what used to make the plugin refuse
// every later request or share CPUs: a pinned-looking container without a
// pod UID (at creation and at a later Synchronize), a cpuset of a hundred
// million CPUs, a second container under a running one's pod and name, a
// creation under a running container's id, and a pod update of a pod the
// plugin does not know. Each gets its defined outcome, the runtime never
// sees a CPU in two exclusive sets (nor in an exclusive and a shared one),
// and the node goes on pinning.
func TestNoPoisonPills(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := newFakeRuntime(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPlugin(t, rt, n.pol, stateDir)
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))

	// No pod UID: runs on the shared pool.
	noUID := pod(t, rt, "nouid", "guaranteed")
	rt.mu.Lock()
	noUID.Uid = ""
	rt.mu.Unlock()
	rt.ExpectShared(rt.nextContainerID(noUID, "app"))
	orphan := mustCreate(t, rt, noUID, "app", guaranteed(2))
	gu := pod(t, rt, "gu", "guaranteed")
	g := mustCreate(t, rt, gu, "app", guaranteed(2))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, g, "1-2")
	wantCPUs(t, rt, orphan, "0,3-7")

	// A cpuset of a hundred million CPUs in the container's payload.
	rt.mu.Lock()
	g.Linux.Resources.Cpu.Cpus = "0-99999999"
	rt.mu.Unlock()
	if err := rt.UpdateContainer(g, guaranteed(3)); err != nil {
		t.Fatalf("a resize of a container reporting a huge cpuset: %v", err)
	}
	wantCPUs(t, rt, g, "1-3")

	// A twin: the older container moves to the shared pool first.
	rt.ExpectShared(g.Id) // from now on
	twin := mustCreate(t, rt, gu, "app", guaranteed(3))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, twin, "1-3")
	wantCPUs(t, rt, g, "0,4-7")
	if err := rt.UpdateContainer(g, guaranteed(4)); err == nil || !strings.Contains(err.Error(), "Infeasible: invalidContainerIDError") {
		t.Errorf("a resize of the older twin: %v", err)
	}

	// A creation under a running container's id.
	ctx, cancel := rt.ctx()
	defer cancel()
	dup := &api.Container{Id: twin.Id, PodSandboxId: web.PodSandboxId, Name: "other",
		Linux: &api.LinuxContainer{Resources: toNRIResources(guaranteed(1))}}
	rt.mu.Lock()
	_, err := rt.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: rt.pods[web.PodSandboxId], Container: dup})
	rt.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "Infeasible: invalidContainerIDError: container id "+twin.Id) {
		t.Errorf("a creation under a running container's id: %v", err)
	}

	// A pod update of a pod the plugin never saw.
	ghost := &api.PodSandbox{Id: "ghost", Uid: "ghost-uid", Name: "ghost", Namespace: "default",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/podghost-uid"}}
	if err := rt.UpdatePod(ghost, policy.PodResources{Resources: guaranteed(2)}); err != nil {
		t.Errorf("a pod update of an unknown pod: %v", err)
	}
	if _, ok := checkpointState(t, stateDir, n.topo.CPUs()).PodResources("ghost-uid"); ok {
		t.Errorf("the unknown pod's resources were stored")
	}

	// A new plugin synchronizes with all of it, and goes on pinning.
	rp.Stop()
	rp = startPlugin(t, rt, n.pol, stateDir)
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	next := mustCreate(t, rt, pod(t, rt, "next", "guaranteed"), "app", guaranteed(1))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, next, "4")
	wantCPUs(t, rt, twin, "1-3")
	wantCPUs(t, rt, orphan, "0,5-7")
	noViolations(t, rt)
}

// nextContainerID returns the id the next container the runtime creates
// will have.
func (r *fakeRuntime) nextContainerID(pod *api.PodSandbox, name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%s-%s-%d", pod.Name, name, r.nextID+1)
}
