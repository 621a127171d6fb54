package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// TestExportKubeletV2: the export holds, for the kubelet 1.36, each
// pinned container's CPUs as it holds them now (a resized one's resized
// set, with CPUs kept for a scale-down delay), not init containers'; the
// other online CPUs as the default set, a held pod's CPUs included; and
// it reads back through the import to the same CPUs.
func TestExportKubeletV2(t *testing.T) {
	online := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	st := New(online)
	st.SetAssignment("pod-a", "app", Assignment{Baseline: cpuset.New(1, 2), Resized: cpuset.New(1, 2, 3)})
	st.SetAssignment("pod-a", "init", Assignment{Baseline: cpuset.New(1), Init: true})
	st.SetAssignment("pod-b", "app", Assignment{Baseline: cpuset.New(4), Delayed: cpuset.New(5)})
	st.SetDefaultCPUSet(cpuset.New(0, 6, 7))

	data, err := ExportKubeletV2(st, online)
	if err != nil {
		t.Fatal(err)
	}
	var cp map[string]any
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatal(err)
	}
	want := `{"policyName":"static","defaultCpuSet":"0,6-7","entries":{"pod-a":{"app":"1-3"},"pod-b":{"app":"4-5"}},"checksum":0}`
	if string(data) != want {
		t.Errorf("export:\n%s\nwant\n%s", data, want)
	}

	path := filepath.Join(t.TempDir(), "cpu_manager_state")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	back, _, err := ImportKubelet(path, online, nil)
	if err != nil {
		t.Fatalf("the export does not read back: %v", err)
	}
	for _, c := range []struct {
		pod, name, cpus string
	}{{"pod-a", "app", "1-3"}, {"pod-b", "app", "4-5"}} {
		if a, ok := back.Assignment(c.pod, c.name); !ok || a.Assigned().String() != c.cpus {
			t.Errorf("%s/%s read back as %+v (%v), want %s", c.pod, c.name, a, ok, c.cpus)
		}
	}

	bad := New(online)
	bad.SetAssignment("pod-c", "app", Assignment{Baseline: cpuset.New(9)})
	if _, err := ExportKubeletV2(bad, online); err == nil || !strings.Contains(err.Error(), "not all online") {
		t.Errorf("an assignment beyond the online CPUs exported: %v", err)
	}
}

// TestExportKubeletV4: the V4 export has V2's fields (checksum 0) and the
// data with each container's baseline, its original CPUs; the data's
// checksum is the kubelet's (FNV-1a of "(string)" and the data, checked
// against the kubelet's own code in test/kubernetes/lifecycle and
// test/kubelet137); it reads back through the import with the original
// CPUs as baselines.
func TestExportKubeletV4(t *testing.T) {
	online := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	st := New(online)
	st.SetAssignment("pod-a", "app", Assignment{Baseline: cpuset.New(1, 2), Resized: cpuset.New(1, 2, 3)})
	st.SetAssignment("pod-a", "init", Assignment{Baseline: cpuset.New(1), Init: true})
	st.SetAssignment("pod-b", "app", Assignment{Baseline: cpuset.New(4)})
	st.SetDefaultCPUSet(cpuset.New(0, 5, 6, 7))

	file, err := ExportKubeletV4(st, online)
	if err != nil {
		t.Fatal(err)
	}
	wantData := `{"policyName":"static","defaultCpuSet":"0,5-7","entries":{"pod-a":{"app":"1-3"},"pod-b":{"app":"4"}},` +
		`"baselines":{"pod-a":{"app":{"baseline":"1-2"}},"pod-b":{"app":{"baseline":"4"}}}}`
	var cp struct {
		PolicyName, DefaultCPUSet string
		Entries                   map[string]map[string]string
		Checksum                  uint64
		Data                      string
		DataChecksum              uint64
	}
	if err := json.Unmarshal(file, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Data != wantData {
		t.Errorf("data:\n%s\nwant\n%s", cp.Data, wantData)
	}
	if cp.PolicyName != "static" || cp.DefaultCPUSet != "0,5-7" || cp.Entries["pod-a"]["app"] != "1-3" || cp.Checksum != 0 {
		t.Errorf("V2 fields: %+v", cp)
	}
	for _, tc := range []struct {
		s    string
		want uint64
	}{
		// FNV-1a (32 bits) of "(string)" and s.
		{"", uint64(fnv32a("(string)"))},
		{cp.Data, uint64(fnv32a("(string)" + cp.Data))},
	} {
		if got := kubeletStringChecksum(tc.s); got != tc.want {
			t.Errorf("kubeletStringChecksum(%q) = %#x, want %#x", tc.s, got, tc.want)
		}
	}
	if cp.DataChecksum != kubeletStringChecksum(cp.Data) {
		t.Errorf("dataChecksum %d, want %d", cp.DataChecksum, kubeletStringChecksum(cp.Data))
	}

	path := filepath.Join(t.TempDir(), "cpu_manager_state")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	back, _, err := ImportKubelet(path, online, nil)
	if err != nil {
		t.Fatalf("the export does not read back: %v", err)
	}
	if a, ok := back.Assignment("pod-a", "app"); !ok || a.Baseline.String() != "1-2" || a.Assigned().String() != "1-3" {
		t.Errorf("pod-a/app read back as %+v (%v), want baseline 1-2, assigned 1-3", a, ok)
	}
}

// fnv32a is FNV-1a, 32 bits, written out (the test's own reference).
func fnv32a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
