package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
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
	f.Add([]byte(`{"policyName":"static","formatVersion":2,"defaultCpuSet":"0-15","checksum":0}`))
	f.Add([]byte(`{"policyName":"static","formatVersion":2,"defaultCpuSet":"1-15","config":{"reservedCpuSet":"0","keys":{"a":"b"}},` +
		`"holds":{"p":{"cpus":"2","since":"2026-11-25T12:00:00Z"}},"checksum":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkUnmarshalAccepts(t, data)

		var cp checkpointV2
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

// FuzzJournal feeds arbitrary bytes to the journal reader as journal
// generation 1 of a state directory of the journal design without a
// checkpoint file. Reading must never panic; replaying the records it
// accepts over their own result must change nothing (each op names its
// key and value); and whatever state replay accepts must be valid and
// savable.
func FuzzJournal(f *testing.F) {
	f.Add(journalHeader(1))
	f.Fuzz(func(t *testing.T, data []byte) {
		records, err := parseJournal(data, 1)
		s, replayErr := replay(New(cpuset.New()), journalRefV1{}, "", []journalData{{path: journalName(1), gen: 1, data: data}}, crashOnline)
		var c *corruption
		if err != nil {
			if records != nil {
				t.Fatalf("parseJournal returned records with error %v", err)
			}
			if !errors.As(replayErr, &c) {
				t.Fatalf("replay did not refuse a journal parseJournal refuses: %v", replayErr)
			}
			return
		}
		replayed := New(cpuset.New())
		for _, r := range records {
			for _, o := range r.ops {
				o.apply(replayed)
			}
		}
		again := replayed.Clone()
		for _, r := range records {
			for _, o := range r.ops {
				o.apply(again)
			}
		}
		if !again.Equal(replayed) {
			t.Fatal("replaying the records over their own result changed the state")
		}
		if replayErr != nil {
			if !errors.As(replayErr, &c) && !errors.Is(replayErr, ErrNoCheckpoint) {
				t.Fatalf("replay failed with neither corruption nor no checkpoint: %v", replayErr)
			}
			return
		}
		if !s.Equal(replayed) {
			t.Fatal("replay accepted a state that is not the replay of the records")
		}
		out, err := Marshal(s)
		if err != nil {
			t.Fatalf("accepted state cannot be saved: %v", err)
		}
		if back, err := Unmarshal(out, crashOnline); err != nil || !back.Equal(s) {
			t.Fatalf("accepted state does not survive a round trip (%v)", err)
		}
	})
}
