package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"k8s.io/utils/cpuset"
)

// newTestStore returns a store in a fresh directory whose log goes
// nowhere, closed when the test ends.
func newTestStore(t testing.TB) *Store {
	t.Helper()
	return openTestStore(t, filepath.Join(t.TempDir(), "state"))
}

// openTestStore returns a store of dir whose log goes nowhere, closed when
// the test ends.
func openTestStore(t testing.TB, dir string) *Store {
	t.Helper()
	st, err := NewStore(dir)
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return quietStore(st)
}

// quietStore makes st log nowhere and returns it.
func quietStore(st *Store) *Store {
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	st.SetLogger(quiet)
	return st
}

func TestNewStoreCreatesPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	st, err := NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("state directory mode %o, want 700", perm)
	}
	if st.Path() != filepath.Join(dir, "cpu_manager_state") {
		t.Errorf("Path() = %q", st.Path())
	}
}

// TestNewStoreMakesTheDirectoryPrivate: a directory created by someone
// else with another mode (a kubelet hostPath is 0755) becomes 0700, and
// the store says so; one that is 0700 already is left alone quietly.
func TestNewStoreMakesTheDirectoryPrivate(t *testing.T) {
	for _, mode := range []os.FileMode{0o755, 0o777, 0o700} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			mkdirMode(t, dir, mode)
			hook, perm := openLogged(t, dir)
			if perm != 0o700 {
				t.Errorf("state directory mode %o, want 700", perm)
			}
			entries := hook.AllEntries()
			if mode == 0o700 {
				if len(entries) != 0 {
					t.Errorf("logged %q for a directory that was private", entries[0].Message)
				}
				return
			}
			if len(entries) != 1 || entries[0].Level != logrus.InfoLevel ||
				entries[0].Message != "made the state directory private: mode 0700" ||
				entries[0].Data["mode"] != fmt.Sprintf("%04o", mode) || entries[0].Data["stateDir"] != dir {
				t.Errorf("log %+v, want one info entry with the old mode", entries)
			}
		})
	}
}

// mkdirMode creates dir with mode, past the umask.
func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// openLogged opens the store of dir with a logger the test reads, closes
// it when the test ends, and returns that log and dir's mode once opened.
func openLogged(t *testing.T, dir string) (*test.Hook, os.FileMode) {
	t.Helper()
	logger, hook := test.NewNullLogger()
	st, err := NewStore(dir, WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return hook, info.Mode().Perm()
}

// TestNewStoreLeavesASharedDirectoryAsItIs: a state directory that holds
// other programs' files (stateDir set to /var/lib by mistake) keeps its
// mode, and the store says why; the store's own leftovers and a
// lost+found do not make a directory shared.
func TestNewStoreLeavesASharedDirectoryAsItIs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		private bool
	}{
		{"another program's files", []string{"dpkg", "cpu_manager_state"}, false},
		{"the store's own files and lost+found", []string{"cpu_manager_state", "cpu_manager_state.lock", "cpu_manager_state.corrupt-20260101T000000.000000000Z", "lost+found"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			mkdirMode(t, dir, 0o755)
			for _, name := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			hook, perm := openLogged(t, dir)
			if want := map[bool]os.FileMode{true: 0o700, false: 0o755}[tc.private]; perm != want {
				t.Errorf("state directory mode %o, want %o", perm, want)
			}
			warned := false
			for _, e := range hook.AllEntries() {
				warned = warned || (e.Level == logrus.WarnLevel && strings.Contains(e.Message, "not the plugin's"))
			}
			if warned == tc.private {
				t.Errorf("warned about foreign files: %v, want %v", warned, !tc.private)
			}
		})
	}
}

