package state

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/cpuset"
)

// BenchmarkSaveParts times the parts of a Save (BenchmarkCommit times the
// whole) on the nodes of BenchmarkCommit: the consistency check, the
// encoding (of a whole state, and of a state after a commit by the
// encoder that encoded the one before, which reuses the text of the pods
// that did not change), the durable write of encoded bytes both ways (a new temp file,
// a store's first Save; the spare rewritten and exchanged, the others),
// and the first way without any fsync, which tells the disk's share.
func BenchmarkSaveParts(b *testing.B) {
	for _, node := range commitNodes {
		s := node.state()
		data, err := Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(node.String()+"/Validate", func(b *testing.B) {
			for b.Loop() {
				if err := s.validate(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(node.String()+"/Marshal", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				_ = marshalCurrent(s)
			}
		})
		b.Run(node.String()+"/MarshalNextCommit", func(b *testing.B) {
			// A Store's encoder, which encoded the state before: the
			// states differ by one container's resize, as commits do.
			e := newCachingEncoder()
			states := []*State{s, node.resize(s, 0)}
			_ = e.canonical(states[1])
			b.SetBytes(int64(len(data)))
			i := 0
			for b.Loop() {
				_ = sealCanonical(e.canonical(states[i%2]))
				i++
			}
		})
		b.Run(node.String()+"/WriteAtomic", func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, CheckpointFile)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := writeFileAtomic(osFS{}, dir, path, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(node.String()+"/WriteSpareExchange", func(b *testing.B) {
			dir := b.TempDir()
			path, spare := filepath.Join(dir, CheckpointFile), filepath.Join(dir, SpareFile)
			if err := writeFileAtomic(osFS{}, dir, path, data); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := writeSpareAndExchange(osFS{}, dir, path, spare, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(node.String()+"/WriteRenameNoFsync", func(b *testing.B) {
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
}

// BenchmarkUnmarshal measures reading and verifying a checkpoint (done
// once at start).
func BenchmarkUnmarshal(b *testing.B) {
	for _, node := range commitNodes {
		b.Run(node.String(), func(b *testing.B) {
			data, err := Marshal(node.state())
			if err != nil {
				b.Fatal(err)
			}
			online := cpuset.New(makeRange(0, node.cpus-1)...)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Unmarshal(data, online); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClone measures the copy the policy makes of the state for each
// decision.
func BenchmarkClone(b *testing.B) {
	for _, node := range commitNodes {
		b.Run(node.String(), func(b *testing.B) {
			s := node.state()
			for b.Loop() {
				_ = s.Clone()
			}
		})
	}
}

// BenchmarkEqual measures the comparison of a state with an equal copy
// (the worst case: every part compared), which the plugin makes before a
// commit whose decision copied the state, to skip writing an unchanged
// one.
func BenchmarkEqual(b *testing.B) {
	for _, node := range commitNodes {
		b.Run(node.String(), func(b *testing.B) {
			s := node.state()
			c := s.Clone()
			for b.Loop() {
				if !s.Equal(c) {
					b.Fatal("a copy differs")
				}
			}
		})
	}
}
