package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"
)

// kepOnline is the 16-CPU node of KEP-5554's checkpoint example.
var kepOnline = cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

// kepView is the part of a checkpoint the KEP's example shows.
type kepView struct {
	PolicyName    string                          `json:"policyName"`
	DefaultCPUSet string                          `json:"defaultCpuSet"`
	Entries       map[string]map[string]diskEntry `json:"entries"`
}

// TestKEP5554WalkThrough applies the six steps of KEP-5554's "Checkpoint
// file example during resize" (its first text, whose per-container
// {original, resized} this file keeps as {baseline, resized}) to one
// state, saves and loads it after each step, and compares the file with
// the KEP's file entry by entry (the checksums differ by design: see
// README.md).
func TestKEP5554WalkThrough(t *testing.T) {
	const pod1, pod2, c1, c2 = "gu-pod-1-uid", "gu-pod-2-uid", "gu-container-1", "gu-container-2"
	steps := []struct {
		name   string
		apply  func(s *State)
		kepDoc string // the KEP's file without its checksum
	}{
		{
			name:   "empty node",
			apply:  func(*State) {},
			kepDoc: `{"policyName":"static","defaultCpuSet":"0-15"}`,
		},
		{
			name: "gu-pod-1 created with 2 CPUs",
			apply: func(s *State) {
				s.SetAssignment(pod1, c1, Assignment{Baseline: cpus(t, "1-2")})
				s.SetDefaultCPUSet(cpus(t, "0,3-15"))
			},
			kepDoc: `{"policyName":"static","defaultCpuSet":"0,3-15",
				"entries":{"gu-pod-1-uid":{"gu-container-1":{"baseline":"1-2","resized":""}}}}`,
		},
		{
			name: "gu-pod-1 grown by 2 CPUs",
			apply: func(s *State) {
				s.SetAssignment(pod1, c1, Assignment{Baseline: cpus(t, "1-2"), Resized: cpus(t, "1-4")})
				s.SetDefaultCPUSet(cpus(t, "0,5-15"))
			},
			kepDoc: `{"policyName":"static","defaultCpuSet":"0,5-15",
				"entries":{"gu-pod-1-uid":{"gu-container-1":{"baseline":"1-2","resized":"1-4"}}}}`,
		},
		{
			name: "gu-pod-1 shrunk by 2 CPUs",
			apply: func(s *State) {
				s.SetAssignment(pod1, c1, Assignment{Baseline: cpus(t, "1-2"), Resized: cpus(t, "1-2")})
				s.SetDefaultCPUSet(cpus(t, "0,3-15"))
			},
			kepDoc: `{"policyName":"static","defaultCpuSet":"0,3-15",
				"entries":{"gu-pod-1-uid":{"gu-container-1":{"baseline":"1-2","resized":"1-2"}}}}`,
		},
		{
			name: "gu-pod-2 created with two 2-CPU containers",
			apply: func(s *State) {
				s.SetAssignment(pod2, c1, Assignment{Baseline: cpus(t, "3-4")})
				s.SetAssignment(pod2, c2, Assignment{Baseline: cpus(t, "5-6")})
				s.SetDefaultCPUSet(cpus(t, "0,7-15"))
			},
			kepDoc: `{"policyName":"static","defaultCpuSet":"0,7-15","entries":{
				"gu-pod-1-uid":{"gu-container-1":{"baseline":"1-2","resized":"1-2"}},
				"gu-pod-2-uid":{"gu-container-1":{"baseline":"3-4","resized":""},
				                "gu-container-2":{"baseline":"5-6","resized":""}}}}`,
		},
		{
			name: "gu-pod-1 deleted, gu-pod-2's first container grown by 2 CPUs",
			apply: func(s *State) {
				s.DeleteAssignment(pod1, c1)
				s.SetAssignment(pod2, c1, Assignment{Baseline: cpus(t, "3-4"), Resized: cpus(t, "1,3-4,7")})
				s.SetAssignment(pod2, c2, Assignment{Baseline: cpus(t, "5-6"), Resized: cpus(t, "5-6")})
				s.SetDefaultCPUSet(cpus(t, "0,2,8-15"))
			},
			kepDoc: `{"policyName":"static","defaultCpuSet":"0,2,8-15","entries":{
				"gu-pod-2-uid":{"gu-container-1":{"baseline":"3-4","resized":"1,3-4,7"},
				                "gu-container-2":{"baseline":"5-6","resized":"5-6"}}}}`,
		},
		{
			name: "first container shrunk by 2, second grown by 2",
			apply: func(s *State) {
				s.SetAssignment(pod2, c1, Assignment{Baseline: cpus(t, "3-4"), Resized: cpus(t, "3-4")})
				s.SetAssignment(pod2, c2, Assignment{Baseline: cpus(t, "5-6"), Resized: cpus(t, "1,5-7")})
			},
			kepDoc: `{"policyName":"static","defaultCpuSet":"0,2,8-15","entries":{
				"gu-pod-2-uid":{"gu-container-1":{"baseline":"3-4","resized":"3-4"},
				                "gu-container-2":{"baseline":"5-6","resized":"1,5-7"}}}}`,
		},
	}

	store := newTestStore(t)
	s := New(kepOnline)
	for i, step := range steps {
		s = s.Clone() // a saved state is never modified
		step.apply(s)
		if err := store.Save(s); err != nil {
			t.Fatalf("step %d (%s): Save: %v", i, step.name, err)
		}
		data, err := os.ReadFile(store.Path())
		if err != nil {
			t.Fatal(err)
		}
		var got, want kepView
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("step %d (%s): file is not JSON: %v", i, step.name, err)
		}
		if err := json.Unmarshal([]byte(step.kepDoc), &want); err != nil {
			t.Fatalf("step %d: bad KEP document in test: %v", i, err)
		}
		if got.PolicyName != want.PolicyName || got.DefaultCPUSet != want.DefaultCPUSet {
			t.Errorf("step %d (%s): policyName %q defaultCpuSet %q, KEP has %q %q",
				i, step.name, got.PolicyName, got.DefaultCPUSet, want.PolicyName, want.DefaultCPUSet)
		}
		if !entriesEqual(got.Entries, want.Entries) {
			t.Errorf("step %d (%s): entries\n got %v\nwant %v", i, step.name, got.Entries, want.Entries)
		}
		loaded, err := store.Load(kepOnline)
		if err != nil {
			t.Fatalf("step %d (%s): Load: %v", i, step.name, err)
		}
		if !loaded.Equal(s) {
			t.Errorf("step %d (%s): loaded state differs from saved state", i, step.name)
		}
	}
}

