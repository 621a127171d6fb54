package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"golang.org/x/sys/unix"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// BenchmarkUpdateContainerRoundTrip measures a resize as containerd sees
// it: the NRI UpdateContainer request through the adaptation library, the
// plugin's decision, the durable checkpoint commit and the reply, on a
// 512-CPU machine running 200 containers (100 pinned, 100 shared). Each
// iteration grows a pinned container by one core (the reply also shrinks
// the 100 shared containers) or shrinks it back. It reports the median and
// the 99th percentile of the round trip, and of a bare fdatasync on the
// same disk measured right after (disk-sync-): the floor under the
// durable commit. The process runs with Go's default garbage collection
// target, as the plugin's command does.
func BenchmarkUpdateContainerRoundTrip(b *testing.B) {
	n := newNode(b, fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 64, ThreadsPerCore: 2, L3PerNUMA: 2},
		"reservedCPUCount: 4\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\ntopologyManagerPolicy: best-effort")
	rt := fakeruntime.New(b, n.topo.CPUs())
	stateDir := b.TempDir()
	// The shared growth after a shrink goes out as soon as the runtime is
	// quiet for a millisecond: the benchmark waits for it between
	// requests, and a longer wait would only let the disk idle (its next
	// fdatasync is then slower).
	rp := startPluginWith(b, rt, n.pol, stateDir, func(o *plugin.Options) { o.SendDelay = time.Millisecond })
	rt.SetChecking(false) // the invariant check of 200 containers would dominate

	var pinned []*api.Container
	for i := 0; i < 100; i++ {
		pinned = append(pinned, mustCreate(b, rt, pod(b, rt, fmt.Sprintf("gu%d", i), "guaranteed"), "app", guaranteed(2)))
		mustCreate(b, rt, pod(b, rt, fmt.Sprintf("bu%d", i), "burstable"), "app", burstable(200))
	}
	waitFor(b, "settled", func() bool { return settled(rp, rt) })

	// The runtime records each NRI request's round trip (request, plugin
	// decision and commit, reply).
	rt.RecordStats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := pinned[(i/2)%len(pinned)]
		cpus := int64(4)
		if i%2 == 1 {
			cpus = 2
		}
		sent := rt.Unsolicited()
		if err := rt.UpdateContainer(c, guaranteed(cpus)); err != nil {
			b.Fatal(err)
		}
		// A shrink's shared growth (100 updates) is sent asynchronously:
		// let it land before the next request, outside the measurement,
		// without making garbage the measured requests would collect.
		b.StopTimer()
		if i%2 == 1 {
			waitFor(b, "the shared growth", func() bool { return rt.Unsolicited() >= sent+100 })
		}
		b.StartTimer()
	}
	b.StopTimer()
	durations := rt.Stats().Latency["UpdateContainer"]
	var grows, shrinks []time.Duration
	for i, d := range durations {
		if i%2 == 0 {
			grows = append(grows, d)
		} else {
			shrinks = append(shrinks, d)
		}
	}
	report := func(d []time.Duration, name string) {
		if len(d) < 2 {
			return
		}
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), name+"p50-ns")
		b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), name+"p99-ns")
	}
	report(durations, "")
	report(grows, "grow-")
	report(shrinks, "shrink-")
	// The share of the round trip spent in the plugin's handler (decision
	// and durable commit), from the plugin's own histogram.
	if count, sum := histogram(b, rp, "nri_cpumanager_event_duration_seconds", map[string]string{"event": "UpdateContainer"}); count > 0 {
		b.ReportMetric(sum/float64(count)*1e9, "handler-mean-ns")
	}
	if count, sum := histogram(b, rp, "nri_cpumanager_checkpoint_write_duration_seconds", nil); count > 0 {
		b.ReportMetric(sum/float64(count)*1e9, "commit-mean-ns")
	}
	// The disk's part: a small write and fdatasync into a preallocated file
	// in the same directory, a millisecond apart like the requests above,
	// measured in the same process right after them.
	if b.N >= 100 {
		syncs := syncLatencies(b, stateDir, 400, time.Millisecond)
		report(syncs, "disk-sync-")
	}
}

// syncLatencies times n writes of a small (256-byte) block, each
// followed by fdatasync, into a file preallocated and synced first, with
// gap between them.
func syncLatencies(b *testing.B, dir string, n int, gap time.Duration) []time.Duration {
	f, err := os.OpenFile(filepath.Join(dir, "disk-probe"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const record = 256
	if _, err := f.Write(make([]byte, n*record)); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	block := make([]byte, record)
	out := make([]time.Duration, 0, n)
	for i := range n {
		time.Sleep(gap)
		start := time.Now()
		if _, err := f.WriteAt(block, int64(i*record)); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}