// TestKubeletsCheckpointIsNeverTouched: a state directory holding the
// kubelet's own cpu_manager_state (stateDir set to /var/lib/kubelet) is
// refused with the reason, whatever the checkpoint's layout and policy
// (none, the kubelet's policy beside this plugin, included): Load neither
// moves the file aside nor lets a Save write over it.
func TestKubeletsCheckpointIsNeverTouched(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "kubelet", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no kubelet checkpoints in testdata/kubelet (%v)", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var header struct {
				PolicyName string `json:"policyName"`
			}
			if err := json.Unmarshal(data, &header); err != nil || header.PolicyName == "" {
				t.Fatalf("%s: no policyName (%v)", file, err)
			}
			dir := filepath.Join(t.TempDir(), "kubelet")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, CheckpointFile)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			st := openTestStore(t, dir)
			_, err = st.Load(kepOnline)
			var kubelet *KubeletCheckpointError
			if !errors.As(err, &kubelet) || kubelet.Path != path || kubelet.Policy != header.PolicyName ||
				!strings.Contains(err.Error(), fmt.Sprintf("is the kubelet's CPU manager checkpoint (policy %q)", header.PolicyName)) {
				t.Fatalf("Load of the kubelet's checkpoint: %v, want a *KubeletCheckpointError naming it", err)
			}
			if err := st.Save(sampleState(t)); !errors.As(err, &kubelet) {
				t.Errorf("Save over the kubelet's checkpoint: %v, want it refused", err)
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
				t.Errorf("the kubelet's checkpoint was moved or changed (%v)", err)
			}
			if entries, err := os.ReadDir(dir); err != nil || len(entries) != 2 {
				t.Errorf("the state directory holds %v (%v), want the kubelet's checkpoint and the store's lock alone", entries, err)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	st := newTestStore(t)
	_, err := st.Load(kepOnline)
	if !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Load of a missing file: %v, want ErrNoCheckpoint", err)
	}
	var cerr *CorruptError
	if errors.As(err, &cerr) {
		t.Error("a missing file is reported as corrupt")
	}
}

func TestStateFilesArePrivate(t *testing.T) {
	st := newTestStore(t)
	if err := st.Save(sampleState(t)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(st.Path())
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %o, want 600", e.Name(), perm)
		}
	}
	want := []string{"cpu_manager_state", "cpu_manager_state.lock"}
	if !slices.Equal(names, want) {
		t.Errorf("state directory after Save and Close holds %q, want %q", names, want)
	}

	reopened := openTestStore(t, dir)
	got, err := reopened.Load(kepOnline)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(sampleState(t)) {
		t.Error("loaded state differs from saved state")
	}
}

func TestRefusedSaveKeepsPreviousState(t *testing.T) {
	st := newTestStore(t)
	if err := st.Save(sampleState(t)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(st.Path())
	before := readStateFiles(t, dir)

	bad := sampleState(t)
	bad.SetAssignment("pod-x", "x", Assignment{Baseline: cpus(t, "1")}) // overlaps pod-a/app
	if err := st.Save(bad); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("Save of an inconsistent state: %v, want an overlap error", err)
	}
	if after := readStateFiles(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Error("a refused Save changed the state files")
	}
}

// readStateFiles returns the content of every file in dir by name.
func readStateFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

// inspectDir returns the state saved in dir, or fails the test.
func inspectDir(t testing.TB, dir string) *State {
	t.Helper()
	s, err := Inspect(dir, kepOnline)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return s
}

// TestLeftoverTempFilesAreRemovedBySave: a crash in a Save leaves its temp
// file; NewStore and Load leave it (they write nothing), the next Save
// removes it.
func TestLeftoverTempFilesAreRemovedBySave(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, "cpu_manager_state.tmp-123456")
	unrelated := filepath.Join(dir, "notes.txt")
	for _, p := range []string{leftover, unrelated} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st := openTestStore(t, dir)
	if _, err := st.Load(kepOnline); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Load: %v", err)
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Errorf("NewStore or Load removed %s: %v", leftover, err)
	}
	if err := st.Save(sampleState(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Save left %s behind (stat: %v)", leftover, err)
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Errorf("Save removed an unrelated file: %v", err)
	}
}

// validCheckpoint returns a consistent checkpoint of the current version
// to spoil.
func validCheckpoint(t testing.TB) diskCheckpoint {
	return encodeDisk(sampleStateFull(t))
}

