package state

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// The files under testdata/kubelet are in the kubelet's layouts; their
// checksums are not the kubelet's real ones except in none.json, v2.json
// and kep5554-v3.json (ImportKubelet does not verify them). The v4-*
// files are V4 (CPUManagerCheckpointData in "data"): without baselines
// (v4-data-1.37.json), with baselines of containers never resized
// (v4-baselines.json), with KEP-5554's example of resized containers
// (v4-resized.json), and that example in the KEP's earlier naming
// (v4-originals-draft.json).

// v4File returns a V4 checkpoint whose "data" is data.
func v4File(data string) string {
	return `{"policyName":"static","defaultCpuSet":"0","checksum":0,"data":` + strconv.Quote(data) + `,"dataChecksum":1}`
}

// resolveFrom returns a v1 resolver backed by a map.
func resolveFrom(ids map[string]ContainerRef) func(string) (ContainerRef, bool) {
	return func(id string) (ContainerRef, bool) {
		ref, ok := ids[id]
		return ref, ok
	}
}

const (
	v1ID1 = "4bd9c1a1e1f0c7a2d6b0f2e3c9a8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0"
	v1ID2 = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"
)

func TestImportKubelet(t *testing.T) {
	tests := []struct {
		name     string
		file     string // under testdata/kubelet, or inline JSON when it starts with '{'
		online   string
		resolve  func(string) (ContainerRef, bool)
		defaults string
		entries  map[ContainerRef]string // ref → "baseline" or "baseline/resized"
		warnings []string                // substrings, one per warning, in order
	}{
		{
			name: "none policy imports as empty", file: "none.json", online: "0-7",
			defaults: "0-7",
		},
		{
			name: "v2 from a real node", file: "v2.json", online: "0-23",
			defaults: "0,2-12,14-23",
			entries:  map[ContainerRef]string{{PodUID: "235148fe-393f-47a8-a17d-bd55bc1a836b", Name: "cgroup1-0"}: "1,13"},
		},
		{
			name: "v1 with every id resolved", file: "v1.json", online: "0-7",
			resolve: resolveFrom(map[string]ContainerRef{
				v1ID1: {PodUID: "pod-1", Name: "a"},
				v1ID2: {PodUID: "pod-2", Name: "b"},
			}),
			defaults: "0,5-7",
			entries:  map[ContainerRef]string{{PodUID: "pod-1", Name: "a"}: "1-2", {PodUID: "pod-2", Name: "b"}: "3-4"},
		},
		{
			name: "v1 with an id that does not resolve", file: "v1.json", online: "0-7",
			resolve:  resolveFrom(map[string]ContainerRef{v1ID2: {PodUID: "pod-2", Name: "b"}}),
			defaults: "0,5-7",
			entries:  map[ContainerRef]string{{PodUID: "pod-2", Name: "b"}: "3-4"},
			warnings: []string{`container id "` + v1ID1 + `" (CPUs "1-2"): cannot tell its pod and name; not imported`},
		},
		{
			name: "v1 without a resolver", file: "v1.json", online: "0-7",
			defaults: "0,5-7",
			warnings: []string{`container id "` + v1ID1 + `"`, `container id "` + v1ID2 + `"`},
		},
		{
			name: "KEP-5554 original and resized", file: "kep5554-v3.json", online: "0-15",
			defaults: "0,2,8-15",
			entries: map[ContainerRef]string{
				{PodUID: "gu-pod-2-uid", Name: "gu-container-1"}: "3-4/3-4",
				{PodUID: "gu-pod-2-uid", Name: "gu-container-2"}: "5-6/1,5-7",
			},
		},
		{
			name: "1.36 podEntries with init-container reuse", file: "v3-podentries-1.36.json", online: "0-15",
			defaults: "0,9-15",
			entries:  map[ContainerRef]string{{PodUID: "pod-a", Name: "app"}: "2-5", {PodUID: "pod-b", Name: "db"}: "7-8"},
			warnings: []string{
				`pod "pod-a" container "init" (CPUs "2-3") shares CPUs "2-3" with container "app" of the same pod (kubelet init-container CPU reuse); kept "app", not imported`,
				`pod "pod-a": pod-level CPUs "1,6" are held by no container exclusively (the pod's shared pool); not imported`,
			},
		},
		{
			name: "1.37 data payload", file: "v4-data-1.37.json", online: "0-15",
			defaults: "0,9-15",
			entries:  map[ContainerRef]string{{PodUID: "pod-a", Name: "app"}: "2-5", {PodUID: "pod-b", Name: "db"}: "7-8"},
			warnings: []string{`container "init"`, `pod-level CPUs "1,6"`},
		},
		{
			name: "1.37 data payload wins over the inline copy",
			file: `{"policyName":"static","defaultCpuSet":"0-15","checksum":0,` +
				`"data":"{\"policyName\":\"static\",\"defaultCpuSet\":\"0,3-15\",\"entries\":{\"p\":{\"c\":\"1-2\"}}}","dataChecksum":1}`,
			online: "0-15", defaults: "0,3-15",
			entries: map[ContainerRef]string{{PodUID: "p", Name: "c"}: "1-2"},
		},
		{
			name:   "empty data payload falls back to the inline fields",
			file:   `{"policyName":"static","defaultCpuSet":"0,3-15","entries":{"p":{"c":"1-2"}},"checksum":0,"data":""}`,
			online: "0-15", defaults: "0,3-15",
			entries: map[ContainerRef]string{{PodUID: "p", Name: "c"}: "1-2"},
		},
		{
			name: "V4 with baselines, none resized", file: "v4-baselines.json", online: "0-15",
			defaults: "0,5-15",
			entries: map[ContainerRef]string{
				{PodUID: "pod-a", Name: "app"}: "1-2", {PodUID: "pod-a", Name: "sidecar"}: "3", {PodUID: "pod-b", Name: "db"}: "4",
			},
		},
		{
			name: "V4 with resized containers (KEP-5554's example)", file: "v4-resized.json", online: "0-15",
			defaults: "0-2,7,10-15",
			entries: map[ContainerRef]string{
				{PodUID: "gu-pod-2-uid", Name: "gu-container-1"}: "3-4/3-4,8-9",
				{PodUID: "gu-pod-2-uid", Name: "gu-container-2"}: "5-6",
			},
		},
		{
			name: "V4 in the KEP draft's naming: originals", file: "v4-originals-draft.json", online: "0-15",
			defaults: "0-2,7,10-15",
			entries: map[ContainerRef]string{
				{PodUID: "gu-pod-2-uid", Name: "gu-container-1"}: "3-4/3-4,8-9",
				{PodUID: "gu-pod-2-uid", Name: "gu-container-2"}: "5-6",
			},
		},
		{
			name: "V4 baselines without an entry, empty, and an unknown field of data",
			file: v4File(`{"policyName":"static","defaultCpuSet":"0,4-7","entries":{"p":{"a":"1-2","b":"3"}},` +
				`"baselines":{"p":{"a":{"baseline":""},"gone":{"baseline":"5"}}},"resizes":{}}`),
			online: "0-7", defaults: "0,4-7",
			entries: map[ContainerRef]string{{PodUID: "p", Name: "a"}: "1-2", {PodUID: "p", Name: "b"}: "3"},
			warnings: []string{
				`baselines["p"]["a"]: pod "p" container "a" has an empty baseline; its current CPUs are imported as its baseline`,
				`baselines["p"]["gone"]: pod "p" container "gone" has a baseline (CPUs "5") but no entry; not imported`,
				`unknown field of data "resizes" ignored`,
			},
		},
		{
			name:   "baselines outside data are not the kubelet's",
			file:   `{"policyName":"static","defaultCpuSet":"0,3-7","entries":{"p":{"c":"1-2"}},"baselines":{"p":{"c":{"baseline":"1"}}}}`,
			online: "0-7", defaults: "0,3-7",
			entries:  map[ContainerRef]string{{PodUID: "p", Name: "c"}: "1-2"},
			warnings: []string{`unknown top-level field "baselines" ignored`},
		},
		{
			name:   "empty cpuset and unknown field",
			file:   `{"policyName":"static","defaultCpuSet":"0-7","entries":{"p":{"c":""}},"globalEntries":{},"checksum":1}`,
			online: "0-7", defaults: "0-7",
			warnings: []string{
				`entries["p"]["c"]: pod "p" container "c" has an empty cpuset; not imported`,
				`unknown top-level field "globalEntries" ignored`,
			},
		},
		{
			name:   "pod-level pod whose containers all share the pod pool",
			file:   `{"policyName":"static","defaultCpuSet":"0,4-7","podEntries":{"p":{"cpuSet":"1-3"}},"checksum":1}`,
			online: "0-7", defaults: "0,4-7",
			warnings: []string{`pod "p": pod-level CPUs "1-3" are held by no container exclusively`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := kubeletFile(t, tc.file)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s, warnings, err := ImportKubelet(path, cpus(t, tc.online), tc.resolve)
			if err != nil {
				t.Fatalf("ImportKubelet: %v", err)
			}
			if got := s.DefaultCPUSet().String(); got != tc.defaults {
				t.Errorf("defaultCpuSet %q, want %q", got, tc.defaults)
			}
			got := map[ContainerRef]string{}
			s.ForEach(func(ref ContainerRef, a Assignment) {
				got[ref] = a.Baseline.String()
				if !a.Resized.IsEmpty() {
					got[ref] += "/" + a.Resized.String()
				}
			})
			if len(got) != len(tc.entries) {
				t.Errorf("imported %v, want %v", got, tc.entries)
			}
			for ref, want := range tc.entries {
				if got[ref] != want {
					t.Errorf("%s: imported %q, want %q", ref, got[ref], want)
				}
			}
			if len(warnings) != len(tc.warnings) {
				t.Errorf("warnings %q, want %d", warnings, len(tc.warnings))
			}
			for i := range min(len(warnings), len(tc.warnings)) {
				if !strings.Contains(warnings[i], tc.warnings[i]) {
					t.Errorf("warning %d %q does not contain %q", i, warnings[i], tc.warnings[i])
				}
			}
			if err := s.Validate(cpus(t, tc.online)); err != nil {
				t.Errorf("imported state does not validate: %v", err)
			}
			if _, err := Marshal(s); err != nil {
				t.Errorf("imported state cannot be saved: %v", err)
			}
			after, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(before, after) {
				t.Errorf("ImportKubelet changed the kubelet's file (err %v)", err)
			}
		})
	}
}

