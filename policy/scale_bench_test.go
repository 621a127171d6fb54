package policy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// scaleMachines are the machines of the scale benchmarks, siblings offset
// by the core count as on most x86 servers.
var scaleMachines = []struct {
	cpus int
	spec fakesysfs.Spec
}{
	{64, fakesysfs.Spec{Sockets: 2, CoresPerNUMA: 16, ThreadsPerCore: 2, L3PerNUMA: 2, Numbering: fakesysfs.SiblingsOffset}},
	{512, fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 32, ThreadsPerCore: 2, L3PerNUMA: 4, Numbering: fakesysfs.SiblingsOffset}},
	{4096, fakesysfs.Spec{Sockets: 4, NUMAPerSocket: 4, CoresPerNUMA: 128, ThreadsPerCore: 2, L3PerNUMA: 8, Numbering: fakesysfs.SiblingsOffset}},
}

// scaleLoads are the numbers of containers on the node.
var scaleLoads = []int{10, 100, 500}

// scaleNode is a node of a scale benchmark: a policy, a model with
// containers, a pinned container to resize and a pod to end.
type scaleNode struct {
	pol    *policy.Policy
	m      *policy.Model
	resize policy.Container
	ended  policy.Pod
	next   policy.Container
}

// newScaleNode places containers on the machine: a pinned one of 2 CPUs
// for every 16 CPUs of it, at most half of the containers, the others
// shared (Burstable).
func newScaleNode(b *testing.B, spec fakesysfs.Spec, cpus, containers int) *scaleNode {
	b.Helper()
	fs, err := fakesysfs.GenerateFS(spec)
	if err != nil {
		b.Fatal(err)
	}
	topo, err := cpuallocator.DiscoverFS(fs)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Parse([]byte("reservedSystemCPUs: \"0\""))
	if err != nil {
		b.Fatal(err)
	}
	pol, err := assemble.Policy(cfg, topo)
	if err != nil {
		b.Fatal(err)
	}
	m := policy.NewModel(pol.NewState())
	pinned := min(containers/2, cpus/16)
	node := &scaleNode{pol: pol}
	for i := range containers {
		qos, r := "burstable", scenario.KubeletResources("burstable", 200, 0, 0)
		if i < pinned {
			qos, r = "guaranteed", scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)
		}
		pod, _ := scenario.KubeletPod(fmt.Sprintf("p%d", i), qos)
		pod.SandboxID = "sandbox-" + pod.UID
		m = pol.RunPodSandbox(m, pod).Model
		c := policy.Container{ID: fmt.Sprintf("ctr-%d", i), Name: "app", Pod: pod, Resources: r}
		d, err := pol.CreateContainer(m, c)
		if err != nil {
			b.Fatal(err)
		}
		m = d.Model
		if i == 0 {
			c.CPUs = m.CPUsOf(c.ID)
			node.resize, node.ended = c, pod
		}
	}
	node.m = m
	pod, _ := scenario.KubeletPod("new", "guaranteed")
	pod.SandboxID = "sandbox-new"
	node.next = policy.Container{ID: "new-app", Name: "app", Pod: pod, Resources: scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)}
	return node
}

// BenchmarkDecisionScale measures the policy's decisions — a creation, a
// growth by 2 CPUs, a shrink back, the end of a pod — on machines of 64,
// 512 and 4096 CPUs with 10, 100 and 500 containers, and beside each the
// allocator's own part (the placement of the same CPUs on the same free
// CPUs): `make bench` prints the policy's cost over the allocator's and
// how it grows with the containers. The policy's decisions report the
// median and 99th percentile of their calls too (perCall).
func BenchmarkDecisionScale(b *testing.B) {
	for _, ms := range scaleMachines {
		for _, n := range scaleLoads {
			b.Run(fmt.Sprintf("cpus=%d/containers=%d", ms.cpus, n), func(b *testing.B) {
				node := newScaleNode(b, ms.spec, ms.cpus, n)
				free := node.pol.Free(node.m)
				freeMask, _ := cpumask.Of(free)
				grow := scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)
				b.Run("create", func(b *testing.B) {
					perCall(b, func() {
						if _, err := node.pol.CreateContainer(node.m, node.next); err != nil {
							b.Fatal(err)
						}
					})
				})
				b.Run("create/allocator", func(b *testing.B) {
					for b.Loop() {
						if _, err := node.pol.Allocator().AllocateFrom(freeMask, 2, 0); err != nil {
							b.Fatal(err)
						}
					}
				})
				grown, err := node.pol.UpdateContainer(node.m, node.resize, grow)
				if err != nil {
					b.Fatal(err)
				}
				b.Run("grow", func(b *testing.B) {
					perCall(b, func() {
						if _, err := node.pol.UpdateContainer(node.m, node.resize, grow); err != nil {
							b.Fatal(err)
						}
					})
				})
				b.Run("grow/allocator", func(b *testing.B) {
					for b.Loop() {
						if _, err := node.pol.Allocator().GrowFrom(freeMask, node.resize.CPUs, 4, 0); err != nil {
							b.Fatal(err)
						}
					}
				})
				bigger := node.resize
				bigger.Resources = grow
				b.Run("shrink", func(b *testing.B) {
					perCall(b, func() {
						if _, err := node.pol.UpdateContainer(grown.Model, bigger, node.resize.Resources); err != nil {
							b.Fatal(err)
						}
					})
				})
				b.Run("release", func(b *testing.B) {
					perCall(b, func() { _ = node.pol.RemovePodSandbox(node.m, node.ended) })
				})
			})
		}
	}
}

// perCall runs decide once per iteration of b.Loop, timing each call, and
// reports the calls' median and 99th percentile (p50-ns, p99-ns) beside
// the mean: the plugin's reply waits on a decision's tail, which the mean
// hides.
func perCall(b *testing.B, decide func()) {
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		decide()
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Nanoseconds()), "p99-ns")
}