func entriesEqual(a, b map[string]map[string]diskEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for pod, containers := range a {
		if len(containers) != len(b[pod]) {
			return false
		}
		for name, e := range containers {
			if other, ok := b[pod][name]; !ok || other != e {
				return false
			}
		}
	}
	return true
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		state func(t *testing.T) *State
	}{
		{"empty", func(*testing.T) *State { return New(cpuset.New()) }},
		{"shared pool only", func(t *testing.T) *State { return New(cpus(t, "0-15")) }},
		{"assignments, ids and pod resources", func(t *testing.T) *State { return sampleState(t) }},
		{"pod resources without assignments", func(t *testing.T) *State {
			s := New(cpus(t, "0-15"))
			s.SetPodResources("burstable", PodRecord{Resources: ResourceRecord{CPUShares: 2, MemoryLimit: -1}})
			return s
		}},
		{"holds and a configuration record", func(t *testing.T) *State { return sampleStateFull(t) }},
		{"device nodes", func(t *testing.T) *State {
			s := New(cpus(t, "0,4-15"))
			s.SetAssignment("p", "first", Assignment{Baseline: cpus(t, "1"), DeviceNodes: nodes(t, "0")})
			s.SetAssignment("p", "last", Assignment{Baseline: cpus(t, "2"), Resized: cpus(t, "2-3"), DeviceNodes: nodes(t, "63")})
			s.SetAssignment("p", "every", Assignment{Baseline: cpus(t, "1"), Init: true, DeviceNodes: nodes(t, "0-63")})
			return s
		}},
		{"holds since the zero time and in another zone", func(t *testing.T) *State {
			s := New(cpus(t, "3-15"))
			s.SetHold("p1", Hold{CPUs: cpus(t, "0-1"), Since: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", -7*3600))})
			s.SetHold("p2", Hold{CPUs: cpus(t, "2"), Since: time.Time{}})
			s.SetConfigRecord(ConfigRecord{})
			return s
		}},
		{"names that need escaping", func(t *testing.T) *State {
			s := New(cpus(t, "0"))
			s.SetAssignment(`p"<&>\u00e9`, "c\n\t", Assignment{Baseline: cpus(t, "1")})
			s.SetContainer("id é", ContainerRef{PodUID: `p"<&>\u00e9`, Name: "c\n\t"})
			return s
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.state(t)
			data, err := Marshal(s)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got, err := Unmarshal(data, kepOnline)
			if err != nil {
				t.Fatalf("Unmarshal: %v\n%s", err, data)
			}
			if !got.Equal(s) {
				t.Errorf("round trip changed the state\n%s", data)
			}
			again, err := Marshal(got)
			if err != nil || !bytes.Equal(again, data) {
				t.Errorf("encoding is not stable: %v\n%s\n%s", err, data, again)
			}
		})
	}
}

// TestChecksumIsCRC32COfCanonicalEncoding checks the documented algorithm
// independently of the code that writes it: CRC-32C of the file with the
// checksum's value replaced by 0.
func TestChecksumIsCRC32COfCanonicalEncoding(t *testing.T) {
	data, err := Marshal(sampleStateFull(t))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`,"checksum":(\d+)}$`).FindSubmatchIndex(data)
	if m == nil {
		t.Fatalf("checksum is not the last field:\n%s", data)
	}
	claimed, err := strconv.ParseUint(string(data[m[2]:m[3]]), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	canonical := append(append([]byte{}, data[:m[0]]...), `,"checksum":0}`...)
	if sum := crc32.Checksum(canonical, crc32.MakeTable(crc32.Castagnoli)); uint64(sum) != claimed {
		t.Errorf("file says checksum %d, CRC-32C of the canonical encoding is %d", claimed, sum)
	}
	if !bytes.HasPrefix(data, []byte(`{"policyName":"static","formatVersion":4,"defaultCpuSet":`)) {
		t.Errorf("file does not start with the documented fields:\n%s", data)
	}
}

// TestGoldenFile pins the format: the checked-in file (README.md's
// example) loads to the state it was written from, and this build writes
// that state exactly as checked in.
func TestGoldenFile(t *testing.T) {
	file := fmt.Sprintf("checkpoint-v%d.json", FormatVersion)
	golden := goldenFile(t, file)
	s, err := Unmarshal(golden, kepOnline)
	if err != nil {
		t.Fatalf("%s no longer loads: %v", file, err)
	}
	if !s.Equal(sampleStateFull(t)) {
		t.Errorf("%s decodes to a different state", file)
	}
	if data, err := Marshal(s); err != nil || !bytes.Equal(data, golden) {
		t.Errorf("encoding changed (%v):\n got %s\nwant %s", err, data, golden)
	}
}

// TestFormat3IsReadAndRewrittenAsFormat4: testdata/checkpoint-v3.json, a
// file of the first release, loads (its entries without device nodes),
// and the next Save writes it in format 4: the same bytes but for the
// version and the checksum.
func TestFormat3IsReadAndRewrittenAsFormat4(t *testing.T) {
	v3 := goldenFile(t, "checkpoint-v3.json")
	if !bytes.HasPrefix(v3, []byte(`{"policyName":"static","formatVersion":3,`)) {
		t.Fatalf("checkpoint-v3.json is not of format 3:\n%s", v3)
	}
	want := reseal(t, bytes.Replace(v3, []byte(`"formatVersion":3,`), []byte(`"formatVersion":4,`), 1))

	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CheckpointFile)
	if err := os.WriteFile(path, v3, 0o600); err != nil {
		t.Fatal(err)
	}
	st := openTestStore(t, dir)
	s, err := st.Load(kepOnline)
	if err != nil {
		t.Fatalf("a format 3 file does not load: %v", err)
	}
	if !s.Equal(sampleStateV3(t)) {
		t.Errorf("checkpoint-v3.json decodes to a different state")
	}
	for ref, a := range s.Assignments() {
		if a.DeviceNodes != 0 {
			t.Errorf("%s: device nodes %s from a format that has none", ref, a.DeviceNodes)
		}
	}
	if err := st.Save(s); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("a format 3 state saved (%v):\n got %s\nwant %s", err, got, want)
	}
}

