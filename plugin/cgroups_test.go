package plugin

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// The fixture trees below are cgroup trees as a node has them, with the
// files the reader and describe look at. A pod's cgroup parent is what the
// kubelet gives CRI; the container's cgroups path is what containerd 2.4
// derives from it and NRI delivers (internal/cri/server/helpers.go
// getCgroupsPath): "<parent>/<id>" under cgroupfs, and
// "<last element of the parent>:cri-containerd:<id>" under systemd, which
// runc creates as the scope cri-containerd-<id>.scope in the parent.
const (
	podUID = "6f1b8c7e-3b1a-4c2e-9d8f-1a2b3c4d5e6f"
	// systemdUID is the pod UID as the kubelet's systemd driver escapes it.
	systemdUID = "6f1b8c7e_3b1a_4c2e_9d8f_1a2b3c4d5e6f"
	ctrID      = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

var (
	// Burstable and Guaranteed pods under each driver: the kubelet's
	// cgroup parent and containerd's cgroups path of the container.
	cgroupfsBurstableParent  = "/kubepods/burstable/pod" + podUID
	cgroupfsBurstablePath    = cgroupfsBurstableParent + "/" + ctrID
	cgroupfsGuaranteedParent = "/kubepods/pod" + podUID
	cgroupfsGuaranteedPath   = cgroupfsGuaranteedParent + "/" + ctrID
	systemdBurstableParent   = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUID + ".slice"
	systemdBurstablePath     = "kubepods-burstable-pod" + systemdUID + ".slice:cri-containerd:" + ctrID
	systemdGuaranteedParent  = "/kubepods.slice/kubepods-pod" + systemdUID + ".slice"
	systemdGuaranteedPath    = "kubepods-pod" + systemdUID + ".slice:cri-containerd:" + ctrID
	// scope is the directory runc makes for the container under systemd.
	scope = "/cri-containerd-" + ctrID + ".scope"
)

// writeTree writes files (path relative to root → content; a path ending
// in / is a directory) under a new temporary root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		if strings.HasSuffix(path, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// v1Tree is cgroup v1 as a legacy node mounts it: one hierarchy per
// controller under a tmpfs, the top cpuset with its own files.
func v1Tree(extra map[string]string) map[string]string {
	files := map[string]string{
		"cpu/": "", "cpuacct/": "", "memory/": "", "pids/": "", "systemd/": "",
		"cpuset/cpuset.cpus":                    "0-7\n",
		"cpuset/cpuset.effective_cpus":          "0-7\n",
		"cpuset/cpuset.mems":                    "0\n",
		"cpuset/cpuset.memory_pressure_enabled": "0\n",
		"cpuset/kubepods/cpuset.cpus":           "0-7\n",
		"cpuset/kubepods/burstable/cpuset.cpus": "0-7\n",
		"cpuset/kubepods.slice/cpuset.cpus":     "0-7\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

// hybridTree is this project's machine (and systemd's hybrid mode): v1
// controllers with a cgroup2 mount at unified/ that holds no controller.
func hybridTree(extra map[string]string) map[string]string {
	files := v1Tree(extra)
	files["unified/cgroup.controllers"] = "\n"
	files["unified/cgroup.procs"] = "1\n"
	return files
}

// v2Tree is the unified hierarchy as the host sees it: the root has no
// cgroup.type, every cgroup below has.
func v2Tree(extra map[string]string) map[string]string {
	files := map[string]string{
		"cgroup.controllers":             "cpuset cpu io memory hugetlb pids rdma misc\n",
		"cgroup.subtree_control":         "cpuset cpu io memory pids\n",
		"cpuset.cpus.effective":          "0-7\n",
		"kubepods/cgroup.type":           "domain\n",
		"kubepods.slice/cgroup.type":     "domain\n",
		"kubepods/burstable/cgroup.type": "domain\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

// v2Container returns a v2 container cgroup's files under dir.
func v2Container(dir, cpus, effective string) map[string]string {
	return map[string]string{
		dir + "/cgroup.type":           "domain\n",
		dir + "/cpuset.cpus":           cpus,
		dir + "/cpuset.cpus.effective": effective,
	}
}

// TestCgroupReader reads containers' cpusets on every tree and driver from
// the cgroups paths NRI delivers.
func TestCgroupReader(t *testing.T) {
	v1 := writeTree(t, v1Tree(map[string]string{
		"cpuset" + cgroupfsBurstablePath + "/cpuset.cpus":       "2-3\n",
		"cpuset" + cgroupfsGuaranteedPath + "/cpuset.cpus":      "4\n",
		"cpuset" + cgroupfsBurstableParent + "/bad/cpuset.cpus": "5-x\n",
	}))
	hybridSystemd := writeTree(t, hybridTree(map[string]string{
		"cpuset" + systemdBurstableParent + scope + "/cpuset.cpus":  "0,4\n",
		"cpuset" + systemdGuaranteedParent + scope + "/cpuset.cpus": "6-7\n",
	}))
	v2files := v2Tree(nil)
	for k, v := range v2Container(cgroupfsBurstablePath, "5\n", "5\n") {
		v2files[k] = v
	}
	// Never restricted by the runtime: cpuset.cpus is empty, the kernel
	// gives it the parent's CPUs.
	for k, v := range v2Container(cgroupfsGuaranteedPath, "\n", "0-7\n") {
		v2files[k] = v
	}
	v2 := writeTree(t, v2files)
	v2sd := v2Tree(nil)
	for k, v := range v2Container(systemdBurstableParent+scope, "1-2\n", "1-2\n") {
		v2sd[k] = v
	}
	// CPU 3 went offline: the effective set lost it, what the runtime
	// applied did not.
	for k, v := range v2Container(systemdGuaranteedParent+scope, "2-3\n", "2\n") {
		v2sd[k] = v
	}
	v2systemd := writeTree(t, v2sd)
	// cgroupfsRoot pointing at a v1 cpuset mount itself.
	cpusetMount := writeTree(t, map[string]string{
		"cpuset.cpus": "0-7\n", "cpuset.memory_pressure_enabled": "0\n",
		cgroupfsBurstablePath[1:] + "/cpuset.cpus": "6\n",
	})

	tests := []struct {
		name, root, path, want string
		wantErr                string
	}{
		{"v1 cgroupfs burstable", v1, cgroupfsBurstablePath, "2-3", ""},
		{"v1 cgroupfs guaranteed", v1, cgroupfsGuaranteedPath, "4", ""},
		{"hybrid v1 systemd burstable", hybridSystemd, systemdBurstablePath, "0,4", ""},
		{"hybrid v1 systemd guaranteed", hybridSystemd, systemdGuaranteedPath, "6-7", ""},
		{"v2 cgroupfs", v2, cgroupfsBurstablePath, "5", ""},
		{"v2 cpuset never set reads empty", v2, cgroupfsGuaranteedPath, "", ""},
		{"v2 systemd burstable", v2systemd, systemdBurstablePath, "1-2", ""},
		{"v2 systemd reads what was applied, not the effective set", v2systemd, systemdGuaranteedPath, "2-3", ""},
		{"root is the v1 cpuset mount", cpusetMount, cgroupfsBurstablePath, "6", ""},
		{"missing", v2, "/kubepods/pod9/c9", "", "no such file"},
		{"wrong driver's tree", v2, systemdBurstablePath, "", "no such file"},
		{"unparsable", v1, cgroupfsBurstableParent + "/bad", "", "parsing"},
		{"no path", v2, "", "", "no cgroups path"},
		{"bad slice", v2, "kubepods--burstable.slice:cri-containerd:" + ctrID, "", `invalid systemd slice name "kubepods--burstable.slice"`},
		{"leaves the tree", v2, "/kubepods/../../etc", "", "leaves the cgroup tree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cgroupCPUs(cgroupReader{root: tt.root}, tt.path)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("cpus(%q): %v", tt.path, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("cpus(%q) = %s, %v; want an error with %q", tt.path, got, err, tt.wantErr)
			case err == nil && got.String() != tt.want:
				t.Errorf("cpus(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

func TestExpandSlice(t *testing.T) {
	tests := []struct{ slice, want, err string }{
		{"kubepods.slice", "kubepods.slice", ""},
		{"kubepods-pod12.slice", "kubepods.slice/kubepods-pod12.slice", ""},
		{"kubepods-burstable-pod12_34.slice", "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice", ""},
		{"-.slice", "", ""},
		{"kubepods", "", "invalid"},
		{".slice", "", "invalid"},
		{"-kubepods.slice", "", "invalid"},
		{"a/b.slice", "", "invalid"},
	}
	for _, tt := range tests {
		got, err := expandSlice(tt.slice)
		if got != tt.want || (err == nil) != (tt.err == "") {
			t.Errorf("expandSlice(%q) = %q, %v; want %q (error %q)", tt.slice, got, err, tt.want, tt.err)
		}
	}
}

// TestCgroupTreeDescribed checks what the plugin says at start about the
// tree cgroupfsRoot points at, in particular the views a plugin inside a
// DaemonSet pod has when the host's tree is not mounted there.
func TestCgroupTreeDescribed(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		kind, err string
	}{
		{"v1", v1Tree(nil), "cgroup v1, cpuset hierarchy at", ""},
		{"hybrid v1 (this project's machine)", hybridTree(nil), "cgroup v1 with systemd's hybrid cgroup2 mount", ""},
		{"v2", v2Tree(nil), "cgroup v2 (unified)", ""},
		{"v1 cpuset mount as the root", map[string]string{"cpuset.cpus": "0-7", "cpuset.memory_pressure_enabled": "0", "kubepods/": ""}, "cgroup v1 cpuset hierarchy", ""},
		// What runc mounts at /sys/fs/cgroup in a container: on v2 a
		// cgroup namespace rooted at the container's own cgroup.
		{"v2 cgroup namespace of the plugin's container", map[string]string{
			"cgroup.controllers": "cpuset cpu io memory pids\n", "cgroup.type": "domain\n", "cpuset.cpus": "\n", "cpuset.cpus.effective": "0-7\n",
		}, "cgroup v2", "is a cgroup below the root (the plugin's own cgroup namespace?)"},
		// On v1, a tmpfs with each controller's own cgroup bind-mounted.
		{"v1 container view", map[string]string{"cpuset/cpuset.cpus": "0-7\n", "cpuset/cpuset.effective_cpus": "0-7\n", "memory/": ""},
			"cgroup v1", "is not the top of the cpuset hierarchy"},
		{"v2 without the cpuset controller", v2Tree(map[string]string{"cgroup.controllers": "cpu io memory pids\n"}), "cgroup v2", "the cpuset controller is not available"},
		{"no kubepods", map[string]string{"cgroup.controllers": "cpuset cpu\n"}, "cgroup v2", "no kubepods or kubepods.slice cgroup"},
		{"not a cgroup tree", map[string]string{"devices/": ""}, "", "neither a cgroup v1 cpuset hierarchy nor a cgroup v2 tree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			kind, err := cgroupReader{root: root}.describe()
			if !strings.Contains(kind, tt.kind) {
				t.Errorf("describe() kind %q, want %q", kind, tt.kind)
			}
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("describe() error %v, want %q", err, tt.err)
			}
		})
	}
	if _, err := (cgroupReader{root: filepath.Join(t.TempDir(), "missing")}).describe(); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("describe() of a missing root: %v", err)
	}
}

// TestCgroupReaderOnThisMachine reads the test process's own cgroup on the
// host's tree, from /proc/self/cgroup as a cgroupfs path: its cpuset holds
// every CPU the process may run on. It skips where the machine has no
// cgroup cpuset files the process can see.
func TestCgroupReaderOnThisMachine(t *testing.T) {
	const root = "/sys/fs/cgroup"
	r := cgroupReader{root: root}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	defer f.Close()
	path := ""
	v1 := dirExists(filepath.Join(root, "cpuset"))
	for s := bufio.NewScanner(f); s.Scan(); {
		fields := strings.SplitN(s.Text(), ":", 3)
		if len(fields) != 3 {
			continue
		}
		if v1 && containsWord(strings.ReplaceAll(fields[1], ",", " "), "cpuset") || !v1 && fields[0] == "0" {
			path = fields[2]
		}
	}
	if path == "" {
		t.Skip("this process is in no cpuset cgroup")
	}
	got, err := cgroupCPUs(r, path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("the cpuset controller does not cover this process's cgroup %s: %v", path, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got.IsEmpty() {
		t.Skipf("cgroup %s sets no cpuset (v2: inherited)", path)
	}
	allowed := allowedCPUs(t)
	if !allowed.IsSubsetOf(got) {
		t.Errorf("cgroup %s cpuset.cpus %s does not hold the CPUs this process may run on (%s)", path, got, allowed)
	}
	t.Logf("cgroup %s on %s: cpuset.cpus %s, Cpus_allowed_list %s", path, root, got, allowed)
	// The host's tree is recognized (a machine that is no Kubernetes node
	// has no kubepods cgroup: describe says so).
	kind, err := r.describe()
	if kind == "" {
		t.Errorf("describe() of %s: no kind (%v)", root, err)
	}
	t.Logf("%s: %s (%v)", root, kind, err)
}

func allowedCPUs(t *testing.T) cpuset.CPUSet {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			set, err := cpuset.Parse(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return set
		}
	}
	t.Skip("no Cpus_allowed_list in /proc/self/status")
	return cpuset.New()
}

// cgroupCPUs reads a container's cpuset from its cgroup as a verification
// pass does.
func cgroupCPUs(r cgroupReader, cgroupsPath string) (cpuset.CPUSet, error) {
	file, err := cpusetFile(r.cpusetRoot(), cgroupsPath)
	if err != nil {
		return cpuset.New(), err
	}
	var reader cpusReader
	text, err := reader.read(file)
	if err != nil {
		return cpuset.New(), err
	}
	return parseCgroupCPUs(string(text), file, cpumask.MaxID)
}

// TestCPUsReader: the reader gives a file's whole text however long (a
// fragmented list of 4096 CPUs is several pages), nothing of a longer
// file read before it, and an error that wraps fs.ErrNotExist and names
// the file when there is none.
func TestCPUsReader(t *testing.T) {
	dir := t.TempDir()
	var fragmented []string
	for cpu := 0; cpu < 8192; cpu += 2 {
		fragmented = append(fragmented, strconv.Itoa(cpu))
	}
	long := strings.Join(fragmented, ",")
	var reader cpusReader // one reader for every case, in order
	for _, tc := range []struct {
		name, content, want string
	}{
		{"short", "0-3,104-511\n", "0-3,104-511"},
		{"longer than a page", long + "\n", long},
		{"short after a long one", "5\n", "5"},
		{"empty", "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(path, "cpuset.cpus"), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			text, err := reader.read(filepath.Join(path, "cpuset.cpus"))
			if err != nil || string(text) != tc.want {
				t.Fatalf("read: %q (%d bytes), %v; want %d bytes", text[:min(len(text), 40)], len(text), err, len(tc.want))
			}
		})
	}
	_, err := reader.read(filepath.Join(dir, "gone", "cpuset.cpus"))
	want := "reading cpuset: open " + filepath.Join(dir, "gone", "cpuset.cpus") + ": no such file or directory"
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != want {
		t.Fatalf("read of a missing file: %v, want %q wrapping fs.ErrNotExist", err, want)
	}
}

// BenchmarkCPUsFileRead measures the read of one container's cpuset.cpus
// by the reader against os.ReadFile (the baseline, in the same run), on a
// file of this machine's cgroupfs when there is one and on a regular file.
func BenchmarkCPUsFileRead(b *testing.B) {
	regular := filepath.Join(b.TempDir(), "cpuset.cpus")
	if err := os.WriteFile(regular, []byte("0-3,104-511\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	files := map[string]string{"regular": regular}
	for _, f := range []string{"/sys/fs/cgroup/cpuset/cpuset.cpus", "/sys/fs/cgroup/cpuset.cpus.effective"} {
		if _, err := os.Stat(f); err == nil {
			files["cgroupfs"] = f
			break
		}
	}
	for name, path := range files {
		b.Run(name+"/os.ReadFile", func(b *testing.B) {
			for b.Loop() {
				if _, err := os.ReadFile(path); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/cpusReader", func(b *testing.B) {
			var r cpusReader
			for b.Loop() {
				if _, err := r.readFile(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
