package config

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// TestAllocationKeysRoundTrip: a configuration's allocation keys, put on
// another configuration, give that one the first one's CPU assignments
// and keep its own other keys.
func TestAllocationKeysRoundTrip(t *testing.T) {
	recorded, err := Parse([]byte(`
reservedSystemCPUs: "0-1"
isolatedCPUs: exclusive
cpuManagerPolicyOptions: {full-pcpus-only: "true"}
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
topologyManagerPolicyOptions: {max-allowable-numa-nodes: "4"}
logLevel: debug
`))
	if err != nil {
		t.Fatal(err)
	}
	current, err := Parse([]byte("reservedCPUCount: 2\nlogLevel: warn\nstateDir: /elsewhere\n"))
	if err != nil {
		t.Fatal(err)
	}
	keys := recorded.AllocationKeys()
	if len(keys) != 7 {
		t.Errorf("allocation keys %v, want the 7 keys applied without exclusive containers", keys)
	}
	under, err := current.WithKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	if ch := Diff(recorded, under); len(ch.WithoutExclusive) != 0 {
		t.Errorf("under the recorded keys, allocation keys still differ: %s", ch)
	}
	if under.LogLevel != current.LogLevel || under.StateDir != "/elsewhere" {
		t.Errorf("the other keys changed: logLevel %v, stateDir %s", under.LogLevel, under.StateDir)
	}
	if !under.ReservedSystemCPUs.Equals(cpuset.New(0, 1)) || under.ReservedCPUCount != 0 {
		t.Errorf("reserved %s, count %d; want the recorded list", under.ReservedSystemCPUs, under.ReservedCPUCount)
	}
	if _, err := current.WithKeys(map[string]string{"stateDir": `"/x"`}); err == nil || !strings.Contains(err.Error(), "stateDir is not a key of the CPU assignments") {
		t.Errorf("WithKeys of a restart key: %v", err)
	}
}

// TestWithReservedCPUs: a configuration reserving by count or by list,
// given a list, reserves exactly that list and keeps its other keys.
func TestWithReservedCPUs(t *testing.T) {
	for _, doc := range []string{"reservedCPUCount: 4\nalignMemory: true\n", "reservedSystemCPUs: \"0-3\"\nalignMemory: true\n"} {
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.WithReservedCPUs(cpuset.New(0, 2))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if !got.ReservedSystemCPUs.Equals(cpuset.New(0, 2)) || got.ReservedCPUCount != 0 || !got.AlignMemory {
			t.Errorf("%q: reserved %s, count %d, alignMemory %v; want exactly 0,2, no count, alignMemory kept",
				doc, got.ReservedSystemCPUs, got.ReservedCPUCount, got.AlignMemory)
		}
	}
}

// TestMergeKeepsRestartKeys: a reloaded file's keys that apply only at a
// restart keep their running values.
func TestMergeKeepsRestartKeys(t *testing.T) {
	running := Default()
	file, err := Parse([]byte("stateDir: /new\nlogLevel: debug\nreservedSystemCPUs: \"0-1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := Merge(running, file)
	if got.StateDir != running.StateDir || got.LogLevel != file.LogLevel || !got.ReservedSystemCPUs.Equals(file.ReservedSystemCPUs) {
		t.Errorf("merged stateDir %s, logLevel %v, reserved %s; want the running stateDir and the file's others", got.StateDir, got.LogLevel, got.ReservedSystemCPUs)
	}
}
