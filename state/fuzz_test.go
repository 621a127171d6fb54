package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
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
// checks behind the checksum are fuzzed too; the leniently decoded state
// also checks that Save's quick consistency check is never more lenient
// than Validate.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"policyName":"static","formatVersion":1,"defaultCpuSet":"0-15","checksum":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkUnmarshalAccepts(t, data)

		var cp checkpointV1
		if json.Unmarshal(data, &cp) != nil {
			return
		}
		if s, err := cp.toState(); err == nil && s.looksConsistent() && s.validate(nil) != nil {
			t.Fatalf("looksConsistent accepted a state validate refuses (%v)\n%q", s.validate(nil), data)
		}
		resealed, err := sealV1(cp)
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
// generation 1 of a state directory without a snapshot. Reading must never
// panic; the records it accepts must survive a round trip through the
// encoder; replaying them must be idempotent; and whatever state replay
// accepts must be the replay of those records, valid and savable.
func FuzzJournal(f *testing.F) {
	f.Add(journalHeader(1))
	f.Fuzz(func(t *testing.T, data []byte) {
		records, tail, err := parseJournal(data, 1)
		if err != nil {
			if records != nil {
				t.Fatalf("parseJournal returned records with error %v", err)
			}
			checkReplayRefuses(t, data)
			return
		}
		if tail < journalHeaderSize || tail > len(data) {
			t.Fatalf("records end at %d, outside the file of %d bytes", tail, len(data))
		}
		replayed := New(cpuset.New())
		for _, r := range records {
			checkRecordRoundTrip(t, r)
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

		s, lastSeq, err := replayJournal(t, data)
		if err != nil {
			return
		}
		if !s.Equal(replayed) {
			t.Fatal("replay accepted a state that is not the replay of the records")
		}
		if lastSeq != uint64(len(records)) {
			t.Fatalf("replay says the state ends at record %d, the journal has %d", lastSeq, len(records))
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

// checkRecordRoundTrip checks that a decoded record encodes into a frame
// that decodes to the same ops.
func checkRecordRoundTrip(t *testing.T, r journalRecord) {
	t.Helper()
	frame := appendRecord(nil, r.seq, r.ops)
	payload, next, ok := frameAt(frame, 0)
	if !ok || next != len(frame) {
		t.Fatalf("re-encoded record %d does not verify", r.seq)
	}
	seq, ops, err := decodePayload(payload)
	if err != nil || seq != r.seq || !reflect.DeepEqual(ops, r.ops) {
		t.Fatalf("record %d does not survive a round trip (%v):\n%+v\n%+v", r.seq, err, r.ops, ops)
	}
}

// replayJournal replays data as the only journal of a state directory
// without a snapshot.
func replayJournal(t *testing.T, data []byte) (*State, uint64, error) {
	t.Helper()
	s, lastSeq, err := replay(snapshotBase{state: New(cpuset.New())},
		[]journalData{{path: journalName(1), gen: 1, data: data}}, crashOnline)
	var c *corruption
	if err != nil && !errors.As(err, &c) && !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("replaying a journal failed with neither corruption nor no checkpoint: %v", err)
	}
	return s, lastSeq, err
}

// checkReplayRefuses checks that a journal parseJournal refuses is refused
// by replay as corrupt.
func checkReplayRefuses(t *testing.T, data []byte) {
	t.Helper()
	_, _, err := replayJournal(t, data)
	var c *corruption
	if !errors.As(err, &c) {
		t.Fatalf("replay did not refuse a journal parseJournal refuses: %v", err)
	}
}