// TestFormat3HasNoDeviceNodes: format 3 is decoded by its own rules, so a
// format 3 file with "deviceNodes" (which only format 4 has) is refused
// even when its checksum matches.
func TestFormat3HasNoDeviceNodes(t *testing.T) {
	v3 := goldenFile(t, "checkpoint-v3.json")
	spoiled := reseal(t, bytes.Replace(v3, []byte(`"resized":"1-4"}`), []byte(`"resized":"1-4","deviceNodes":"0"}`), 1))
	if bytes.Equal(spoiled, v3) {
		t.Fatal("checkpoint-v3.json has no entry app with resized 1-4")
	}
	_, err := Unmarshal(spoiled, kepOnline)
	if want := `bad JSON for format version 3: json: unknown field "deviceNodes"`; err == nil || err.Error() != want {
		t.Errorf("Unmarshal: %v, want %s", err, want)
	}
	as4 := reseal(t, bytes.Replace(spoiled, []byte(`"formatVersion":3,`), []byte(`"formatVersion":4,`), 1))
	if s, err := Unmarshal(as4, kepOnline); err != nil {
		t.Errorf("the same file as format 4: %v", err)
	} else if a, _ := s.Assignment("pod-a", "app"); a.DeviceNodes.String() != "0" {
		t.Errorf("the same file as format 4: app's device nodes %q, want \"0\"", a.DeviceNodes)
	}
}

