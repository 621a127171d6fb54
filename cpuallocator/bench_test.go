package cpuallocator_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"k8s.io/utils/cpuset"
)

// benchMachines are the benchmark fixtures, siblings offset by the core
// count as on most x86 servers.
var benchMachines = []struct {
	cpus int
	spec fakesysfs.Spec
}{
	{64, fakesysfs.Spec{Sockets: 2, CoresPerNUMA: 16, ThreadsPerCore: 2, L3PerNUMA: 2, Numbering: fakesysfs.SiblingsOffset}},
	{512, fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 32, ThreadsPerCore: 2, L3PerNUMA: 4, Numbering: fakesysfs.SiblingsOffset}},
	{4096, fakesysfs.Spec{Sockets: 4, NUMAPerSocket: 4, CoresPerNUMA: 128, ThreadsPerCore: 2, L3PerNUMA: 8, Numbering: fakesysfs.SiblingsOffset}},
}

// benchNode is a machine about half used by containers of 2-16 CPUs, half
// of them grown by 4 CPUs since they were created.
type benchNode struct {
	a          *cpuallocator.Allocator
	free       cpuset.CPUSet
	containers []container
	resized    []container
}

func newBenchNode(b *testing.B, spec fakesysfs.Spec, opts cpuallocator.StaticPolicyOptions) *benchNode {
	b.Helper()
	m, err := spec.Machine()
	if err != nil {
		b.Fatal(err)
	}
	m.Quirks.OmitL1L2 = true
	topo := topologyOfMachine(b, m)
	a := allocatorFor(b, topo, opts, cpuallocator.TopologyOptions{MaxAllowableNUMANodes: 16})
	r := rand.New(rand.NewSource(1))
	node := &benchNode{a: a, free: topo.CPUs()}
	for node.free.Size() > topo.CPUs().Size()*55/100 {
		got, err := a.Allocate(node.free, 2*(1+r.Intn(8)), 0)
		if err != nil {
			b.Fatal(err)
		}
		node.free = node.free.Difference(got)
		node.containers = append(node.containers, container{baseline: got, current: got})
	}
	for i := 0; i < len(node.containers); i += 2 {
		c := &node.containers[i]
		grown, err := a.Grow(node.free, c.current, c.current.Size()+4, 0)
		if err != nil {
			b.Fatal(err)
		}
		node.free = node.free.Difference(grown)
		c.current = grown
		node.resized = append(node.resized, *c)
	}
	return node
}

// measure runs op once per iteration and reports the median and 99th
// percentile of the per-call durations besides the mean.
func measure(b *testing.B, op func(i int) error) {
	var durations []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		err := op(i)
		durations = append(durations, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(durations[(len(durations)*99+99)/100-1].Nanoseconds()), "p99-ns")
}

// BenchmarkAllocator measures the decisions of a create (Allocate), a
// resize up (Grow by 4), a resize down (Shrink to the baseline plus 2) and
// the NUMA hints of a resize up, on machines about 50% used.
func BenchmarkAllocator(b *testing.B) {
	options := []struct {
		name string
		opts cpuallocator.StaticPolicyOptions
	}{
		{"default", none},
		{"full-pcpus-only", fullPCPUs},
	}
	sizes := []int{2, 4, 8, 16}
	for _, machine := range benchMachines {
		for _, o := range options {
			b.Run(fmt.Sprintf("cpus=%d/%s", machine.cpus, o.name), func(b *testing.B) {
				node := newBenchNode(b, machine.spec, o.opts)
				b.Run("create", func(b *testing.B) {
					measure(b, func(i int) error {
						_, err := node.a.Allocate(node.free, sizes[i%len(sizes)], 0)
						return err
					})
				})
				b.Run("grow", func(b *testing.B) {
					measure(b, func(i int) error {
						c := node.containers[i%len(node.containers)]
						_, err := node.a.Grow(node.free, c.current, c.current.Size()+4, 0)
						return err
					})
				})
				b.Run("shrink", func(b *testing.B) {
					measure(b, func(i int) error {
						c := node.resized[i%len(node.resized)]
						_, err := node.a.Shrink(c.current, c.baseline, c.baseline.Size()+2)
						return err
					})
				})
				b.Run("hints", func(b *testing.B) {
					measure(b, func(i int) error {
						c := node.containers[i%len(node.containers)]
						if len(node.a.NUMAHints(node.free, c.current, c.current.Size()+4)) == 0 {
							return fmt.Errorf("no hint for %d CPUs around %s", c.current.Size()+4, c.current)
						}
						return nil
					})
				})
			})
		}
	}
}
