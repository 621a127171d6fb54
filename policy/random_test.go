package policy_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// randomNode builds a policy for a random machine and configuration.
func randomNode(t *testing.T, rng *rand.Rand) (*policy.Policy, string) {
	t.Helper()
	spec := fakesysfs.Spec{
		Sockets:        1 + rng.IntN(2),
		NUMAPerSocket:  1 + rng.IntN(2),
		CoresPerNUMA:   2 + rng.IntN(6),
		ThreadsPerCore: 1 + rng.IntN(2),
		L3PerNUMA:      1 + rng.IntN(2),
		Numbering:      fakesysfs.Numbering(rng.IntN(2)),
	}
	if spec.CoresPerNUMA%spec.L3PerNUMA != 0 {
		spec.L3PerNUMA = 1
	}
	// Some machines isolate CPUs (isolcpus), never the highest one, so
	// that the shared pool keeps a CPU under isolatedCPUs: exclusive.
	if total := spec.NumCPUs(); rng.IntN(2) == 0 {
		for id := 0; id < total-1; id++ {
			if rng.IntN(2) == 0 {
				spec.Isolated = append(spec.Isolated, id)
			}
		}
	}
	dir := t.TempDir()
	if err := fakesysfs.Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	options := map[string]string{}
	switch rng.IntN(4) {
	case 0:
		options["full-pcpus-only"] = "true"
	case 1:
		options["distribute-cpus-across-numa"] = "true"
	case 2:
		options["distribute-cpus-across-cores"] = "true"
	}
	if rng.IntN(2) == 0 {
		options["strict-cpu-reservation"] = "true"
	}
	if rng.IntN(3) == 0 {
		options["prefer-align-cpus-by-uncorecache"] = "true"
	}
	if rng.IntN(4) == 0 {
		options["align-by-socket"] = "true"
	}
	keys := map[string]any{
		"sysfsRoot":               dir,
		"reservedCPUCount":        1 + rng.IntN(min(2, spec.NumCPUs()-1)),
		"cpuManagerPolicyOptions": options,
		"topologyManagerPolicy":   []string{"none", "best-effort", "restricted", "single-numa-node"}[rng.IntN(4)],
		"isolatedCPUs":            []string{"shared", "exclusive"}[rng.IntN(2)],
		"topologyManagerPolicyOptions": map[string]string{
			"prefer-closest-numa-nodes": fmt.Sprint(rng.IntN(2) == 0),
		},
	}
	data, _ := yaml.Marshal(keys)
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("config %s: %v", data, err)
	}
	topo, err := cpuallocator.Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := assemble.Policy(cfg, topo)
	if err != nil {
		t.Fatalf("policy for %+v / %s: %v", spec, data, err)
	}
	return pol, fmt.Sprintf("%+v %s", spec, data)
}

// TestRandomSequences applies long random sequences of creations, resizes,
// stops and removals on random machines and configurations. The
// PolicyDriver checks, after every single update applied in containerd's
// order, that no CPU is in two exclusive sets nor in an exclusive and a
// shared set, and after every decision all the model's invariants. The test
// also checks that every refusal is a typed Refusal that changed nothing,
// and that every successful resize has the requested size and keeps the
// baseline CPUs.
func TestRandomSequences(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 5554))
			pol, desc := randomNode(t, rng)
			d := scenario.NewPolicyDriver(pol)
			type ctr struct {
				pod  policy.Pod
				name string
				qos  string
			}
			var live []ctr
			smt := pol.Allocator().Topology().ThreadsPerCore()
			for step := 0; step < 250; step++ {
				var err error
				var op string
				switch k := rng.IntN(10); {
				case k < 4 || len(live) == 0:
					qos := []string{"guaranteed", "guaranteed", "burstable", "besteffort"}[rng.IntN(4)]
					pod, _ := scenario.KubeletPod(fmt.Sprintf("pod%d", step), qos)
					n := int64(1 + rng.IntN(4))
					if rng.IntN(3) == 0 {
						n *= int64(smt)
					}
					milli := n * 1000
					if rng.IntN(6) == 0 {
						milli -= 500
					}
					op = fmt.Sprintf("create %s %s %dm", qos, pod.Name, milli)
					err = d.CreateContainer(pod, "c", scenario.KubeletResources(qos, milli, milli, 1<<30))
					if err == nil {
						live = append(live, ctr{pod, "c", qos})
					}
				case k < 8:
					c := live[rng.IntN(len(live))]
					milli := int64(1+rng.IntN(8)) * 1000
					op = fmt.Sprintf("resize %s to %dm", c.pod.Name, milli)
					err = d.UpdateContainer(c.pod, c.name, scenario.KubeletResources(c.qos, milli, milli, 1<<30))
					if err == nil && c.qos == "guaranteed" {
						checkResized(t, d, c.pod, c.name, int(milli/1000), op)
					}
				default:
					i := rng.IntN(len(live))
					c := live[i]
					live = append(live[:i], live[i+1:]...)
					op = "remove " + c.pod.Name
					if rng.IntN(2) == 0 {
						err = d.StopContainer(c.pod, c.name, 137)
					}
					if err == nil {
						err = d.RemoveContainer(c.pod, c.name)
					}
				}
				if err != nil {
					// (That a refusal leaves the model as it was is checked by
					// the driver, which fingerprints the model around every
					// decision.)
					if _, ok := policy.AsRefusal(err); !ok {
						t.Fatalf("%s\nstep %d: %s: not a refusal: %v", desc, step, op, err)
					}
				}
			}
		})
	}
}

// checkResized checks a successful resize of an exclusive container.
func checkResized(t *testing.T, d *scenario.PolicyDriver, pod policy.Pod, name string, n int, op string) {
	t.Helper()
	a, ok := d.Model.State.Assignment(pod.UID, name)
	if !ok {
		return // a fractional container that stayed shared
	}
	if got := a.Assigned().Size(); got != n {
		t.Fatalf("%s: assigned %s has %d CPUs, want %d", op, a.Assigned(), got, n)
	}
	if !a.Baseline.IsSubsetOf(a.Assigned()) {
		t.Fatalf("%s: baseline %s not kept in %s", op, a.Baseline, a.Assigned())
	}
	cpus, _ := d.ContainerCPUs(pod, name)
	if !cpus.Equals(a.Assigned()) {
		t.Fatalf("%s: runtime has %s, state %s", op, cpus, a.Assigned())
	}
}
