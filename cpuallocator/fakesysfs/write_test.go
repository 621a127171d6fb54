package fakesysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readTree(t *testing.T, root, rel string) (string, bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(data), "\n"), true
}

func TestWriteFiles(t *testing.T) {
	spec := Spec{
		Sockets: 2, NUMAPerSocket: 1, CoresPerNUMA: 2, ThreadsPerCore: 2,
		Numbering: SiblingsOffset, // core 0 = {0,4}, core 1 = {1,5} on socket 0
		Offline:   []int{5},
		Isolated:  []int{3},
	}
	root := t.TempDir()
	if err := Generate(root, spec); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file   string
		want   string // "" with absent=true: the file must not exist
		absent bool
	}{
		{file: "devices/system/cpu/online", want: "0-4,6-7"},
		{file: "devices/system/cpu/offline", want: "5"},
		{file: "devices/system/cpu/present", want: "0-7"},
		{file: "devices/system/cpu/isolated", want: "3"},
		{file: "devices/system/cpu/cpu5/online", want: "0"},
		{file: "devices/system/cpu/cpu5/topology/core_id", absent: true},
		{file: "devices/system/cpu/cpu1/topology/thread_siblings_list", want: "1"},
		{file: "devices/system/cpu/cpu0/topology/core_cpus_list", want: "0,4"},
		{file: "devices/system/cpu/cpu6/topology/physical_package_id", want: "1"},
		{file: "devices/system/cpu/cpu6/topology/core_id", want: "0"},
		{file: "devices/system/cpu/cpu6/topology/die_id", want: "0"},
		{file: "devices/system/cpu/cpu6/cache/index3/shared_cpu_list", want: "2-3,6-7"},
		{file: "devices/system/cpu/cpu6/cache/index3/level", want: "3"},
		{file: "devices/system/cpu/cpu6/cache/index3/type", want: "Unified"},
		{file: "devices/system/cpu/cpu6/cache/index3/id", want: "1"},
		{file: "devices/system/cpu/cpu6/cache/index0/type", want: "Data"},
		{file: "devices/system/node/node0/cpulist", want: "0-1,4"},
		{file: "devices/system/node/node1/cpulist", want: "2-3,6-7"},
		{file: "devices/system/node/node1/distance", want: "21 10"},
		{file: "devices/system/node/has_cpu", want: "0-1"},
	}
	for _, tc := range tests {
		got, ok := readTree(t, root, tc.file)
		switch {
		case tc.absent && ok:
			t.Errorf("%s exists (%q), want it absent", tc.file, got)
		case !tc.absent && !ok:
			t.Errorf("%s is missing", tc.file)
		case !tc.absent && got != tc.want:
			t.Errorf("%s = %q, want %q", tc.file, got, tc.want)
		}
	}
}

func TestWriteQuirks(t *testing.T) {
	tests := []struct {
		name   string
		quirks Quirks
		absent []string
		exists []string
	}{
		{
			name:   "none",
			exists: []string{"devices/system/cpu/cpu1/topology/die_id", "devices/system/cpu/cpu1/cache/index3/id", "devices/system/node/node0/cpulist", "devices/system/cpu/cpu1/topology/core_cpus_list", "devices/system/cpu/cpu1/cache/index2/level"},
		},
		{
			name:   "omit die_id",
			quirks: Quirks{OmitDieID: true},
			absent: []string{"devices/system/cpu/cpu1/topology/die_id"},
		},
		{
			name:   "omit cache id",
			quirks: Quirks{OmitCacheID: true},
			absent: []string{"devices/system/cpu/cpu1/cache/index3/id"},
			exists: []string{"devices/system/cpu/cpu1/cache/index3/shared_cpu_list"},
		},
		{
			name:   "omit node dirs",
			quirks: Quirks{OmitNodeDirs: true},
			absent: []string{"devices/system/node"},
		},
		{
			name:   "omit core_cpus_list",
			quirks: Quirks{OmitCoreCPUsList: true},
			absent: []string{"devices/system/cpu/cpu1/topology/core_cpus_list"},
			exists: []string{"devices/system/cpu/cpu1/topology/thread_siblings_list"},
		},
		{
			name:   "omit L1 and L2",
			quirks: Quirks{OmitL1L2: true},
			absent: []string{"devices/system/cpu/cpu1/cache/index0", "devices/system/cpu/cpu1/cache/index2"},
			exists: []string{"devices/system/cpu/cpu1/cache/index3/level"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := Generate(root, Spec{Sockets: 1, CoresPerNUMA: 2, Quirks: tc.quirks}); err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.absent {
				if _, err := os.Stat(filepath.Join(root, p)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s: want it absent, stat says %v", p, err)
				}
			}
			for _, p := range tc.exists {
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("%s: %v", p, err)
				}
			}
		})
	}
}

func TestWriteUnwritableRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(root, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Generate(root, Spec{Sockets: 1, CoresPerNUMA: 1}); err == nil {
		t.Fatal("Generate under a regular file succeeded")
	}
}

func BenchmarkGenerateFS4096(b *testing.B) {
	spec := Spec{Sockets: 4, NUMAPerSocket: 4, CoresPerNUMA: 128, ThreadsPerCore: 2, L3PerNUMA: 8, Numbering: SiblingsOffset}
	for b.Loop() {
		if _, err := GenerateFS(spec); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFSMatchesWrite(t *testing.T) {
	spec := Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2, L3PerNUMA: 2, Offline: []int{3}, Isolated: []int{4}}
	root := t.TempDir()
	if err := Generate(root, spec); err != nil {
		t.Fatal(err)
	}
	mem, err := GenerateFS(spec)
	if err != nil {
		t.Fatal(err)
	}
	onDisk := map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		onDisk[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	inMemory := 0
	err = fs.WalkDir(mem, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		inMemory++
		data, err := fs.ReadFile(mem, p)
		if got, ok := onDisk[filepath.FromSlash(p)]; !ok || got != string(data) {
			t.Errorf("%s: disk %q, memory %q", p, got, data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk) != inMemory {
		t.Errorf("disk tree has %d files, in-memory tree %d", len(onDisk), inMemory)
	}
}
