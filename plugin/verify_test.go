package plugin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestExpandSlice(t *testing.T) {
	tests := []struct{ slice, want string }{
		{"kubepods.slice", "kubepods.slice"},
		{"kubepods-pod12.slice", "kubepods.slice/kubepods-pod12.slice"},
		{"kubepods-burstable-pod12_34.slice", "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice"},
		{"-.slice", ""},
	}
	for _, tt := range tests {
		if got := expandSlice(tt.slice); got != tt.want {
			t.Errorf("expandSlice(%q) = %q, want %q", tt.slice, got, tt.want)
		}
	}
}

// TestCgroupReader reads cpusets from fake cgroup v1 and v2 trees, with
// cgroupfs and systemd cgroups paths.
func TestCgroupReader(t *testing.T) {
	write := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1 := t.TempDir()
	write(t, filepath.Join(v1, "cpuset/kubepods/pod1/c1/cpuset.cpus"), "2-3\n")
	write(t, filepath.Join(v1, "cpuset/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2.slice/cri-containerd-c2.scope/cpuset.cpus"), "0,4\n")
	v2 := t.TempDir()
	write(t, filepath.Join(v2, "kubepods/pod1/c1/cpuset.cpus"), "5\n")
	write(t, filepath.Join(v2, "kubepods/pod1/bad/cpuset.cpus"), "5-x\n")

	tests := []struct {
		name, root, path, want string
		wantErr                bool
	}{
		{"v1 cgroupfs", v1, "/kubepods/pod1/c1", "2-3", false},
		{"v1 systemd", v1, "kubepods-burstable-pod2.slice:cri-containerd:c2", "0,4", false},
		{"v2 cgroupfs", v2, "/kubepods/pod1/c1", "5", false},
		{"missing", v2, "/kubepods/pod9/c9", "", true},
		{"unparsable", v2, "/kubepods/pod1/bad", "", true},
		{"no path", v2, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cgroupReader{root: tt.root}.cpus(tt.path)
			if (err != nil) != tt.wantErr || (err == nil && got.String() != tt.want) {
				t.Errorf("cpus(%q) = %q, %v; want %q (error %v)", tt.path, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