// sealed encodes cp with a checksum that matches, whatever it holds.
func sealed(t testing.TB, cp diskCheckpoint) []byte {
	t.Helper()
	cp.Checksum = 0
	data, err := seal(cp)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// corruptionCases are checkpoints that must never be trusted, each with
// the part of the reason that says what was wrong: sampleStateFull
// spoiled, and other files. online is 0-15.
func corruptionCases(t *testing.T) []struct {
	name   string
	file   []byte
	reason string
} {
	good := sealed(t, validCheckpoint(t))
	spoil := func(f func(cp *diskCheckpoint)) []byte {
		cp := validCheckpoint(t)
		f(&cp)
		return sealed(t, cp)
	}
	return []struct {
		name   string
		file   []byte
		reason string
	}{
		{"empty file", []byte{}, "empty file"},
		{"whitespace only", []byte(" \n"), "only whitespace"},
		{"truncated", good[:len(good)/2], "truncated file: the JSON stops after"},
		{"truncated before the last brace", good[:len(good)-1], "truncated file"},
		{"bad JSON", []byte(`{"policyName": static}`), "bad JSON at byte 16"},
		{"trailing garbage", append(append([]byte{}, good...), "xyz"...), "bad JSON at byte"},
		{"not an object", []byte(`[1,2]`), "top level is a JSON array, not an object"},
		{"checksum mismatch", bytes.Replace(good, []byte(`"baseline":"6-7"`), []byte(`"baseline":"6-9"`), 1),
			"checksum mismatch: the file says"},
		{"checksum of another file", spoilChecksum(good), "checksum mismatch"},
		// (With a policyName it is the kubelet's own checkpoint, which Load
		// refuses without moving it: TestKubeletsCheckpointIsNeverTouched.)
		{"no formatVersion (another program's JSON)", []byte(`{"defaultCpuSet":"0,5-15",
			"entries":{"gu-pod-1-uid":{"gu-container-1":{"original":"1-2","resized":"1-4"}}},"checksum":1822250518}`),
			"no formatVersion: not a checkpoint written by nri-cpumanager"},
		{"formatVersion 0", spoil(func(cp *diskCheckpoint) { cp.FormatVersion = 0 }), "unknown formatVersion 0 (this build reads formats 3 to 4)"},
		{"formatVersion -3", spoil(func(cp *diskCheckpoint) { cp.FormatVersion = -3 }), "unknown formatVersion -3"},
		{"formatVersion 1", spoil(func(cp *diskCheckpoint) { cp.FormatVersion = 1 }),
			"formatVersion 1 is an earlier format that was never released, which this build does not read (it reads formats 3 to 4)"},
		{"formatVersion 2", spoil(func(cp *diskCheckpoint) { cp.FormatVersion = 2 }),
			"formatVersion 2 is an earlier format that was never released, which this build does not read (it reads formats 3 to 4)"},
		{"deviceNodes in a format 3 file", spoil(func(cp *diskCheckpoint) { cp.FormatVersion = 3 }),
			`bad JSON for format version 3: json: unknown field "deviceNodes"`},
		{"formatVersion not a number", []byte(`{"formatVersion":"1"}`), `formatVersion "1" is not an integer`},
		{"unknown field", bytes.Replace(good, []byte(`{"policyName"`), []byte(`{"extra":1,"policyName"`), 1),
			`unknown field "extra"`},
		{"unknown field of an object", bytes.Replace(good, []byte(`"holds":`), []byte(`"held":{},"holds":`), 1),
			`bad JSON for format version 4: json: unknown field "held"`},
		{"unknown policy name", spoil(func(cp *diskCheckpoint) { cp.PolicyName = "none" }),
			`unknown policy name "none"`},
		{"defaultCpuSet does not parse", spoil(func(cp *diskCheckpoint) { cp.DefaultCPUSet = "0,8-x" }),
			`defaultCpuSet "0,8-x" does not parse: "8-x": "x" is not a CPU number`},
		{"baseline does not parse", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"] = diskEntry{Baseline: "7-6"} }),
			`pod "pod-b" container "db": baseline "7-6" does not parse: "7-6": range runs backwards`},
		{"resized does not parse", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"] = diskEntry{Baseline: "6-7", Resized: "6-7,"} }),
			`pod "pod-b" container "db": resized "6-7," does not parse: "": missing CPU number`},
		{"delayed does not parse", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"].Delayed.CPUs = "9-" }),
			`pod "pod-b" container "db": delayed cpus "9-" does not parse`},
		{"deviceNodes out of range", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"] = diskEntry{Baseline: "6-7", DeviceNodes: "0,64"} }),
			`pod "pod-b" container "db": deviceNodes "0,64" does not parse: "64": node 64 is above the largest supported node 63`},
		{"deviceNodes does not parse", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-a"]["app"] = diskEntry{Baseline: "1-2", DeviceNodes: "1-0"} }),
			`pod "pod-a" container "app": deviceNodes "1-0" does not parse: "1-0": range runs backwards`},
		{"deviceNodes not a string", bytes.Replace(good, []byte(`"deviceNodes":"0"`), []byte(`"deviceNodes":[0]`), 1),
			`bad JSON for format version 4: json: cannot unmarshal array into Go struct field diskEntry.entries.deviceNodes of type string`},
		{"release time not RFC 3339", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"].Delayed.ReleaseAt = "soon" }),
			`pod "pod-b" container "db": delayed releaseAt "soon" is not an RFC 3339 time`},
		{"huge CPU number", spoil(func(cp *diskCheckpoint) { cp.DefaultCPUSet = "0-2147483647" }),
			"CPU 2147483647 is above the largest supported CPU 65535"},
		{"defaultCpuSet outside online", spoil(func(cp *diskCheckpoint) { cp.DefaultCPUSet = "0,11-17" }),
			`defaultCpuSet "0,11-17" lies outside the online CPUs "0-15" (CPUs "16-17")`},
		{"assignment outside online", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"] = diskEntry{Baseline: "6-7", Resized: "6-7,31"} }),
			`pod "pod-b" container "db": resized "6-7,31" lies outside the online CPUs "0-15" (CPUs "31")`},
		{"delayed outside online", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"].Delayed.CPUs = "9-10,16" }),
			`pod "pod-b" container "db": delayed "9-10,16" lies outside the online CPUs "0-15" (CPUs "16")`},
		{"empty baseline", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-a"]["sidecar"] = diskEntry{Baseline: "", Resized: "5"} }),
			`pod "pod-a" container "sidecar": empty baseline cpuset`},
		{"resized not a superset of baseline", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-a"]["app"] = diskEntry{Baseline: "1-2", Resized: "2-4"} }),
			`pod "pod-a" container "app": resized "2-4" does not contain baseline "1-2" (missing CPUs "1")`},
		{"delayed without a release time", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"].Delayed.ReleaseAt = "0001-01-01T00:00:00Z" }),
			`pod "pod-b" container "db": delayed CPUs "9-10" have no release time`},
		{"a release time without delayed CPUs", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"].Delayed.CPUs = "" }),
			`pod "pod-b" container "db": release time 2026-11-25T12:00:30.25Z is set but no CPUs are delayed`},
		{"delayed overlaps the assigned set", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"].Delayed.CPUs = "7,9-10" }),
			`pod "pod-b" container "db": delayed "7,9-10" overlaps its assigned CPUs "6-7" on CPUs "7"`},
		{"two pods overlap", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-b"]["db"] = diskEntry{Baseline: "4,6-7"} }),
			`pod "pod-a" container "app" (CPUs "1-4") and pod "pod-b" container "db" (CPUs "4,6-7") overlap on CPUs "4"`},
		{"delayed CPUs in another pod", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-c"] = map[string]diskEntry{"x": {Baseline: "10"}} }),
			`pod "pod-b" container "db" (CPUs "6-7,9-10") and pod "pod-c" container "x" (CPUs "10") overlap on CPUs "10"`},
		{"an init container's CPUs in another pod", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-a"]["setup"] = diskEntry{Baseline: "1-2,6", Init: true} }),
			`pod "pod-a" container "setup" (CPUs "1-2,6") and pod "pod-b" container "db" (CPUs "6-7,9-10") overlap on CPUs "6"`},
		{"two containers of a pod overlap", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-a"]["sidecar"] = diskEntry{Baseline: "4-5"} }),
			`pod "pod-a" container "app" (CPUs "1-4") and pod "pod-a" container "sidecar" (CPUs "4-5") overlap on CPUs "4", and neither is an init container`},
		{"assignment overlaps defaultCpuSet", spoil(func(cp *diskCheckpoint) { cp.DefaultCPUSet = "0,7,11-15" }),
			`pod "pod-b" container "db" (CPUs "6-7,9-10") overlaps defaultCpuSet "0,7,11-15" on CPUs "7"`},
		{"delayed CPUs in defaultCpuSet", spoil(func(cp *diskCheckpoint) { cp.DefaultCPUSet = "0,10-15" }),
			`pod "pod-b" container "db" (CPUs "6-7,9-10") overlaps defaultCpuSet "0,10-15" on CPUs "10"`},
		{"an init container's CPUs in defaultCpuSet", spoil(func(cp *diskCheckpoint) { cp.Entries["pod-a"]["setup"] = diskEntry{Baseline: "1-2,11", Init: true} }),
			`pod "pod-a" container "setup" (CPUs "1-2,11") overlaps defaultCpuSet "0,11-15" on CPUs "11"`},
		{"container id without entry", spoil(func(cp *diskCheckpoint) { cp.Containers["c-ghost"] = diskContainerRef{PodUID: "pod-a", Name: "ghost"} }),
			`containers["c-ghost"] points at pod "pod-a" container "ghost", which has no entry`},
		{"two container ids for one entry", spoil(func(cp *diskCheckpoint) { cp.Containers["c-db-2"] = diskContainerRef{PodUID: "pod-b", Name: "db"} }),
			`containers["c-db"] and containers["c-db-2"] both point at pod "pod-b" container "db"`},
		{"empty container id", spoil(func(cp *diskCheckpoint) {
			delete(cp.Containers, "c-db")
			cp.Containers[""] = diskContainerRef{PodUID: "pod-b", Name: "db"}
		}), `containers has an empty container id (pointing at pod "pod-b" container "db")`},
		{"empty pod UID", spoil(func(cp *diskCheckpoint) {
			cp.Entries[""] = map[string]diskEntry{"x": {Baseline: "11"}}
			cp.DefaultCPUSet = "0,12-15"
		}), "an entry has an empty pod UID"},
		{"empty container name", spoil(func(cp *diskCheckpoint) {
			cp.Entries["pod-b"][""] = diskEntry{Baseline: "11"}
			cp.DefaultCPUSet = "0,12-15"
		}), `pod "pod-b" has an entry with an empty container name`},
		{"config reservedCpuSet does not parse", spoil(func(cp *diskCheckpoint) { cp.Config.ReservedCPUSet = "x" }),
			`config: reservedCpuSet "x" does not parse`},
		{"config reservedCpuSet outside online", spoil(func(cp *diskCheckpoint) { cp.Config.ReservedCPUSet = "0,16" }),
			`config reservedCpuSet "0,16" lies outside the online CPUs "0-15" (CPUs "16")`},
		{"hold does not parse", spoil(func(cp *diskCheckpoint) { cp.Holds["pod-b"] = diskHold{CPUs: "8-", Since: "2026-11-25T12:00:00Z"} }),
			`hold of pod "pod-b": cpus "8-" does not parse`},
		{"hold since not RFC 3339", spoil(func(cp *diskCheckpoint) { cp.Holds["pod-b"] = diskHold{CPUs: "8", Since: "yesterday"} }),
			`hold of pod "pod-b": since "yesterday" is not an RFC 3339 time`},
		{"empty hold", spoil(func(cp *diskCheckpoint) { cp.Holds["pod-b"] = diskHold{CPUs: "", Since: "2026-11-25T12:00:00Z"} }),
			`hold of pod "pod-b": empty cpuset`},
		{"hold outside online", spoil(func(cp *diskCheckpoint) { cp.Holds["pod-b"] = diskHold{CPUs: "8,20", Since: "2026-11-25T12:00:00Z"} }),
			`hold of pod "pod-b" "8,20" lies outside the online CPUs "0-15" (CPUs "20")`},
		{"hold overlaps defaultCpuSet", spoil(func(cp *diskCheckpoint) { cp.DefaultCPUSet = "0,8,11-15" }),
			`hold of pod "pod-b" (CPUs "8") overlaps defaultCpuSet "0,8,11-15" on CPUs "8"`},
		{"hold overlaps an assignment", spoil(func(cp *diskCheckpoint) { cp.Holds["pod-b"] = diskHold{CPUs: "5,8", Since: "2026-11-25T12:00:00Z"} }),
			`hold of pod "pod-b" (CPUs "5,8") and pod "pod-a" container "sidecar" (CPUs "5") overlap on CPUs "5"`},
		{"hold overlaps delayed CPUs", spoil(func(cp *diskCheckpoint) { cp.Holds["pod-b"] = diskHold{CPUs: "8-9", Since: "2026-11-25T12:00:00Z"} }),
			`hold of pod "pod-b" (CPUs "8-9") and pod "pod-b" container "db" (CPUs "6-7,9-10") overlap on CPUs "9"`},
		{"two holds overlap", spoil(func(cp *diskCheckpoint) {
			cp.Holds["pod-c"] = diskHold{CPUs: "8,11", Since: "2026-11-25T12:00:00Z"}
			cp.DefaultCPUSet = "0,12-15"
		}), `holds of pods "pod-b" (CPUs "8") and "pod-c" (CPUs "8,11") overlap on CPUs "8"`},
		{"hold of an empty pod UID", spoil(func(cp *diskCheckpoint) {
			cp.Holds[""] = diskHold{CPUs: "11", Since: "2026-11-25T12:00:00Z"}
			cp.DefaultCPUSet = "0,12-15"
		}), "a hold has an empty pod UID"},
	}
}

// spoilChecksum changes the checksum's last digit.
func spoilChecksum(data []byte) []byte {
	out := append([]byte{}, data...)
	i := len(out) - 2 // the last digit, before '}'
	out[i] = '0' + (out[i]-'0'+1)%10
	return out
}

func TestUnmarshalRefusesCorruptCheckpoints(t *testing.T) {
	for _, tc := range corruptionCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Unmarshal(tc.file, kepOnline)
			if err == nil {
				t.Fatalf("Unmarshal accepted:\n%s", tc.file)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Unmarshal error\n  %v\nwant it to contain\n  %s", err, tc.reason)
			}
		})
	}
}

