package state

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/cpuset"
)

// benchOnline is a large machine for the benchmarks.
var benchOnline = cpuset.New(makeRange(0, 1023)...)

// benchState is a node with n exclusive containers of 2 CPUs (half of
// them resized to 3), their container ids and their pods' resources.
func benchState(n int) *State {
	s := New(benchOnline.Difference(cpuset.New(makeRange(0, 3*n-1)...)))
	for i := range n {
		pod := fmt.Sprintf("5f0c8a4e-1b2d-4c3e-9f00-%012d", i)
		a := Assignment{Original: cpuset.New(3*i, 3*i+1)}
		if i%2 == 0 {
			a.Resized = cpuset.New(3*i, 3*i+1, 3*i+2)
		} else {
			s.defaultCPUSet = s.defaultCPUSet.Union(cpuset.New(3*i + 2))
		}
		s.SetAssignment(pod, "app", a)
		s.SetContainer(fmt.Sprintf("%064x", i), ContainerRef{PodUID: pod, Name: "app"})
		s.SetPodResources(pod, PodResources{
			Resources: Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 1 << 30},
		})
	}
	return s
}

// benchResizeRing returns 2n states of n containers (benchState(n) first)
// in which each state differs from the one before by one container's
// resize and the shared pool: the realistic commit. Container i%n is
// resized in state i: shrunk to its original CPUs if it holds three,
// grown to three otherwise. Walk it with pingPong.
func benchResizeRing(n int) []*State {
	ring := []*State{benchState(n)}
	for i := 1; i < 2*n; i++ {
		s := ring[i-1].Clone()
		c := i % n
		pod := fmt.Sprintf("5f0c8a4e-1b2d-4c3e-9f00-%012d", c)
		a, _ := s.Assignment(pod, "app")
		extra := cpuset.New(3*c + 2)
		if a.Assigned().Size() == 3 {
			a.Resized = a.Original
			s.defaultCPUSet = s.defaultCPUSet.Union(extra)
		} else {
			a.Resized = a.Original.Union(extra)
			s.defaultCPUSet = s.defaultCPUSet.Difference(extra)
		}
		s.SetAssignment(pod, "app", a)
		ring = append(ring, s)
	}
	return ring
}

// pingPong returns the index of the i-th state of a walk that goes back
// and forth along a line of n states, so that each state differs from the
// one before by one change.
func pingPong(i, n int) int {
	i %= 2 * (n - 1)
	if i >= n {
		return 2*(n-1) - i
	}
	return i
}

// latencies are per-op durations of a benchmark.
type latencies []time.Duration

// report reports the median and the 99th percentile as metrics and
// returns them.
func (l latencies) report(b *testing.B) (median, p99 time.Duration) {
	sorted := slices.Sorted(slices.Values(l))
	median, p99 = sorted[len(sorted)/2], sorted[min(len(sorted)-1, len(sorted)*99/100)]
	b.ReportMetric(float64(median.Nanoseconds()), "median-ns")
	b.ReportMetric(float64(p99.Nanoseconds()), "p99-ns")
	return median, p99
}

// BenchmarkSave measures committing one resize with 200 containers, the
// request path's checkpoint cost. FullRewrite is the write this package
// did before the journal (Marshal, then the atomic temp-fsync-rename-fsync
// write of the whole checkpoint); Journal is Save, which appends a record
// of the change and fdatasyncs it while the Store compacts in the
// background. Both report the median and 99th percentile of their per-op
// durations; Journal also reports how many times faster than FullRewrite
// it is at both, when FullRewrite ran first in the same process. The
// other sub-benchmarks time the parts: Validate (Save's consistency
// check), Record (diff and encoding), Marshal, WriteAtomic of encoded
// bytes and the same write and rename without fsync.
func BenchmarkSave(b *testing.B) {
	ring := benchResizeRing(200)
	s := ring[0]
	data, err := Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("checkpoint of 200 containers: %d bytes", len(data))

	var fullMedian, fullP99 time.Duration
	b.Run("FullRewrite", func(b *testing.B) {
		dir := b.TempDir()
		path := filepath.Join(dir, CheckpointFile)
		var l latencies
		i := 0
		for b.Loop() {
			start := time.Now()
			out, err := Marshal(ring[pingPong(i, len(ring))])
			if err == nil {
				err = writeFileAtomic(dir, path, out)
			}
			l = append(l, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			i++
		}
		fullMedian, fullP99 = l.report(b)
	})
	b.Run("Journal", func(b *testing.B) {
		st := newTestStore(b)
		if err := st.Save(ring[0]); err != nil {
			b.Fatal(err)
		}
		var l latencies
		i := 1
		for b.Loop() {
			start := time.Now()
			err := st.Save(ring[pingPong(i, len(ring))])
			l = append(l, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			i++
		}
		median, p99 := l.report(b)
		if fullMedian > 0 {
			b.ReportMetric(float64(fullMedian)/float64(median), "x-faster-median")
			b.ReportMetric(float64(fullP99)/float64(p99), "x-faster-p99")
		}
	})
	b.Run("Validate", func(b *testing.B) {
		for b.Loop() {
			if err := s.validateForSave(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Record", func(b *testing.B) {
		var buf []byte
		i := 1
		for b.Loop() {
			buf = appendRecord(buf[:0], uint64(i), diff(ring[pingPong(i-1, len(ring))], ring[pingPong(i, len(ring))]))
			i++
		}
		b.ReportMetric(float64(len(buf)), "record-bytes")
	})
	b.Run("Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteAtomic", func(b *testing.B) {
		dir := b.TempDir()
		path := filepath.Join(dir, CheckpointFile)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := writeFileAtomic(dir, path, data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteRenameNoFsync", func(b *testing.B) {
		dir := b.TempDir()
		tmp, path := filepath.Join(dir, "tmp"), filepath.Join(dir, CheckpointFile)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoad measures reading and verifying a checkpoint of 200
// containers (done once at start).
func BenchmarkLoad(b *testing.B) {
	s := benchState(200)
	data, err := Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Unmarshal(data, benchOnline); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A journal as long as a compaction lets it grow, replayed over the
	// snapshot: the most Load replays.
	ring := benchResizeRing(200)
	journal := journalHeader(1)
	records := 0
	for i := 1; int64(len(journal)) < defaultStoreOptions().compactBytes; i++ {
		journal = appendRecord(journal, uint64(i), diff(ring[pingPong(i-1, len(ring))], ring[pingPong(i, len(ring))]))
		records++
	}
	b.Run("ReplayFullJournal", func(b *testing.B) {
		b.SetBytes(int64(len(journal)))
		b.ReportMetric(float64(records), "records")
		for b.Loop() {
			base := snapshotBase{state: ring[0].Clone(), path: CheckpointFile, ref: journalRefV1{Generation: 1}}
			if _, _, err := replay(base, []journalData{{path: journalName(1), gen: 1, data: journal}}, benchOnline); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClone measures the copy the policy makes of the state for each
// decision, with 200 containers.
func BenchmarkClone(b *testing.B) {
	s := benchState(200)
	for b.Loop() {
		_ = s.Clone()
	}
}
