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