func TestLoadMovesCorruptCheckpointAside(t *testing.T) {
	for _, tc := range corruptionCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			st := newTestStore(t)
			logger, hook := test.NewNullLogger()
			st.SetLogger(logger)
			st.now = func() time.Time { return time.Date(2026, 11, 22, 12, 34, 56, 789, time.FixedZone("X", 3600)) }
			if err := os.WriteFile(st.Path(), tc.file, 0o600); err != nil {
				t.Fatal(err)
			}

			s, err := st.Load(kepOnline)
			if s != nil {
				t.Error("Load returned a state along with the error")
			}
			var cerr *CorruptError
			if !errors.As(err, &cerr) {
				t.Fatalf("Load error %v is not a *CorruptError", err)
			}
			if !strings.Contains(cerr.Reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", cerr.Reason, tc.reason)
			}
			wantMoved := filepath.Join(filepath.Dir(st.Path()), "cpu_manager_state.corrupt-20261122T113456.000000789Z")
			if cerr.MovedTo != wantMoved || cerr.Path != st.Path() {
				t.Errorf("CorruptError{Path: %q, MovedTo: %q}, want %q moved to %q", cerr.Path, cerr.MovedTo, st.Path(), wantMoved)
			}
			if !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), wantMoved) {
				t.Errorf("error text %q does not say what was wrong and where the file went", err)
			}
			if _, err := os.Stat(st.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the corrupt checkpoint is still in place (stat: %v)", err)
			}
			if kept, err := os.ReadFile(wantMoved); err != nil || !bytes.Equal(kept, tc.file) {
				t.Errorf("moved-aside file does not hold the original bytes (err %v)", err)
			}
			entry := hook.LastEntry()
			if entry == nil || entry.Level != logrus.ErrorLevel || entry.Data["reason"] != cerr.Reason || entry.Data["movedTo"] != wantMoved {
				t.Errorf("no error logged with the reason and new path: %+v", entry)
			}
			if _, err := st.Load(kepOnline); !errors.Is(err, ErrNoCheckpoint) {
				t.Errorf("second Load: %v, want ErrNoCheckpoint", err)
			}
		})
	}
}

