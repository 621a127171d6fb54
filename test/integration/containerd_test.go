package integration

import (
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestContainerdRestart restarts containerd under the plugin, which
// connects again by itself and synchronizes: every cpuset stays. A pod
// from before the restart, whose sandbox removal containerd no longer
// relays, keeps its CPUs when it is removed (the plugin cannot tell it
// from a pod whose containers crash-loop; its orphan timeout gives them
// back, policy.ExpireOrphans), and the next Synchronize, which no longer
// lists it, gives them back at once.
func TestContainerdRestart(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPlugin(t, rt, n.pol, stateDir)
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	gu := pod(t, rt, "gu", "guaranteed")
	g := mustCreate(t, rt, gu, "app", guaranteed(2))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, g, "1-2")
	wantCPUs(t, rt, web, "0,3-7")

	syncs := rt.Syncs()
	rt.RestartContainerd()
	rt.WaitSynced(syncs + 1)
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, g, "1-2")
	wantCPUs(t, rt, web, "0,3-7")

	if err := rt.RemovePod(gu); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, web, "0,3-7")
	if _, idle := rp.Snapshot().Idle["gu-uid"]; !idle {
		t.Errorf("the removed pod is not idle: %+v", rp.Snapshot().Idle)
	}
	rp.Stop()
	rp = startPlugin(t, rt, n.pol, stateDir)
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, web, "0-7")
	next := mustCreate(t, rt, pod(t, rt, "next", "guaranteed"), "app", guaranteed(2))
	wantCPUs(t, rt, next, "1-2")
	noViolations(t, rt)
}

// TestReboot reboots the node under the plugin: every container is gone
// without an NRI event, the plugin synchronizes with the sandboxes left
// and no container, the kubelet's removal of the old sandboxes does not
// reach it, and the pods' new sandboxes, run in another order, get their
// CPUs, none of them on another's.
func TestReboot(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPlugin(t, rt, n.pol, t.TempDir())
	web := pod(t, rt, "web", "burstable")
	mustCreate(t, rt, web, "nginx", burstable(500))
	gu := pod(t, rt, "gu", "guaranteed")
	mustCreate(t, rt, gu, "app", guaranteed(2))
	other := pod(t, rt, "other", "guaranteed")
	mustCreate(t, rt, other, "app", guaranteed(3))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })

	syncs := rt.Syncs()
	rt.Reboot()
	rt.WaitSynced(syncs + 1)
	for _, sb := range []*api.PodSandbox{web, gu, other} {
		if err := rt.RemovePod(sb); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, rt, pod(t, rt, "other", "guaranteed"), "app", guaranteed(3))
	mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	noViolations(t, rt)
}
