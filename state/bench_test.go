package state

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
			s.DefaultCPUSet = s.DefaultCPUSet.Union(cpuset.New(3*i + 2))
		}
		s.SetAssignment(pod, "app", a)
		s.SetContainer(fmt.Sprintf("%064x", i), ContainerRef{PodUID: pod, Name: "app"})
		s.SetPodResources(pod, PodResources{
			Resources: Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 1 << 30},
		})
	}
	return s
}

// BenchmarkSave measures one committed mutation's checkpoint write with
// 200 containers, and its parts: encoding alone (Marshal), the atomic
// write of encoded bytes (WriteAtomic), and the same write-and-rename
// without the two fsyncs.
func BenchmarkSave(b *testing.B) {
	s := benchState(200)
	data, err := Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("checkpoint of 200 containers: %d bytes", len(data))

	b.Run("Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Save", func(b *testing.B) {
		st := newTestStore(b)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := st.Save(s); err != nil {
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
}

// BenchmarkClone measures the copy the policy makes of the state for each
// decision, with 200 containers.
func BenchmarkClone(b *testing.B) {
	s := benchState(200)
	for b.Loop() {
		_ = s.Clone()
	}
}