func TestLoadReadErrorIsNotCorruption(t *testing.T) {
	st := newTestStore(t)
	if err := os.Mkdir(st.Path(), 0o700); err != nil { // a directory cannot be read as a file
		t.Fatal(err)
	}
	_, err := st.Load(kepOnline)
	var cerr *CorruptError
	if err == nil || errors.As(err, &cerr) || errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Load of an unreadable checkpoint: %v, want a plain I/O error", err)
	}
	if _, statErr := os.Stat(st.Path()); statErr != nil {
		t.Errorf("an unreadable checkpoint was moved: %v", statErr)
	}
}

func TestCorruptErrorWithoutMove(t *testing.T) {
	err := &CorruptError{Path: "/x/cpu_manager_state", Reason: "empty file"}
	if got, want := err.Error(), "checkpoint /x/cpu_manager_state is not trusted: empty file"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestValidateChecksOnline(t *testing.T) {
	s := sampleState(t)
	if err := s.Validate(cpus(t, "0-15")); err != nil {
		t.Errorf("Validate on the full machine: %v", err)
	}
	err := s.Validate(cpus(t, "0-6,8-15"))
	want := `pod "pod-b" container "db": baseline "6-7" lies outside the online CPUs "0-6,8-15" (CPUs "7")`
	if err == nil || err.Error() != want {
		t.Errorf("Validate with CPU 7 offline: %v, want %s", err, want)
	}
	if err := New(cpuset.New()).Validate(cpuset.New()); err != nil {
		t.Errorf("empty state on an empty machine: %v", err)
	}
}

// TestCheckpointIsCurrentAfterEverySave: after each Save the checkpoint
// file is exactly Marshal of the state saved, and Save keeps nothing of
// its argument (a state changed after its Save and saved again is
// written as it is now).
func TestCheckpointIsCurrentAfterEverySave(t *testing.T) {
	st := newTestStore(t)
	s := sampleState(t)
	changes := []func(){
		func() {},
		func() {
			s.SetAssignment("pod-b", "db", Assignment{Baseline: cpus(t, "6-7"), Resized: cpus(t, "6-9")})
			s.SetDefaultCPUSet(cpus(t, "0,10-15"))
		},
		func() { s.SetContainer("c-db-2", ContainerRef{PodUID: "pod-b", Name: "db"}); s.DeleteContainer("c-db") },
		func() { s.DeletePod("pod-a"); s.SetDefaultCPUSet(cpus(t, "0-5,10-15")) },
		func() { s.SetPodResources("pod-b", PodRecord{Resources: ResourceRecord{CPUShares: 4096}}) },
		func() { s.DeletePod("pod-b"); s.SetDefaultCPUSet(cpus(t, "0-15")) },
	}
	for i, change := range changes {
		change()
		if err := st.Save(s); err != nil {
			t.Fatalf("Save %d: %v", i, err)
		}
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(st.Path()); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after Save %d the file holds\n%s\nwant\n%s", i, got, want)
		}
	}
}

