package state

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The journal design wrote journals; this build only reads them. The
// tests encode their own, as that design did.

// journalHeader returns the header of journal generation gen.
func journalHeader(gen uint64) []byte {
	h := make([]byte, journalHeaderSize)
	copy(h, journalMagic)
	binary.LittleEndian.PutUint64(h[8:], gen)
	binary.LittleEndian.PutUint32(h[16:], crc32c(h[:16]))
	return h
}

// appendRecord appends the frame of record seq holding ops to buf.
func appendRecord(buf []byte, seq uint64, ops ...op) []byte {
	payload := binary.AppendUvarint(nil, seq)
	str := func(s string) { payload = append(binary.AppendUvarint(payload, uint64(len(s))), s...) }
	res := func(r ResourceRecord) {
		payload = binary.AppendUvarint(payload, r.CPUShares)
		payload = binary.AppendVarint(payload, r.CPUQuota)
		payload = binary.AppendUvarint(payload, r.CPUPeriod)
		payload = binary.AppendVarint(payload, r.MemoryLimit)
	}
	for _, o := range ops {
		payload = append(payload, byte(o.kind))
		switch o.kind {
		case opSetDefault:
			str(o.cpus.String())
		case opSetAssignment:
			str(o.key)
			str(o.name)
			str(o.assignment.Baseline.String())
			str(o.assignment.Resized.String())
		case opDeleteAssignment:
			str(o.key)
			str(o.name)
		case opSetContainer:
			str(o.key)
			str(o.ref.PodUID)
			str(o.ref.Name)
		case opDeleteContainer, opDeletePod:
			str(o.key)
		case opSetPod:
			str(o.key)
			res(o.pod.Resources)
			res(o.pod.Overhead)
		}
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
	buf = binary.LittleEndian.AppendUint32(buf, crc32cUpdate(crc32c(buf[len(buf)-4:]), payload))
	buf = append(buf, payload...)
	for len(buf)%frameAlign != 0 {
		buf = append(buf, 0)
	}
	return buf
}

// setShares is a record's op that sets pod "line"'s CPU shares to n: one
// change per record, whose value says which record a state holds.
func setShares(n uint64) op {
	return op{kind: opSetPod, key: "line", pod: PodRecord{Resources: ResourceRecord{CPUShares: n}}}
}

// buildJournal encodes journal generation gen holding records numbered
// from first, record i setting setShares(first+i); it returns the data
// and each record's offset.
func buildJournal(gen, first uint64, n int) ([]byte, []int) {
	data := journalHeader(gen)
	var offsets []int
	for i := range uint64(n) {
		offsets = append(offsets, len(data))
		data = appendRecord(data, first+i, setShares(first+i))
	}
	return data, offsets
}

// TestParseJournalIgnoresATornLastRecord cuts the last record short at
// every byte, as a crash during its Save would: the file ends there, or
// zeros follow (a preallocated journal).
func TestParseJournalIgnoresATornLastRecord(t *testing.T) {
	data, offsets := buildJournal(1, 1, 3)
	last := offsets[2]
	for cut := last; cut < len(data)-1; cut++ {
		for name, torn := range map[string][]byte{
			"truncated": data[:cut],
			"zeroed":    append(append([]byte{}, data[:cut]...), make([]byte, 1024)...),
		} {
			records, err := parseJournal(torn, 1)
			whole := name == "zeroed" && strings.Trim(string(data[cut:]), "\x00") == ""
			if want := map[bool]int{false: 2, true: 3}[whole]; err != nil || len(records) != want {
				t.Fatalf("cut at %d (%s): %d records, %v; want %d", cut, name, len(records), err, want)
			}
		}
	}
}

func TestParseJournalRefusesADamagedMiddleRecord(t *testing.T) {
	data, offsets := buildJournal(1, 1, 3)
	data = append(data, make([]byte, 256)...)
	middle := offsets[1]
	frameEnd := middle + frameHeaderSize + int(binary.LittleEndian.Uint32(data[middle:])) // without its padding
	for i := middle; i < frameEnd; i++ {
		damaged := append([]byte{}, data...)
		damaged[i] ^= 0x80
		_, err := parseJournal(damaged, 1)
		if err == nil || !strings.Contains(err.Error(), "a record in the middle of the journal is damaged") {
			t.Fatalf("byte %d of the middle record flipped: %v, want damage reported", i-middle, err)
		}
	}
}

func TestParseJournalRefuses(t *testing.T) {
	good, _ := buildJournal(5, 1, 3)
	spoil := func(f func(data []byte)) []byte {
		data := append([]byte{}, good...)
		f(data)
		return data
	}
	payload := []byte{1, 42} // record 1, op kind 42
	undecodable := binary.LittleEndian.AppendUint32(journalHeader(5), uint32(len(payload)))
	undecodable = binary.LittleEndian.AppendUint32(undecodable, crc32cUpdate(crc32c(undecodable[journalHeaderSize:]), payload))
	undecodable = append(undecodable, payload...)
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
		{"a record that does not decode", undecodable, 5, "record at offset 24 does not decode: operation 1: unknown kind 42"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseJournal(tc.data, tc.gen)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("parseJournal error %v, want one containing %q", err, tc.reason)
			}
		})
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

