package integration

import (
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestPodUpdateAdmission plays a CPU growth as the kubelet does, through
// the NRI runtime library: UpdatePodSandboxResources first (the new limit,
// then the new shares), the container after. While the CPUs are taken the
// first call is refused with the plugin's text, and the checkpoint keeps
// the pod's last accepted resources and every cpuset stays; once CPUs are
// free both calls are accepted and checkpointed, and the container grows.
func TestPodUpdateAdmission(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPlugin(t, rt, n.pol, t.TempDir())
	online := n.topo.CPUs()

	big := pod(t, rt, "big", "guaranteed")
	mustCreate(t, rt, big, "app", guaranteed(5))
	p := policyPod(t, "gu", "guaranteed")
	p.Resources = guaranteed(2) // the sandbox's creation totals
	sb, err := rt.RunPod(p)
	if err != nil {
		t.Fatal(err)
	}
	app := mustCreate(t, rt, sb, "app", guaranteed(2))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, app, "6-7")

	// A memory-only resize: one call, the CPU values unchanged; accepted
	// although no CPU is free.
	memoryOnly := policy.PodResources{Resources: scenario.KubeletResources("guaranteed", 2000, 2000, 2<<30)}
	if err := rt.UpdatePod(sb, memoryOnly); err != nil {
		t.Fatalf("memory-only pod update: %v", err)
	}
	recorded := state.PodRecord{Resources: state.ResourceRecord(memoryOnly.Resources), Overhead: state.ResourceRecord(memoryOnly.Overhead)}
	if got, ok := checkpointState(t, rp.stateDir, online).PodResources(p.UID); !ok || got != recorded {
		t.Fatalf("checkpoint pod resources %+v (present %v), want %+v", got, ok, memoryOnly)
	}

	// The growth to 4 CPUs: the new limit with the old shares first.
	limitFirst := scenario.KubeletResources("guaranteed", 2000, 4000, 2<<30)
	before := rt.Applied()
	err = rt.UpdatePod(sb, policy.PodResources{Resources: limitFirst})
	const want = "Infeasible: resizeAllocateCPUsError: cannot grow container default/gu/app from 2 to 4 exclusive CPUs keeping 6-7 (free: none): "
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("pod growth with no CPU free: %v, want the text %q", err, want)
	}
	if got, _ := checkpointState(t, rp.stateDir, online).PodResources(p.UID); got != recorded {
		t.Errorf("a refused pod update changed the checkpoint's pod resources to %+v", got)
	}
	for id, cpus := range rt.Applied() {
		if !cpus.Equals(before[id]) {
			t.Errorf("a refused pod update changed %s from %s to %s", id, before[id], cpus)
		}
	}
	if v := metricValue(t, rp, "nri_cpumanager_pod_resource_updates_total", map[string]string{"outcome": "infeasible"}); v != 1 {
		t.Errorf("pod_resource_updates_total{infeasible} = %v, want 1", v)
	}
	if v := metricValue(t, rp, "nri_cpumanager_refusals_total", map[string]string{"reason": "resizeAllocateCPUsError", "verdict": "Infeasible"}); v != 1 {
		t.Errorf("refusals_total{resizeAllocateCPUsError, Infeasible} = %v, want 1", v)
	}

	// big goes: the same two calls are accepted and checkpointed, then the
	// container grows.
	if err := rt.RemovePod(big); err != nil {
		t.Fatal(err)
	}
	for _, r := range []policy.Resources{limitFirst, scenario.KubeletResources("guaranteed", 4000, 4000, 2<<30)} {
		if err := rt.UpdatePod(sb, policy.PodResources{Resources: r}); err != nil {
			t.Fatalf("pod update %+v with CPUs free: %v", r, err)
		}
		if got, _ := checkpointState(t, rp.stateDir, online).PodResources(p.UID); got.Resources != state.ResourceRecord(r) {
			t.Errorf("checkpoint pod resources %+v, want %+v", got.Resources, r)
		}
	}
	if err := rt.UpdateContainer(app, scenario.KubeletResources("guaranteed", 4000, 4000, 2<<30)); err != nil {
		t.Fatalf("the container's growth: %v", err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	if got, _ := rt.CPUs(app.Id); got.Size() != 4 || !got.Contains(6) || !got.Contains(7) {
		t.Errorf("grown container runs on %s, want 4 CPUs keeping 6-7", got)
	}
	if v := metricValue(t, rp, "nri_cpumanager_pod_resource_updates_total", map[string]string{"outcome": "applied"}); v != 3 {
		t.Errorf("pod_resource_updates_total{applied} = %v, want 3", v)
	}
	noViolations(t, rt)
}