// dirImage returns what dir holds, file name → content and mode, without
// the lock file (which NewStore creates once).
func dirImage(t testing.TB, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	image := map[string]string{}
	for _, e := range entries {
		if e.Name() == lockFile {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		image[e.Name()] = info.Mode().String() + " " + info.ModTime().String() + " " + string(data)
	}
	return image
}

// TestLoadWritesNothing: starting (NewStore and Load) changes no file of
// the state directory, whatever it holds, as long as it can be trusted.
func TestLoadWritesNothing(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"empty": {},
		"a checkpoint file and a leftover temp file": {
			CheckpointFile:     string(referenceEncoding(t, sampleStateFull(t))),
			tempPrefix + "123": "{",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before := dirImage(t, dir)
			if _, err := openTestStore(t, dir).Load(kepOnline); err != nil && !errors.Is(err, ErrNoCheckpoint) {
				t.Fatalf("Load: %v", err)
			}
			if after := dirImage(t, dir); !maps.Equal(before, after) {
				t.Errorf("NewStore and Load changed the directory:\nbefore %q\nafter  %q", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
			}
		})
	}
}

// TestLoadMovesALeftoverJournalAside: a journal an unreleased earlier
// format kept next to the checkpoint file makes the state untrusted,
// whether or not there is a checkpoint file and whatever it holds: Load
// moves the journals and the file aside and says why.
func TestLoadMovesALeftoverJournalAside(t *testing.T) {
	journals := []string{journalPrefix + "00000000000000000001", journalPrefix + "00000000000000000002"}
	for name, checkpoint := range map[string][]byte{
		"no checkpoint file":      nil,
		"a valid checkpoint file": referenceEncoding(t, sampleState(t)),
		"an earlier format": bytes.Replace(referenceEncoding(t, sampleState(t)),
			[]byte(fmt.Sprintf(`"formatVersion":%d`, FormatVersion)), []byte(`"formatVersion":1`), 1),
	} {
		t.Run(name, func(t *testing.T) {
			st := newTestStore(t)
			dir := filepath.Dir(st.Path())
			st.now = func() time.Time { return time.Date(2026, 11, 22, 12, 34, 56, 789, time.UTC) }
			files := map[string][]byte{journals[0]: []byte("NRICPUJ1"), journals[1]: {}, "notes.txt": []byte("x")}
			if checkpoint != nil {
				files[CheckpointFile] = checkpoint
			}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := st.Load(kepOnline)
			var cerr *CorruptError
			reason := "a journal of an earlier format that was never released; this build keeps no journal and does not read one"
			if !errors.As(err, &cerr) || cerr.Path != filepath.Join(dir, journals[0]) || cerr.Reason != reason {
				t.Fatalf("Load: %v, want a *CorruptError of %s saying %q", err, journals[0], reason)
			}
			want := []string{lockFile}
			for name := range files {
				if name != "notes.txt" {
					name += ".corrupt-20261122T123456.000000789Z"
				}
				want = append(want, name)
			}
			slices.Sort(want)
			if got := slices.Sorted(maps.Keys(readStateFiles(t, dir))); !slices.Equal(got, want) {
				t.Errorf("the directory holds %q, want %q", got, want)
			}
			if _, err := st.Load(kepOnline); !errors.Is(err, ErrNoCheckpoint) {
				t.Errorf("Load after the move: %v, want ErrNoCheckpoint", err)
			}
		})
	}
}

