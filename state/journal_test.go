package state

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// testJournal is an encoded journal and where its records start.
type testJournal struct {
	data    []byte
	offsets []int // of each record's frame
	end     int   // where the last record's frame (with padding) ends
}

// buildJournal encodes a journal of generation gen holding one record per
// entry of records (numbered from 1), followed by zeros up to prealloc.
func buildJournal(gen uint64, prealloc int, records ...[]op) testJournal {
	j := testJournal{data: journalHeader(gen)}
	for i, ops := range records {
		j.offsets = append(j.offsets, len(j.data))
		j.data = appendRecord(j.data, uint64(i+1), ops)
	}
	j.end = len(j.data)
	if len(j.data) < prealloc {
		j.data = append(j.data, make([]byte, prealloc-len(j.data))...)
	}
	return j
}

// threeRecords are the ops of a small journal: a state, a resize, a pod.
func threeRecords(t *testing.T) [][]op {
	resized := sampleState(t)
	resized.SetAssignment("pod-b", "db", Assignment{Original: cpus(t, "6-7"), Resized: cpus(t, "6-8")})
	resized.defaultCPUSet = cpus(t, "0,9-15")
	added := resized.Clone()
	added.SetAssignment("pod-c", "web", Assignment{Original: cpus(t, "9-10")})
	added.defaultCPUSet = cpus(t, "0,11-15")
	return [][]op{diff(New(cpus(t, "")), sampleState(t)), diff(sampleState(t), resized), diff(resized, added)}
}

func TestParseJournal(t *testing.T) {
	tests := []struct {
		name     string
		prealloc int
		records  [][]op
	}{
		{"header only", 0, nil},
		{"preallocated, no record", 4096, nil},
		{"three records", 0, threeRecords(t)},
		{"three records, preallocated", 4096, threeRecords(t)},
		{"a record without ops", 64, [][]op{nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := buildJournal(7, tc.prealloc, tc.records...)
			got, tail, err := parseJournal(j.data, 7)
			if err != nil {
				t.Fatalf("parseJournal: %v", err)
			}
			if len(got) != len(tc.records) {
				t.Fatalf("%d records, want %d", len(got), len(tc.records))
			}
			for i, r := range got {
				if r.seq != uint64(i+1) || r.offset != j.offsets[i] || len(r.ops) != len(tc.records[i]) {
					t.Errorf("record %d: number %d at offset %d with %d ops, want %d at %d with %d",
						i, r.seq, r.offset, len(r.ops), i+1, j.offsets[i], len(tc.records[i]))
				}
			}
			if tail != j.end {
				t.Errorf("records end at %d, want %d", tail, j.end)
			}
		})
	}
}

// TestParseJournalIgnoresATornLastRecord cuts the last record short at
// every byte, the three ways a crash can leave it: the file ends there (an
// append), zeros follow (a preallocated journal), or only its later bytes
// reached the disk.
func TestParseJournalIgnoresATornLastRecord(t *testing.T) {
	j := buildJournal(1, 0, threeRecords(t)...)
	last := j.offsets[2]
	frameEnd := last + frameHeaderSize + int(binary.LittleEndian.Uint32(j.data[last:])) // the padding is not part of it
	for cut := last; cut < frameEnd; cut++ {
		variants := map[string][]byte{
			"truncated": j.data[:cut],
			"zeroed":    append(append([]byte{}, j.data[:cut]...), make([]byte, len(j.data)-cut+1024)...),
		}
		if cut > last {
			lateBytesOnly := append([]byte{}, j.data...)
			clear(lateBytesOnly[last:cut])
			variants["late bytes only"] = lateBytesOnly
		}
		for name, data := range variants {
			want, wantTail := 2, last
			if name == "zeroed" && !slices.ContainsFunc(j.data[cut:frameEnd], func(b byte) bool { return b != 0 }) {
				want, wantTail = 3, j.end // only zero bytes were lost: the record is whole
			}
			records, tail, err := parseJournal(data, 1)
			if err != nil {
				t.Fatalf("cut at %d (%s): %v", cut, name, err)
			}
			if len(records) != want || tail != wantTail {
				t.Fatalf("cut at %d (%s): %d records ending at %d, want %d ending at %d",
					cut, name, len(records), tail, want, wantTail)
			}
		}
	}
}

func TestParseJournalRefusesADamagedMiddleRecord(t *testing.T) {
	j := buildJournal(1, 256, threeRecords(t)...)
	middle := j.offsets[1]
	length := int(binary.LittleEndian.Uint32(j.data[middle:]))
	for i := middle; i < middle+frameHeaderSize+length; i++ {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			damaged := append([]byte{}, j.data...)
			damaged[i] ^= flip
			_, _, err := parseJournal(damaged, 1)
			if err == nil || !strings.Contains(err.Error(), "a record in the middle of the journal is damaged") {
				t.Fatalf("byte %d of the middle record xor %#x: %v, want damage reported", i-middle, flip, err)
			}
		}
	}
	// Cleared rather than flipped: a lost sector in the middle.
	cleared := append([]byte{}, j.data...)
	clear(cleared[middle : middle+frameHeaderSize])
	if _, _, err := parseJournal(cleared, 1); err == nil {
		t.Error("a middle record with a cleared header was taken for the end of the journal")
	}
}

func TestParseJournalRefusesABadHeader(t *testing.T) {
	good := buildJournal(5, 0, threeRecords(t)...).data
	spoil := func(f func(data []byte)) []byte {
		data := append([]byte{}, good...)
		f(data)
		return data
	}
	tests := []struct {
		name   string
		data   []byte
		gen    uint64
		reason string
	}{
		{"empty", nil, 5, "bad journal header: the file has 0 bytes, a header has 24"},
		{"short", good[:20], 5, "the file has 20 bytes"},
		{"magic", spoil(func(d []byte) { d[0] = 'X' }), 5, `magic "XRICPUJ1", want "NRICPUJ1"`},
		{"checksum", spoil(func(d []byte) { d[8]++ }), 5, "bad journal header: checksum"},
		{"another generation", good, 6, "it says generation 5, the file name says 6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseJournal(tc.data, tc.gen)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("parseJournal error %v, want one containing %q", err, tc.reason)
			}
		})
	}
}

func TestParseJournalRefusesARecordThatDoesNotDecode(t *testing.T) {
	data := journalHeader(1)
	payload := append(appendPayload(nil, 1, nil), 42) // op kind 42
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	frame = binary.LittleEndian.AppendUint32(frame, frameChecksum(frame, payload))
	data = append(append(data, frame...), payload...)
	_, _, err := parseJournal(data, 1)
	if err == nil || !strings.Contains(err.Error(), "record at offset 24 does not decode: operation 1: unknown kind 42") {
		t.Errorf("parseJournal error %v, want the record's decode error", err)
	}
}

func TestJournalNames(t *testing.T) {
	if got, want := journalName(12), "cpu_manager_state.journal.00000000000000000012"; got != want {
		t.Errorf("journalName(12) = %q, want %q", got, want)
	}
	for name, want := range map[string]bool{
		journalName(1):         true,
		journalName(1<<64 - 1): true,
		journalName(0):         false, // generations start at 1
		journalName(3) + ".corrupt-20261122T113456.000000789Z": false,
		"cpu_manager_state.journal.12":                         false,
		"cpu_manager_state.journal.0000000000000000001x":       false,
		"cpu_manager_state":                                    false,
	} {
		if _, ok := parseJournalName(name); ok != want {
			t.Errorf("parseJournalName(%q) ok = %v, want %v", name, ok, want)
		}
	}
}
