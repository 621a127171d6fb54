package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
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
	rt := fakeruntime.New(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPlugin(t, rt, n.pol, stateDir)
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))

	// No pod UID: runs on the shared pool.
	noUID := pod(t, rt, "nouid", "guaranteed")
	rt.Locked(func() { noUID.Uid = "" })
	rt.ExpectShared(rt.NextContainerID(noUID, "app"))
	orphan := mustCreate(t, rt, noUID, "app", guaranteed(2))
	gu := pod(t, rt, "gu", "guaranteed")
	g := mustCreate(t, rt, gu, "app", guaranteed(2))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, g, "1-2")
	wantCPUs(t, rt, orphan, "0,3-7")

	// A cpuset of a hundred million CPUs in the container's payload.
	rt.Locked(func() { g.Linux.Resources.Cpu.Cpus = "0-99999999" })
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
	dup := &api.Container{Id: twin.Id, PodSandboxId: web.PodSandboxId, Name: "other",
		Linux: &api.LinuxContainer{Resources: fakeruntime.NRIResources(guaranteed(1))}}
	webPod := rt.PodOf(web)
	err := rt.Send(func(ctx context.Context, nri *adaptation.Adaptation) error {
		_, err := nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: webPod, Container: dup})
		return err
	})
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