// rewrittenFS is the operating system's file system whose ReadFile of the
// checkpoint file returns, for its first reads, what a read gives when a
// Save rewrites the file during the read (torn: the first half of one
// state's bytes and the second half of another's).
type rewrittenFS struct {
	osFS
	torn  [][]byte
	reads int
}

func (f *rewrittenFS) ReadFile(path string) ([]byte, error) {
	f.reads++
	if filepath.Base(path) == CheckpointFile && len(f.torn) > 0 {
		data := f.torn[0]
		f.torn = f.torn[1:]
		return data, nil
	}
	return f.osFS.ReadFile(path)
}

// TestInspectRereadsAFileRewrittenUnderIt: a read of the checkpoint file
// that a running plugin rewrote under it (a torn read) is not reported as
// a corrupt file: Inspect reads it again and gives the state; a file that
// reads the same twice and fails is corrupt; one that changes at every
// read is reported as such, never as a state.
func TestInspectRereadsAFileRewrittenUnderIt(t *testing.T) {
	dir := t.TempDir()
	st := quietStore(newStore(dir, osFS{}))
	want := sampleStateFull(t)
	if err := st.Save(want); err != nil {
		t.Fatal(err)
	}
	a, err := Marshal(sampleState(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	torn := func(i int) []byte { // differs for each i
		return append(bytes.Clone(a[:len(a)/2+i]), b[len(b)/2+i:]...)
	}
	t.Run("torn once", func(t *testing.T) {
		fsys := &rewrittenFS{torn: [][]byte{torn(0)}}
		got, err := inspect(fsys, dir, kepOnline)
		if err != nil || !got.Equal(want) {
			t.Fatalf("Inspect after a torn read: %v (the saved state: %v)", err, err == nil && got.Equal(want))
		}
	})
	t.Run("corrupt at rest", func(t *testing.T) {
		fsys := &rewrittenFS{torn: [][]byte{torn(0), torn(0)}}
		_, err := inspect(fsys, dir, kepOnline)
		var cerr *CorruptError
		if !errors.As(err, &cerr) || cerr.MovedTo != "" || fsys.reads != 2 {
			t.Fatalf("Inspect of a file that reads the same twice and fails: %v after %d reads, want a *CorruptError after 2", err, fsys.reads)
		}
	})
	t.Run("changing at every read", func(t *testing.T) {
		fsys := &rewrittenFS{}
		for i := range 2 * maxInspectReads {
			fsys.torn = append(fsys.torn, torn(i))
		}
		_, err := inspect(fsys, dir, kepOnline)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the file kept changing while it was read (%d attempts", maxInspectReads)) {
			t.Fatalf("Inspect of a file that changes at every read: %v", err)
		}
	})
}