// goldenFile returns the content of testdata/<name> without its final
// newline.
func goldenFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(data, []byte("\n"))
}

// reseal gives a compact checkpoint file the checksum that matches it, as
// README.md describes the checksum: the CRC-32C of the file with
// "checksum":0.
func reseal(t *testing.T, file []byte) []byte {
	t.Helper()
	sum := regexp.MustCompile(`,"checksum":\d+}$`)
	if !sum.Match(file) {
		t.Fatalf("the checksum is not the last field:\n%s", file)
	}
	canonical := sum.ReplaceAll(file, []byte(`,"checksum":0}`))
	return sum.ReplaceAll(file, []byte(fmt.Sprintf(`,"checksum":%d}`, crc32.Checksum(canonical, crc32.MakeTable(crc32.Castagnoli)))))
}

func TestMarshalRefusesInconsistentState(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *State)
		reason string
	}{
		{"overlap", func(s *State) { s.SetAssignment("pod-c", "x", Assignment{Baseline: cpus(t, "7")}) }, "overlap on CPUs"},
		{"shared", func(s *State) { s.SetDefaultCPUSet(cpus(t, "0,5")) }, "overlaps defaultCpuSet"},
		{"a shared CPU no checkpoint can hold", func(s *State) { s.ReturnShared(cpuset.New(-3, 70000)) },
			"defaultCpuSet names CPUs [-3 70000], outside the CPU ids 0-65535 a checkpoint can hold"},
		{"shrunk below baseline", func(s *State) {
			s.SetAssignment("pod-a", "app", Assignment{Baseline: cpus(t, "1-2"), Resized: cpus(t, "2-3")})
		}, "does not contain baseline"},
		{"delayed and shared", func(s *State) {
			s.SetAssignment("pod-b", "db", Assignment{Baseline: cpus(t, "6-7"), Delayed: cpus(t, "8"), ReleaseAt: time.Unix(1, 0)})
		}, `pod "pod-b" container "db" (CPUs "6-8") overlaps defaultCpuSet "0,8-15" on CPUs "8"`},
		{"released at a year RFC 3339 cannot write", func(s *State) {
			s.SetDefaultCPUSet(cpus(t, "0,9-15"))
			s.SetAssignment("pod-b", "db", Assignment{Baseline: cpus(t, "6-7"), Delayed: cpus(t, "8"), ReleaseAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)})
		}, "release time -0001-01-01 00:00:00 +0000 UTC is outside the years 0000-9999"},
		{"dangling id", func(s *State) { s.SetContainer("c-x", ContainerRef{PodUID: "pod-x", Name: "x"}) }, "has no entry"},
		{"held and assigned", func(s *State) { s.SetHold("pod-x", Hold{CPUs: cpus(t, "2")}) }, `hold of pod "pod-x" (CPUs "2") and pod "pod-a" container "app"`},
		{"held and shared", func(s *State) { s.SetHold("pod-x", Hold{CPUs: cpus(t, "15")}) }, "overlaps defaultCpuSet"},
		{"held by nothing", func(s *State) { s.SetHold("pod-x", Hold{}) }, `hold of pod "pod-x": empty cpuset`},
		{"held since a year RFC 3339 cannot write", func(s *State) {
			s.SetDefaultCPUSet(cpus(t, "0,9-15"))
			s.SetHold("pod-x", Hold{CPUs: cpus(t, "8"), Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
		}, "outside the years 0000-9999"},
		{"a pod UID that is not UTF-8", func(s *State) { s.SetPodResources("pod\xff", PodRecord{}) }, `pod UID "pod\xff" is not valid UTF-8`},
		{"a container name that is not UTF-8", func(s *State) {
			s.SetDefaultCPUSet(cpus(t, "0,9-15"))
			s.SetAssignment("pod-b", "x\xc3", Assignment{Baseline: cpus(t, "8")})
		}, `container name "x\xc3" is not valid UTF-8`},
		{"a container id that is not UTF-8", func(s *State) { s.SetContainer("\xed\xa0\x80", ContainerRef{PodUID: "pod-b", Name: "db"}) },
			`container id "\xed\xa0\x80" is not valid UTF-8`},
		{"a configuration value that is not UTF-8", func(s *State) {
			s.SetConfigRecord(ConfigRecord{Keys: map[string]string{"k": "\xff"}})
		}, `configuration value "\xff" is not valid UTF-8`},
		{"reserved CPU id Load cannot read", func(s *State) { s.SetConfigRecord(ConfigRecord{ReservedCPUs: cpuset.New(-1)}) }, "config reservedCpuSet names CPUs [-1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sampleState(t)
			tc.change(s)
			_, err := Marshal(s)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Marshal error = %v, want one containing %q", err, tc.reason)
			}
			err = newTestStore(t).Save(s)
			var inconsistent *InconsistentError
			if !errors.As(err, &inconsistent) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Save error = %v, want an *InconsistentError containing %q", err, tc.reason)
			}
		})
	}
	if _, err := Marshal(nil); err == nil {
		t.Error("Marshal(nil) succeeded")
	}
}

func TestReformattedCheckpointStillVerifies(t *testing.T) {
	data, err := Marshal(sampleState(t))
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, data, "", "  "); err != nil {
		t.Fatal(err)
	}
	s, err := Unmarshal(indented.Bytes(), kepOnline)
	if err != nil {
		t.Fatalf("indented checkpoint refused: %v", err)
	}
	if !s.Equal(sampleState(t)) {
		t.Error("indented checkpoint decodes to a different state")
	}
}