func TestImportKubeletRefuses(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		online  string
		resolve func(string) (ContainerRef, bool)
		reason  string
	}{
		{"empty file", "", "0-7", nil, "empty file"},
		{"truncated", `{"policyName":"static","defaultCpuSet":"0-7","entr`, "0-7", nil, "truncated file"},
		{"bad JSON", `{"policyName":static}`, "0-7", nil, "bad JSON at byte"},
		{"unknown policy", `{"policyName":"dynamic","defaultCpuSet":"0-7"}`, "0-7", nil,
			`unknown kubelet CPU manager policy "dynamic" (want "static" or "none")`},
		{"missing policy", `{"defaultCpuSet":"0-7"}`, "0-7", nil, `unknown kubelet CPU manager policy ""`},
		{"defaultCpuSet does not parse", `{"policyName":"static","defaultCpuSet":"0-a"}`, "0-7", nil,
			`defaultCpuSet "0-a" does not parse`},
		{"defaultCpuSet outside online", `{"policyName":"static","defaultCpuSet":"0-9"}`, "0-7", nil,
			`defaultCpuSet "0-9" lies outside the online CPUs "0-7" (CPUs "8-9")`},
		{"entry outside online", `{"policyName":"static","defaultCpuSet":"0-3","entries":{"p":{"c":"4-8"}}}`, "0-7", nil,
			`entries["p"]["c"]: pod "p" container "c": baseline "4-8" lies outside the online CPUs "0-7" (CPUs "8")`},
		{"entry does not parse", `{"policyName":"static","defaultCpuSet":"0-3","entries":{"p":{"c":"4,,5"}}}`, "0-7", nil,
			`entries["p"]["c"]: cpuset "4,,5" does not parse`},
		{"entry overlaps defaultCpuSet", `{"policyName":"static","defaultCpuSet":"0-4","entries":{"p":{"c":"4-5"}}}`, "0-7", nil,
			`pod "p" holds CPUs "4" that are also in defaultCpuSet "0-4"`},
		{"two pods overlap", `{"policyName":"static","defaultCpuSet":"0","entries":{"p1":{"c":"1-3"},"p2":{"c":"3-4"}}}`, "0-7", nil,
			`pods "p1" (CPUs "1-3") and "p2" (CPUs "3-4") overlap on CPUs "3"`},
		{"pod entry overlaps another pod", `{"policyName":"static","defaultCpuSet":"0","entries":{"p2":{"c":"3"}},"podEntries":{"p1":{"cpuSet":"1-3"}}}`, "0-7", nil,
			`pods "p1" (CPUs "1-3") and "p2" (CPUs "3") overlap on CPUs "3"`},
		{"pod entry does not parse", `{"policyName":"static","defaultCpuSet":"0","podEntries":{"p1":{"cpuSet":"x"}}}`, "0-7", nil,
			`podEntries["p1"]: cpuSet "x" does not parse`},
		{"pod entry outside online", `{"policyName":"static","defaultCpuSet":"0","podEntries":{"p1":{"cpuSet":"7-8"}}}`, "0-7", nil,
			`podEntries["p1"]: cpuSet "7-8" lies outside the online CPUs`},
		{"resized not a superset", `{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":{"original":"1-2","resized":"2-3"}}}}`, "0-7", nil,
			`pod "p" container "c": resized "2-3" does not contain baseline "1-2" (missing CPUs "1")`},
		{"entry of the wrong type", `{"policyName":"static","defaultCpuSet":"0","entries":{"p":7}}`, "0-7", nil,
			`entries["p"] is 7: neither a cpuset string (v1) nor a map of containers`},
		{"container of the wrong type", `{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":[1]}}}`, "0-7", nil,
			`entries["p"]["c"] is [1]: neither a cpuset string nor {original, resized}`},
		{"v1 and v2 entries for one container",
			`{"policyName":"static","defaultCpuSet":"0","entries":{"id1":"1","p":{"c":"2"}}}`, "0-7",
			resolveFrom(map[string]ContainerRef{"id1": {PodUID: "p", Name: "c"}}),
			`entries["id1"] and entries["p"]["c"] both assign CPUs to pod "p" container "c"`},
		{"v1 id resolved to an empty name", `{"policyName":"static","defaultCpuSet":"0","entries":{"id1":"1"}}`, "0-7",
			resolveFrom(map[string]ContainerRef{"id1": {PodUID: "p"}}), `entries["id1"] names pod "p" container "": empty pod UID or container name`},
		{"data is not a string", `{"policyName":"static","defaultCpuSet":"0","data":{}}`, "0-7", nil, "data is not a JSON string"},
		{"data is not a checkpoint", `{"policyName":"static","defaultCpuSet":"0","data":"{\"policyName\""}`, "0-7", nil,
			"data does not hold a checkpoint: truncated file"},
		{"V4 baseline not in the current CPUs", v4File(`{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":"2-3"}},` +
			`"baselines":{"p":{"c":{"baseline":"1-2"}}}}`), "0-7", nil,
			`baselines["p"]["c"]: pod "p" container "c" runs on CPUs "2-3" (entries["p"]["c"]), which do not contain its baseline "1-2" ` +
				`(missing CPUs "1"): a resize never takes baseline CPUs away`},
		{"V4 baseline does not parse", v4File(`{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":"2-3"}},` +
			`"baselines":{"p":{"c":{"baseline":"3-2"}}}}`), "0-7", nil, `baselines["p"]["c"]: baseline "3-2" does not parse`},
		{"V4 baseline without a cpuset", v4File(`{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":"2-3"}},` +
			`"baselines":{"p":{"c":{}}}}`), "0-7", nil, `baselines["p"]["c"] has neither "baseline" nor "original"`},
		{"V4 both baselines and originals", v4File(`{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":"2-3"}},` +
			`"baselines":{"p":{"c":{"baseline":"2"}}},"originals":{"p":{"c":{"original":"2"}}}}`), "0-7", nil,
			"data holds both baselines and originals"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cpu_manager_state")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			s, warnings, err := ImportKubelet(path, cpus(t, tc.online), tc.resolve)
			if err == nil {
				t.Fatalf("ImportKubelet accepted it: %v, warnings %q", s, warnings)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s", err, tc.reason)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if _, statErr := os.Stat(path); statErr != nil {
				t.Errorf("the kubelet's file was moved: %v", statErr)
			}
		})
	}
}

func TestImportKubeletMissingFile(t *testing.T) {
	_, _, err := ImportKubelet(filepath.Join(t.TempDir(), "nope"), cpuset.New(0), nil)
	if !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("ImportKubelet of a missing file: %v, want ErrNoCheckpoint", err)
	}
}

func TestImportKubeletWarningsAreSorted(t *testing.T) {
	file := `{"policyName":"static","defaultCpuSet":"0","entries":{"zz":"1","aa":"2","mm":"3"},"zfield":1,"afield":2}`
	_, warnings, err := importKubeletData([]byte(file), cpus(t, "0-7"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 5 || !slices.IsSorted(warnings) {
		t.Errorf("warnings not complete and sorted: %q", warnings)
	}
}

// kubeletFile returns the path of a testdata file, or of a temp file
// holding inline JSON.
func kubeletFile(t *testing.T, file string) string {
	t.Helper()
	if !strings.HasPrefix(file, "{") {
		return filepath.Join("testdata", "kubelet", file)
	}
	path := filepath.Join(t.TempDir(), "cpu_manager_state")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
