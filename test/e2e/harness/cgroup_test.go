package harness

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

const v2MountInfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
25 22 0:21 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

func TestCgroupLayoutOf(t *testing.T) {
	hybrid, err := parseMountInfo(strings.NewReader(sampleMountInfo))
	if err != nil {
		t.Fatal(err)
	}
	unified, err := parseMountInfo(strings.NewReader(v2MountInfo))
	if err != nil {
		t.Fatal(err)
	}
	all := func(string) string { return "cpuset cpu io memory pids" }
	none := func(string) string { return "" }
	for _, tc := range []struct {
		name        string
		mounts      []mount
		controllers func(string) string
		version     int
		cpusetRoot  string
	}{
		// The hybrid machine's cgroup2 mount is not used even if it
		// offered controllers: the v1 cpuset hierarchy holds the CPUs.
		{"hybrid", hybrid, all, 1, "/sys/fs/cgroup/cpuset"},
		{"v2", unified, all, 2, "/sys/fs/cgroup"},
		{"v2 without cpuset", unified, none, 1, ""},
	} {
		l := cgroupLayoutOf(tc.mounts, tc.controllers)
		root, err := l.root("cpuset")
		if l.version() != tc.version || root != tc.cpusetRoot || (err != nil) != (tc.cpusetRoot == "") {
			t.Errorf("%s: version %d, cpuset root %q (%v); want %d, %q", tc.name, l.version(), root, err, tc.version, tc.cpusetRoot)
		}
	}
}

func TestCgroupDir(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/kubepods/burstable/pod1/abc", "/kubepods/burstable/pod1/abc"},
		{"kubepods/pod1", "/kubepods/pod1"},
		{"kubepods-burstable-pod1_2.slice:cri-containerd:abc", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice/cri-containerd-abc.scope"},
		{"kubepods-pod1.slice:cri-containerd:abc", "/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope"},
		{":cri-containerd:abc", "/system.slice/cri-containerd-abc.scope"},
		{"-.slice:x:y.slice", "/y.slice"},
	} {
		if got, err := CgroupDir(tc.in); err != nil || got != tc.want {
			t.Errorf("CgroupDir(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"a:b", "kubepods.slice/x:y:z", "nodot:x:y", "a--b.slice:x:y"} {
		if got, err := CgroupDir(bad); err == nil {
			t.Errorf("CgroupDir(%q) = %q, want an error", bad, got)
		}
	}
}

func TestParseCPUMax(t *testing.T) {
	for _, tc := range []struct {
		in            string
		quota, period int64
		wantErr       bool
	}{
		{"200000 100000", 200000, 100000, false},
		{"max 100000", -1, 100000, false},
		{"max", 0, 0, true},
		{"x 100000", 0, 0, true},
	} {
		q, p, err := parseCPUMax(tc.in)
		if (err != nil) != tc.wantErr || q != tc.quota || p != tc.period {
			t.Errorf("parseCPUMax(%q) = %d, %d, %v", tc.in, q, p, err)
		}
	}
}

func TestCPUWeightsOf(t *testing.T) {
	for _, tc := range []struct {
		shares int64
		want   []int64
	}{
		{0, []int64{0}},
		{2, []int64{1}},
		{1024, []int64{39, 100}},
		{2048, []int64{79, 174}},
		{262144, []int64{10000}},
	} {
		if got := CPUWeightsOf(tc.shares); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("CPUWeightsOf(%d) = %v, want %v", tc.shares, got, tc.want)
		}
	}
}

// writeFiles writes name → content files under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCgroupV2Files(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cgroup.controllers":           "cpuset cpu memory\n",
		"pinned/cpuset.cpus":           "2-3\n",
		"pinned/cpuset.cpus.effective": "2-3\n",
		"pinned/cpuset.mems":           "0\n",
		"pinned/cpu.weight":            "79\n",
		"pinned/cpu.max":               "200000 100000\n",
		"pinned/memory.max":            "67108864\n",
		"unset/cpuset.cpus":            "\n",
		"unset/cpuset.cpus.effective":  "0-15\n",
		"unset/memory.max":             "max\n",
	})
	pinned := &Cgroup{Path: "/pinned", layout: cgroupLayout{unified: root}}
	v, err := pinned.Values()
	want := CgroupValues{CPUs: cpuset.New(2, 3), Mems: cpuset.New(0), CPUWeight: 79, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 64 * MiB}
	if err != nil || !v.CPUs.Equals(want.CPUs) || !v.Mems.Equals(want.Mems) || v.CPUWeight != want.CPUWeight || v.CPUShares != 0 ||
		v.CPUQuota != want.CPUQuota || v.CPUPeriod != want.CPUPeriod || v.MemoryLimit != want.MemoryLimit {
		t.Errorf("Values() = %+v, %v; want %+v", v, err, want)
	}
	if ok, got, err := pinned.SharesMatch(2048); !ok || err != nil {
		t.Errorf("SharesMatch(2048) = false (%s, %v), want true", got, err)
	}
	if ok, _, _ := pinned.SharesMatch(1024); ok {
		t.Error("SharesMatch(1024) = true for cpu.weight 79")
	}
	if _, err := pinned.CPUShares(); err == nil {
		t.Error("CPUShares on cgroup v2 succeeded")
	}

	unset := &Cgroup{Path: "/unset", layout: cgroupLayout{unified: root}}
	if cpus, err := unset.CPUs(); err != nil || !cpus.IsEmpty() {
		t.Errorf("CPUs() of an unset cpuset = %q, %v; want empty", cpus, err)
	}
	if cpus, err := unset.AllowedCPUs(); err != nil || cpus.String() != "0-15" {
		t.Errorf("AllowedCPUs() of an unset cpuset = %q, %v; want the effective 0-15", cpus, err)
	}
	if limit, err := unset.MemoryLimit(); err != nil || limit != math.MaxInt64 {
		t.Errorf("MemoryLimit() of memory.max \"max\" = %d, %v", limit, err)
	}
}

func TestEnableControllers(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n"})
	if err := EnableControllers(root, "cpuset", "cpu", "hugetlb"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
	if err != nil || string(data) != "+cpuset +cpu" {
		t.Errorf("cgroup.subtree_control = %q (%v), want the offered controllers asked for: %q", data, err, "+cpuset +cpu")
	}
	v1 := t.TempDir()
	if err := EnableControllers(v1, "cpuset"); err != nil {
		t.Errorf("on a directory without cgroup.controllers (cgroup v1): %v", err)
	}
	if _, err := os.Stat(filepath.Join(v1, "cgroup.subtree_control")); err == nil {
		t.Error("wrote cgroup.subtree_control in a cgroup v1 directory")
	}
}
