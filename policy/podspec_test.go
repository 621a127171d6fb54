package policy_test

import (
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// kepPod sets up KEP-5554's multi-container e2e pod under single-numa-node
// (two NUMA nodes of 4 cores × 2 threads, CPU 0 reserved):
// gu-container-1 on 2-3,6-7 (grown from 2-3), gu-container-2 on 4-5.
func kepPod(t *testing.T) (*scenario.PolicyDriver, policy.Pod) {
	t.Helper()
	f, err := scenario.Parse([]byte(`
name: kep pod
topology: {sockets: 1, numaPerSocket: 2, coresPerNUMA: 4, threadsPerCore: 2}
config: {reservedSystemCPUs: "0", topologyManagerPolicy: single-numa-node}
steps:
- create: {pod: gu-pod, container: gu-container-1, cpu: "2", podCPU: "4"}
- create: {pod: gu-pod, container: gu-container-2, cpu: "2"}
- updatePod: {pod: gu-pod, cpu: "6"}
- resize: {pod: gu-pod, container: gu-container-1, cpu: "4"}
  expect: {cpus: "2-3,6-7"}
`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := assemble.ScenarioPolicy(f, f.Topology, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := scenario.NewPolicyDriver(pol)
	if err := scenario.NewRunner(d).Run(f); err != nil {
		t.Fatal(err)
	}
	pod, err := scenario.KubeletPod("gu-pod", "guaranteed")
	if err != nil {
		t.Fatal(err)
	}
	return d, pod
}

// TestPodSpecDecidesTheWholeResize: with the pod's spec, UpdatePodSandbox
// decides every container's resize before any of them changes, and
// refuses the whole resize with the reason of the container that fails,
// where the pod totals alone could not tell.
func TestPodSpecDecidesTheWholeResize(t *testing.T) {
	cpus := func(n int64) policy.Resources { return scenario.KubeletResources("guaranteed", n*1000, n*1000, 1<<30) }
	tests := []struct {
		name   string
		total  int64
		spec   policy.PodSpec
		refuse string // "" admitted
	}{
		{"restore c1 and grow c2 within capacity", 6, policy.PodSpec{"gu-container-1": cpus(2), "gu-container-2": cpus(4)}, ""},
		{"restore c1 and grow c2 above capacity", 10, policy.PodSpec{"gu-container-1": cpus(2), "gu-container-2": cpus(8)},
			"Infeasible: resizeAllocateCPUsError: pod default/gu-pod's resize is refused as a whole, its containers unchanged: container gu-container-2: cannot grow"},
		// Same total, so no UpdatePodSandbox without the API; the totals
		// alone would admit this one (c1 6, c2 0 is no division at all).
		{"c1 below its baseline", 6, policy.PodSpec{"gu-container-1": cpus(1), "gu-container-2": cpus(5)},
			"Infeasible: prohibitedCPUAllocationError: pod default/gu-pod's resize is refused as a whole, its containers unchanged: container gu-container-1: "},
		{"c2 to the shared pool", 6, policy.PodSpec{"gu-container-1": cpus(4), "gu-container-2": scenario.KubeletResources("guaranteed", 1500, 1500, 1<<30)},
			"Infeasible: inconsistentCPUAllocationError"},
		{"a spec that does not name c2 falls back to the totals", 6, policy.PodSpec{"gu-container-1": cpus(3)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, pod := kepPod(t)
			res := policy.PodResources{Resources: scenario.KubeletResources("guaranteed", tc.total*1000, tc.total*1000, 0)}
			dec, err := d.Policy.UpdatePodSandboxWithSpec(d.Model, pod, res, tc.spec)
			switch {
			case tc.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refuse != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.refuse)):
				t.Fatalf("got %v, want refused with %q", err, tc.refuse)
			case err == nil:
				if err := d.Policy.CheckInvariants(dec.Model); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestPodRefusalDoesNotDependOnContainerIDs: a pod-level refusal names
// the pod's containers, and tries its divisions, in the order of their
// names, not of the runtime's container ids (random on a real
// containerd): here the second container by name is created first, so
// that its id sorts first.
func TestPodRefusalDoesNotDependOnContainerIDs(t *testing.T) {
	f, err := scenario.Parse([]byte(`
name: ids in the other order
topology: {sockets: 1, numaPerSocket: 2, coresPerNUMA: 4, threadsPerCore: 2}
config: {reservedSystemCPUs: "0", topologyManagerPolicy: single-numa-node}
steps:
- create: {pod: gu-pod, container: gu-container-2, cpu: "2", podCPU: "4"}
  expect: {cpus: "2-3"}
- create: {pod: gu-pod, container: gu-container-1, cpu: "2"}
  expect: {cpus: "4-5"}
- updatePod: {pod: gu-pod, cpu: "10"}
  refused: "Infeasible: resizeAllocateCPUsError: pod default/gu-pod cannot divide 10 exclusive CPUs among its containers (gu-container-1, gu-container-2) in any way: cannot grow container default/gu-pod/gu-container-2 from 2 to 8"
`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := assemble.ScenarioPolicy(f, f.Topology, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := scenario.NewRunner(scenario.NewPolicyDriver(pol)).Run(f); err != nil {
		t.Fatal(err)
	}
}
