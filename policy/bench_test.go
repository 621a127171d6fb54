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
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// BenchmarkResizeDecision measures the policy's decision for a resize
// alone (no NRI, no checkpoint) on the machine and load of the plugin's
// round-trip benchmark: 512 CPUs, 100 pinned and 100 shared containers;
// each iteration grows a pinned container by one core or shrinks it back
// (with the runtime's confirmation of a shrink). It reports the median and
// the 99th percentile.
func BenchmarkResizeDecision(b *testing.B) {
	benchmarkResizeDecision(b, nil, "")
}

// BenchmarkResizeDecisionIsolatedExclusive is BenchmarkResizeDecision on
// the same machine booted with isolcpus=8-511 under isolatedCPUs:
// exclusive: every decision also reads the assignments (the isolated
// exclusive CPUs are in no pool) and the allocator prefers isolated CPUs.
func BenchmarkResizeDecisionIsolatedExclusive(b *testing.B) {
	var isolated []int
	for id := 8; id < 512; id++ {
		isolated = append(isolated, id)
	}
	benchmarkResizeDecision(b, isolated, "\nisolatedCPUs: exclusive")
}

func benchmarkResizeDecision(b *testing.B, isolated []int, extraConfig string) {
	fs, err := fakesysfs.GenerateFS(fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 64, ThreadsPerCore: 2, L3PerNUMA: 2, Isolated: isolated})
	if err != nil {
		b.Fatal(err)
	}
	topo, err := cpuallocator.DiscoverFS(fs)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Parse([]byte("reservedCPUCount: 4\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\ntopologyManagerPolicy: best-effort" + extraConfig))
	if err != nil {
		b.Fatal(err)
	}
	pol, err := assemble.Policy(cfg, topo)
	if err != nil {
		b.Fatal(err)
	}
	d := scenario.NewPolicyDriver(pol)
	var pinned []policy.Container
	for i := 0; i < 100; i++ {
		gu, _ := scenario.KubeletPod(fmt.Sprintf("gu%d", i), "guaranteed")
		bu, _ := scenario.KubeletPod(fmt.Sprintf("bu%d", i), "burstable")
		r := scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)
		if err := d.CreateContainer(gu, "app", r); err != nil {
			b.Fatal(err)
		}
		if err := d.CreateContainer(bu, "app", scenario.KubeletResources("burstable", 200, 0, 0)); err != nil {
			b.Fatal(err)
		}
		cpus, _ := d.ContainerCPUs(gu, "app")
		pinned = append(pinned, policy.Container{ID: fmt.Sprintf("ctr-%03d-app", 2*i+1), Name: "app", Pod: gu, Resources: r, CPUs: cpus})
	}
	m := d.Model
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := pinned[(i/2)%len(pinned)]
		n := int64(4)
		if i%2 == 1 {
			n = 2
			c.Resources = scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)
		}
		start := time.Now()
		dec, err := pol.UpdateContainer(m, c, scenario.KubeletResources("guaranteed", n*1000, n*1000, 1<<30))
		durations = append(durations, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		m = pol.Confirm(dec.Model, c.ID).Model
	}
	b.StopTimer()
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(durations[len(durations)*99/100].Nanoseconds()), "p99-ns")
}