// TestReplayOfHandMadeDirectories checks the rules that tie a file of the
// journal design to its journals: which journals are read, and that the
// records follow each other without a gap.
func TestReplayOfHandMadeDirectories(t *testing.T) {
	writeFile := func(t *testing.T, dir string, ref *journalRefV1) {
		cp := encodeV1(sampleState(t))
		cp.Journal = ref
		data, err := seal(cp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, CheckpointFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeJournal := func(t *testing.T, dir string, gen, first uint64, n int) {
		data, _ := buildJournal(gen, first, n)
		if err := os.WriteFile(filepath.Join(dir, journalName(gen)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		make   func(t *testing.T, dir string)
		shares uint64 // of the state loaded, 0: sampleState's
		reason string // of the CorruptError when the directory must not load
	}{
		{"a file continued by two journals", func(t *testing.T, dir string) {
			writeFile(t, dir, &journalRefV1{Generation: 4, Sequence: 9})
			writeJournal(t, dir, 4, 10, 2)
			writeJournal(t, dir, 6, 12, 3)
		}, 14, ""},
		{"journals before the file's generation are not read", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, journalName(2)), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, &journalRefV1{Generation: 3, Sequence: 5})
			writeJournal(t, dir, 3, 6, 1)
		}, 6, ""},
		{"journals next to a whole file are obsolete", func(t *testing.T, dir string) {
			writeFile(t, dir, nil)
			writeJournal(t, dir, 3, 6, 1)
			if err := os.WriteFile(filepath.Join(dir, journalName(4)), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0, ""},
		{"journals without a file", func(t *testing.T, dir string) {
			writeJournal(t, dir, 1, 1, 2)
		}, 2, ""},
		{"the file's journal is missing", func(t *testing.T, dir string) {
			writeFile(t, dir, &journalRefV1{Generation: 4, Sequence: 9})
			writeJournal(t, dir, 5, 12, 2)
		}, 0, "it is continued by journal cpu_manager_state.journal.00000000000000000004, which is missing"},
		{"records missing between two journals", func(t *testing.T, dir string) {
			writeFile(t, dir, &journalRefV1{Generation: 4, Sequence: 9})
			writeJournal(t, dir, 4, 10, 1)
			writeJournal(t, dir, 6, 12, 2)
		}, 0, "is number 12 where number 11 belongs: records are missing or repeated"},
		{"a record repeated", func(t *testing.T, dir string) {
			writeJournal(t, dir, 1, 1, 2)
			writeJournal(t, dir, 2, 2, 1)
		}, 0, "is number 2 where number 3 belongs"},
		{"no file, and the journal does not start at record 1", func(t *testing.T, dir string) {
			writeJournal(t, dir, 3, 4, 2)
		}, 0, "there is no snapshot and the first record (at offset 24) is number 4, not 1"},
		{"records that make the state inconsistent", func(t *testing.T, dir string) {
			writeFile(t, dir, &journalRefV1{Generation: 1})
			data := appendRecord(journalHeader(1), 1, op{kind: opSetAssignment, key: "pod-x", name: "x",
				assignment: Assignment{Baseline: cpus(t, "1")}})
			if err := os.WriteFile(filepath.Join(dir, journalName(1)), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0, `replaying journal records 1 to 1 gives an inconsistent state: pod "pod-a" container "app" (CPUs "1-4") and pod "pod-x" container "x" (CPUs "1") overlap`},
		{"records that leave the online CPUs", func(t *testing.T, dir string) {
			writeFile(t, dir, &journalRefV1{Generation: 1})
			data := appendRecord(journalHeader(1), 1, op{kind: opSetDefault, cpus: cpus(t, "0,8-16")})
			if err := os.WriteFile(filepath.Join(dir, journalName(1)), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0, `lies outside the online CPUs "0-15"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.make(t, dir)
			got, err := Inspect(dir, kepOnline)
			if tc.reason != "" {
				var cerr *CorruptError
				if !errors.As(err, &cerr) || !strings.Contains(cerr.Reason, tc.reason) {
					t.Fatalf("Inspect: %v, want a *CorruptError saying %q", err, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			r, _ := got.PodResources("line")
			if r.Resources.CPUShares != tc.shares {
				t.Errorf("the state holds record %d, want %d", r.Resources.CPUShares, tc.shares)
			}
		})
	}
}
