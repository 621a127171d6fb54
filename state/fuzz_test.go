package state

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The seed corpora are checked in under testdata/fuzz/<target>: valid and
// corrupt checkpoints, and the kubelet layouts. CI runs each target
// briefly with -fuzz; `go test` runs the seeds.

// FuzzUnmarshal feeds arbitrary bytes to Unmarshal, which must never
// panic and must only accept what it can write back unchanged. Because
// random bytes almost never carry a matching checksum, each input is also
// decoded leniently, given a matching checksum and decoded again, so the
// checks behind the checksum are fuzzed too.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"policyName":"static","formatVersion":3,"defaultCpuSet":"0-15","checksum":0}`))
	f.Add([]byte(`{"policyName":"static","formatVersion":3,"defaultCpuSet":"1-15","config":{"reservedCpuSet":"0","keys":{"a":"b"}},` +
		`"holds":{"p":{"cpus":"2","since":"2026-11-25T12:00:00Z"}},"checksum":0}`))
	f.Add([]byte(`{"policyName":"static","formatVersion":3,"defaultCpuSet":"0,6-15","entries":{"p":{` +
		`"a":{"baseline":"2-3","resized":"","delayed":{"cpus":"4","releaseAt":"2026-11-25T12:00:00.000000001Z"}},` +
		`"i":{"baseline":"1-2","resized":"","init":true},"s":{"baseline":"1","resized":"1,5"}}},"checksum":0}`))
	f.Add([]byte(`{"policyName":"static","formatVersion":4,"defaultCpuSet":"0,4-15","entries":{"p":{` +
		`"a":{"baseline":"1","resized":"1-2","deviceNodes":"0,2-3"},"b":{"baseline":"3","resized":"","deviceNodes":"63"}}},"checksum":0}`))
	f.Add([]byte(`{"policyName":"static","formatVersion":4,"defaultCpuSet":"0,2-15","entries":{"p":{` +
		`"a":{"baseline":"1","resized":"","deviceNodes":"0-64"}}},"checksum":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkUnmarshalAccepts(t, data)

		var cp diskCheckpoint
		if json.Unmarshal(data, &cp) != nil {
			return
		}
		cp.Checksum = 0
		resealed, err := seal(cp)
		if err != nil {
			t.Fatalf("cannot seal a decoded checkpoint: %v", err)
		}
		checkUnmarshalAccepts(t, resealed)
	})
}

// checkUnmarshalAccepts checks that whatever Unmarshal accepts is a valid
// state that survives a round trip.
func checkUnmarshalAccepts(t *testing.T, data []byte) {
	s, err := Unmarshal(data, crashOnline)
	if err != nil {
		if s != nil {
			t.Fatalf("Unmarshal returned a state with error %v", err)
		}
		return
	}
	if err := s.Validate(crashOnline); err != nil {
		t.Fatalf("Unmarshal accepted an invalid state: %v\n%q", err, data)
	}
	out, err := Marshal(s)
	if err != nil {
		t.Fatalf("accepted state cannot be marshalled: %v\n%q", err, data)
	}
	if want := referenceEncoding(t, s); !bytes.Equal(out, want) {
		t.Fatalf("the encoder and encoding/json disagree:\n%s\n%s", out, want)
	}
	again, err := Unmarshal(out, crashOnline)
	if err != nil || !again.Equal(s) {
		t.Fatalf("round trip of an accepted state failed (%v)\nin  %q\nout %q", err, data, out)
	}
	if out2, _ := Marshal(again); !bytes.Equal(out, out2) {
		t.Fatalf("encoding is not stable:\n%q\n%q", out, out2)
	}
}

// FuzzImportKubelet feeds arbitrary bytes to the kubelet importer, which
// must never panic and must only return states that validate and can be
// saved.
func FuzzImportKubelet(f *testing.F) {
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"0,3-15","entries":{"p":{"c":"1-2"}},"checksum":1}`))
	f.Add([]byte(v4File(`{"policyName":"static","defaultCpuSet":"0,5-15","entries":{"p":{"c":"1-4"}},"baselines":{"p":{"c":{"baseline":"1-2"}}}}`)))
	resolve := func(id string) (ContainerRef, bool) {
		if strings.HasPrefix(id, "ctr") {
			return ContainerRef{PodUID: "pod-of-" + id, Name: "c"}, true
		}
		return ContainerRef{}, false
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _, err := importKubeletData(data, crashOnline, resolve)
		if err != nil {
			if s != nil {
				t.Fatalf("importer returned a state with error %v", err)
			}
			return
		}
		if err := s.Validate(crashOnline); err != nil {
			t.Fatalf("importer returned an invalid state: %v\n%q", err, data)
		}
		out, err := Marshal(s)
		if err != nil {
			t.Fatalf("imported state cannot be saved: %v\n%q", err, data)
		}
		if back, err := Unmarshal(out, crashOnline); err != nil || !back.Equal(s) {
			t.Fatalf("imported state does not survive a round trip (%v)\n%q", err, data)
		}
	})
}
