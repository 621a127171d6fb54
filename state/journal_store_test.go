package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// manualOptions never compact on their own: tests compact explicitly.
var manualOptions = storeOptions{compactBytes: 1 << 40, idleDelay: time.Hour, maxDelay: time.Hour, prealloc: 4 << 10}

// stateLine returns n consistent states on CPUs 0-15 where each differs
// from the one before by one container, as the plugin's states do.
func stateLine(t testing.TB, n int) []*State {
	states := []*State{sampleState(t)}
	for i := 1; i < n; i++ {
		s := states[i-1].Clone()
		cpu := 8 + i%8
		if i%16 < 8 {
			s.SetAssignment("pod-line", fmt.Sprintf("c%d", cpu), Assignment{Original: cpus(t, fmt.Sprint(cpu))})
			s.defaultCPUSet = s.defaultCPUSet.Difference(cpus(t, fmt.Sprint(cpu)))
		} else {
			s.DeleteAssignment("pod-line", fmt.Sprintf("c%d", cpu))
			s.defaultCPUSet = s.defaultCPUSet.Union(cpus(t, fmt.Sprint(cpu)))
		}
		s.SetPodResources("pod-line", PodResources{Resources: Resources{CPUShares: uint64(i)}})
		states = append(states, s)
	}
	return states
}

// crashImage copies the snapshot and journals of dir as they are now,
// which is what a crash of the process would leave, to a new directory.
func crashImage(t testing.TB, dir string) string {
	t.Helper()
	image := filepath.Join(t.TempDir(), "image")
	if err := os.Mkdir(image, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range readStateFiles(t, dir) {
		if name == lockFile {
			continue
		}
		if err := os.WriteFile(filepath.Join(image, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return image
}

// loadDir loads the state of dir with a new store, closed at the end of
// the test.
func loadDir(t testing.TB, dir string) (*State, error) {
	t.Helper()
	return openTestStore(t, dir, manualOptions).Load(kepOnline)
}

func save(t testing.TB, st *Store, states ...*State) {
	t.Helper()
	for i, s := range states {
		if err := st.Save(s); err != nil {
			t.Fatalf("Save %d: %v", i, err)
		}
	}
}

func TestSaveLoadRoundTrips(t *testing.T) {
	states := stateLine(t, 12)
	tests := []struct {
		name string
		// between runs after each Save of states[i].
		between func(t *testing.T, st *Store, i int) *Store
	}{
		{"journal only", func(_ *testing.T, st *Store, _ int) *Store { return st }},
		{"compaction after every Save", func(t *testing.T, st *Store, _ int) *Store {
			if err := st.compact(st.opts.prealloc); err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"compaction every third Save", func(t *testing.T, st *Store, i int) *Store {
			if i%3 == 2 {
				if err := st.compact(st.opts.prealloc); err != nil {
					t.Fatal(err)
				}
			}
			return st
		}},
		{"Close and Load every fourth Save", func(t *testing.T, st *Store, i int) *Store {
			if i%4 != 3 {
				return st
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			next := openTestStore(t, st.dir, manualOptions)
			if got, err := next.Load(kepOnline); err != nil || !got.Equal(states[i]) {
				t.Fatalf("Load after Close: %v; state equal: %v", err, got.Equal(states[i]))
			}
			return next
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			st := openTestStore(t, dir, manualOptions)
			for i, s := range states {
				save(t, st, s)
				st = tc.between(t, st, i)
				got, err := loadDir(t, crashImage(t, dir))
				if err != nil {
					t.Fatalf("after Save %d: crash image does not load: %v", i, err)
				}
				if !got.Equal(s) {
					t.Fatalf("after Save %d: crash image holds another state", i)
				}
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := loadDir(t, dir)
			if err != nil || !got.Equal(states[len(states)-1]) {
				t.Fatalf("Load after Close: %v (state equal: %v)", err, got.Equal(states[len(states)-1]))
			}
		})
	}
}

func TestSaveAppendsOneRecordAndLeavesTheSnapshot(t *testing.T) {
	states := stateLine(t, 3)
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, manualOptions)
	save(t, st, states[0])
	if err := st.compact(st.opts.prealloc); err != nil {
		t.Fatal(err)
	}
	snapshot, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	save(t, st, states[1], states[2])

	if after, _ := os.ReadFile(st.Path()); !bytes.Equal(after, snapshot) {
		t.Error("Save rewrote the snapshot")
	}
	gen := st.journal.gen
	data, err := os.ReadFile(filepath.Join(dir, journalName(gen)))
	if err != nil {
		t.Fatal(err)
	}
	records, _, err := parseJournal(data, gen)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 2 || records[0].seq != 2 || records[1].seq != 3 {
		t.Fatalf("journal holds %+v, want records 2 and 3", records)
	}
	for i, r := range records {
		// one container added or removed, its pod's resources, the pool
		if len(r.ops) != 3 {
			t.Errorf("record %d has %d ops, want 3: %+v", r.seq, len(r.ops), r.ops)
		}
		if i == 0 && r.offset != journalHeaderSize {
			t.Errorf("first record at offset %d, want %d", r.offset, journalHeaderSize)
		}
	}
	if info, _ := os.Stat(filepath.Join(dir, journalName(gen))); info.Size() != manualOptions.prealloc {
		t.Errorf("journal is %d bytes, want its preallocated %d", info.Size(), manualOptions.prealloc)
	}
}

func TestFirstSaveInAnEmptyDirectoryIsARecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, manualOptions)
	if _, err := st.Load(kepOnline); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Load of an empty directory: %v", err)
	}
	save(t, st, sampleState(t))
	if _, err := os.Stat(st.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the first Save wrote a snapshot (stat: %v)", err)
	}
	got, err := loadDir(t, crashImage(t, dir))
	if err != nil || !got.Equal(sampleState(t)) {
		t.Fatalf("a journal without a snapshot: Load %v (state equal: %v)", err, got.Equal(sampleState(t)))
	}

	// A crash before record 1 reached the journal: nothing was saved.
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(empty, journalName(1)), buildJournal(1, 4096).data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadDir(t, empty); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Load of a journal without records: %v, want ErrNoCheckpoint", err)
	}
}

// TestLoadIgnoresATornLastRecord cuts the journal at every byte of its
// last record, as a crash during that Save would: Load gives the state of
// the Save before.
func TestLoadIgnoresATornLastRecord(t *testing.T) {
	states := stateLine(t, 3)
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, manualOptions)
	save(t, st, states...)
	journalPath := filepath.Join(dir, journalName(st.journal.gen))
	data, err := os.ReadFile(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	records, _, err := parseJournal(data, st.journal.gen)
	if err != nil || len(records) != 3 {
		t.Fatalf("journal: %d records, %v", len(records), err)
	}
	image := crashImage(t, dir)
	imageJournal := filepath.Join(image, journalName(st.journal.gen))
	last := records[2].offset
	frameEnd := last + frameHeaderSize + int(binary.LittleEndian.Uint32(data[last:])) // without its padding
	for cut := last; cut < frameEnd; cut++ {
		if err := os.WriteFile(imageJournal, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Inspect(image, kepOnline)
		if err != nil || !s.Equal(states[1]) {
			t.Fatalf("journal cut at byte %d: Inspect %v (previous state: %v)", cut, err, s.Equal(states[1]))
		}
		dirCopy := crashImage(t, image)
		if s, err := loadDir(t, dirCopy); err != nil || !s.Equal(states[1]) {
			t.Fatalf("journal cut at byte %d: Load %v (previous state: %v)", cut, err, s.Equal(states[1]))
		}
	}
}

func TestLoadMovesADamagedJournalAside(t *testing.T) {
	states := stateLine(t, 3)
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, manualOptions)
	save(t, st, states[0])
	if err := st.compact(st.opts.prealloc); err != nil {
		t.Fatal(err)
	}
	save(t, st, states[1:]...)
	gen := st.journal.gen
	image := crashImage(t, dir)
	journalPath := filepath.Join(image, journalName(gen))
	data, err := os.ReadFile(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	data[journalHeaderSize+frameHeaderSize+2] ^= 0x10 // in the first of two records
	if err := os.WriteFile(journalPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	before := readStateFiles(t, image)

	_, err = Inspect(image, kepOnline)
	var cerr *CorruptError
	if !errors.As(err, &cerr) || cerr.Path != journalPath || cerr.MovedTo != "" ||
		!strings.Contains(cerr.Reason, "a record in the middle of the journal is damaged") {
		t.Fatalf("Inspect: %v, want a *CorruptError about the journal, nothing moved", err)
	}
	if after := readStateFiles(t, image); len(after) != len(before) {
		t.Fatal("Inspect changed the directory")
	}

	logger, hook := test.NewNullLogger()
	loader := openTestStore(t, image, manualOptions)
	loader.SetLogger(logger)
	loader.now = func() time.Time { return time.Date(2026, 11, 22, 12, 34, 56, 789, time.UTC) }
	_, err = loader.Load(kepOnline)
	if !errors.As(err, &cerr) {
		t.Fatalf("Load: %v, want a *CorruptError", err)
	}
	suffix := ".corrupt-20261122T123456.000000789Z"
	if cerr.Path != journalPath || cerr.MovedTo != journalPath+suffix {
		t.Errorf("CorruptError{Path: %q, MovedTo: %q}, want the journal moved to %s", cerr.Path, cerr.MovedTo, journalPath+suffix)
	}
	wantMoved := map[string]bool{CheckpointFile + suffix: true, journalName(gen) + suffix: true}
	for name, data := range readStateFiles(t, image) {
		if name == lockFile {
			continue
		}
		if !wantMoved[name] {
			t.Errorf("%s is still in use after the state was found damaged", name)
		} else if !bytes.Equal(data, before[strings.TrimSuffix(name, suffix)]) {
			t.Errorf("%s does not hold the bytes it had", name)
		}
		delete(wantMoved, name)
	}
	if len(wantMoved) > 0 {
		t.Errorf("not moved aside: %v", wantMoved)
	}
	entry := hook.LastEntry()
	if entry == nil || entry.Level != logrus.ErrorLevel || entry.Data["movedTo"] != cerr.MovedTo {
		t.Errorf("no error logged with the new path: %+v", entry)
	}
	if _, err := loader.Load(kepOnline); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Load after the state was moved aside: %v, want ErrNoCheckpoint", err)
	}
}

// writeJournal writes journal generation gen of dir holding records
// numbered from first, each the diff between consecutive states.
func writeJournal(t testing.TB, dir string, gen, first uint64, states ...*State) {
	t.Helper()
	data := journalHeader(gen)
	for i := 1; i < len(states); i++ {
		data = appendRecord(data, first+uint64(i-1), diff(states[i-1], states[i]))
	}
	if err := os.WriteFile(filepath.Join(dir, journalName(gen)), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeTestSnapshot(t testing.TB, dir string, s *State, ref journalRefV1) {
	t.Helper()
	if err := writeSnapshot(dir, s, ref); err != nil {
		t.Fatal(err)
	}
}

func TestLoadOfHandMadeDirectories(t *testing.T) {
	s := stateLine(t, 7)
	tests := []struct {
		name   string
		make   func(t *testing.T, dir string)
		want   *State
		reason string // of the CorruptError when want is nil
	}{
		{"a snapshot without journal reference (Marshal's)", func(t *testing.T, dir string) {
			data, err := Marshal(s[3])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, CheckpointFile), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, s[3], ""},
		{"a snapshot continued by two journals", func(t *testing.T, dir string) {
			writeTestSnapshot(t, dir, s[2], journalRefV1{Generation: 4, Sequence: 9})
			writeJournal(t, dir, 4, 10, s[2], s[3], s[4])
			writeJournal(t, dir, 6, 12, s[4], s[5], s[6])
		}, s[6], ""},
		{"obsolete journals before the snapshot's are not read", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, journalName(2)), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			writeTestSnapshot(t, dir, s[2], journalRefV1{Generation: 3, Sequence: 5})
			writeJournal(t, dir, 3, 6, s[2], s[3])
		}, s[3], ""},
		{"a journal replayed over a snapshot that already holds it", func(t *testing.T, dir string) {
			writeTestSnapshot(t, dir, s[5], journalRefV1{Generation: 1, Sequence: 0})
			writeJournal(t, dir, 1, 1, s[0], s[1], s[2], s[3], s[4], s[5])
		}, s[5], ""},
		{"a journal replayed over a snapshot that holds part of it", func(t *testing.T, dir string) {
			writeTestSnapshot(t, dir, s[3], journalRefV1{Generation: 1, Sequence: 0})
			writeJournal(t, dir, 1, 1, s[0], s[1], s[2], s[3], s[4], s[5], s[6])
		}, s[6], ""},
		{"the snapshot's journal is missing", func(t *testing.T, dir string) {
			writeTestSnapshot(t, dir, s[2], journalRefV1{Generation: 4, Sequence: 9})
			writeJournal(t, dir, 5, 12, s[4], s[5])
		}, nil, "it is continued by journal cpu_manager_state.journal.00000000000000000004, which is missing"},
		{"records missing between two journals", func(t *testing.T, dir string) {
			writeTestSnapshot(t, dir, s[2], journalRefV1{Generation: 4, Sequence: 9})
			writeJournal(t, dir, 4, 10, s[2], s[3])
			writeJournal(t, dir, 6, 12, s[4], s[5])
		}, nil, "is number 12 where number 11 belongs: records are missing or repeated"},
		{"the journal starts after the snapshot's record", func(t *testing.T, dir string) {
			writeTestSnapshot(t, dir, s[2], journalRefV1{Generation: 4, Sequence: 9})
			writeJournal(t, dir, 4, 11, s[2], s[3])
		}, nil, "is number 11 where number 10 belongs"},
		{"a record repeated", func(t *testing.T, dir string) {
			writeJournal(t, dir, 1, 1, New(cpus(t, "")), s[0], s[1])
			writeJournal(t, dir, 2, 2, s[1], s[2])
		}, nil, "is number 2 where number 3 belongs"},
		{"no snapshot, and the journal does not start at record 1", func(t *testing.T, dir string) {
			writeJournal(t, dir, 3, 4, s[2], s[3])
		}, nil, "there is no snapshot and the first record (at offset 24) is number 4, not 1"},
		{"records that make the state inconsistent", func(t *testing.T, dir string) {
			overlapping := s[0].Clone()
			overlapping.SetAssignment("pod-x", "x", Assignment{Original: cpus(t, "1")})
			writeTestSnapshot(t, dir, s[0], journalRefV1{Generation: 1, Sequence: 0})
			writeJournal(t, dir, 1, 1, s[0], overlapping)
		}, nil, `replaying journal records 1 to 1 gives an inconsistent state: pod "pod-a" container "app" (CPUs "1-4") and pod "pod-x" container "x" (CPUs "1") overlap`},
		{"records that leave the online CPUs", func(t *testing.T, dir string) {
			outside := s[0].Clone()
			outside.defaultCPUSet = cpus(t, "0,8-16")
			writeTestSnapshot(t, dir, s[0], journalRefV1{Generation: 1, Sequence: 0})
			writeJournal(t, dir, 1, 1, s[0], outside)
		}, nil, `lies outside the online CPUs "0-15"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.make(t, dir)
			inspected, inspectErr := Inspect(dir, kepOnline)
			got, err := loadDir(t, dir)
			if tc.want != nil {
				if err != nil || !got.Equal(tc.want) {
					t.Fatalf("Load: %v (state equal: %v)", err, got.Equal(tc.want))
				}
				if inspectErr != nil || !inspected.Equal(tc.want) {
					t.Fatalf("Inspect: %v (state equal: %v)", inspectErr, inspected.Equal(tc.want))
				}
				return
			}
			var cerr *CorruptError
			if !errors.As(err, &cerr) || !strings.Contains(cerr.Reason, tc.reason) {
				t.Fatalf("Load: %v, want a *CorruptError saying %q", err, tc.reason)
			}
			if !errors.As(inspectErr, &cerr) || !strings.Contains(cerr.Reason, tc.reason) {
				t.Fatalf("Inspect: %v, want a *CorruptError saying %q", inspectErr, tc.reason)
			}
		})
	}
}

func TestSavingTheSameStateAgainRewritesTheSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, manualOptions)
	s := sampleState(t)
	save(t, st, s)
	s.DeleteAssignment("pod-b", "db") // against the rules: the Store holds s
	s.defaultCPUSet = cpus(t, "0,6-15")
	save(t, st, s)
	snapshot, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatalf("no snapshot after saving the same state again: %v", err)
	}
	if got, err := Unmarshal(snapshot, kepOnline); err != nil || !got.Equal(s) {
		t.Errorf("snapshot: %v (state equal: %v)", err, got.Equal(s))
	}
	if got, err := loadDir(t, crashImage(t, dir)); err != nil || !got.Equal(s) {
		t.Errorf("crash image: %v (state equal: %v)", err, got.Equal(s))
	}
}

func TestCloseWritesTheSnapshot(t *testing.T) {
	states := stateLine(t, 4)
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, manualOptions)
	save(t, st, states...)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	got, ref, err := unmarshalSnapshot(data, kepOnline)
	if err != nil || !got.Equal(states[3]) {
		t.Fatalf("snapshot after Close: %v (state equal: %v)", err, got.Equal(states[3]))
	}
	if ref != (journalRefV1{Generation: 2, Sequence: 4}) {
		t.Errorf("snapshot continues at %+v, want journal 2 after record 4", ref)
	}
	if !bytes.Contains(data, []byte(`,"journal":{"generation":2,"sequence":4},"checksum":`)) {
		t.Errorf("snapshot does not name its journal before the checksum:\n%s", data)
	}
	if gens, _ := listJournals(dir); len(gens) != 1 || gens[0] != 2 {
		t.Errorf("journals after Close: %v, want only generation 2", gens)
	}
	if err := st.Save(states[0]); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Save after Close: %v, want an error saying the store is closed", err)
	}
	if _, err := st.Load(kepOnline); err == nil {
		t.Error("Load after Close succeeded")
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// limit (the condition is an asynchronous event, not a performance bound).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// snapshotHolds reports whether dir's snapshot file holds s.
func snapshotHolds(dir string, s *State) bool {
	data, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if err != nil {
		return false
	}
	got, err := Unmarshal(data, kepOnline)
	return err == nil && got.Equal(s)
}

func TestCompactionRuns(t *testing.T) {
	states := stateLine(t, 40)
	tests := []struct {
		name string
		opts storeOptions
	}{
		{"when idle", storeOptions{compactBytes: 1 << 40, idleDelay: 10 * time.Millisecond, maxDelay: time.Hour, prealloc: 4096}},
		{"when the journal is full", storeOptions{compactBytes: 512, idleDelay: time.Hour, maxDelay: time.Hour, prealloc: 4096}},
		{"at the latest after maxDelay", storeOptions{compactBytes: 1 << 40, idleDelay: time.Hour, maxDelay: 10 * time.Millisecond, prealloc: 4096}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			st := openTestStore(t, dir, tc.opts)
			save(t, st, states...)
			last := states[len(states)-1]
			if tc.name == "when the journal is full" {
				// The last records may stay in the journal; the snapshot
				// moves on and the journals it replaces are deleted.
				waitFor(t, "a snapshot", func() bool { _, err := os.Stat(st.Path()); return err == nil })
				waitFor(t, "a compaction of the last full journal", func() bool {
					st.mu.Lock()
					defer st.mu.Unlock()
					return st.journal.end < tc.opts.compactBytes
				})
			} else {
				waitFor(t, "the snapshot to hold the last state", func() bool { return snapshotHolds(dir, last) })
			}
			waitFor(t, "obsolete journals to go", func() bool { gens, _ := listJournals(dir); return len(gens) == 1 })
			if got := inspectDir(t, dir); !got.Equal(last) {
				t.Error("the directory does not hold the last state")
			}
		})
	}
}

// TestSavesPostponeCompaction: Saves that keep coming less than idleDelay
// apart postpone the compaction (until maxDelay); once they stop, it runs.
func TestSavesPostponeCompaction(t *testing.T) {
	const idle = time.Second // far above one Save's fdatasync on a loaded disk
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, storeOptions{compactBytes: 1 << 40, idleDelay: idle, maxDelay: time.Hour, prealloc: 64 << 10})
	states := stateLine(t, 2)
	for start := time.Now(); time.Since(start) < 3*idle; {
		for _, s := range states {
			save(t, st, s)
			time.Sleep(idle / 50)
		}
	}
	if _, err := os.Stat(st.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a snapshot was written while Saves kept coming (stat: %v)", err)
	}
	waitFor(t, "the snapshot once Saves stop", func() bool { return snapshotHolds(dir, states[1]) })
}

func TestSecondStoreOnADirectoryIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first := openTestStore(t, dir, manualOptions)
	save(t, first, sampleState(t))

	_, err := NewStore(dir)
	want := "state directory " + dir + " is locked by another process; another nri-cpumanager may be running"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second NewStore: %v, want an error containing %q", err, want)
	}
	if got := inspectDir(t, dir); !got.Equal(sampleState(t)) { // Inspect needs no lock
		t.Error("Inspect while the directory is locked gives another state")
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := openTestStore(t, dir, manualOptions)
	if got, err := second.Load(kepOnline); err != nil || !got.Equal(sampleState(t)) {
		t.Fatalf("Load by the next owner: %v", err)
	}
}

func TestInspectOfMissingState(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "absent")
	for name, dir := range map[string]string{"no directory": absent, "empty directory": t.TempDir()} {
		if _, err := Inspect(dir, kepOnline); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("%s: Inspect: %v, want ErrNoCheckpoint", name, err)
		}
	}
	if _, err := os.Stat(absent); !errors.Is(err, os.ErrNotExist) {
		t.Error("Inspect created the directory")
	}
}

// TestConcurrentSavesDuringRotation has writers save their own lines of
// states, with compactions as often as possible, while a reader inspects
// the directory: every state read is one that was saved, and the
// directory ends holding the last state of one of the writers.
func TestConcurrentSavesDuringRotation(t *testing.T) {
	const writers, saves = 3, 60
	opts := storeOptions{compactBytes: 1 << 10, idleDelay: time.Millisecond, maxDelay: 2 * time.Millisecond, prealloc: 2 << 10}
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, opts)

	lines := make([][]*State, writers)
	saved := map[uint64]*State{} // by CPUShares of pod "writer"
	for w := range lines {
		lines[w] = stateLine(t, saves)
		for i, s := range lines[w] {
			id := uint64(w*saves + i + 1)
			s.SetPodResources("writer", PodResources{Resources: Resources{CPUShares: id}})
			saved[id] = s
		}
	}
	errs := make(chan error, writers+1)
	done := make(chan struct{})
	for w := range writers {
		go func() {
			for _, s := range lines[w] {
				if err := st.Save(s); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		inspections := 0
		for {
			select {
			case <-done:
				if inspections == 0 {
					errs <- errors.New("no inspection ran")
				}
				errs <- nil
				return
			default:
			}
			s, err := Inspect(dir, kepOnline)
			if errors.Is(err, ErrNoCheckpoint) {
				continue
			}
			if err != nil {
				errs <- fmt.Errorf("Inspect during Saves: %w", err)
				return
			}
			r, _ := s.PodResources("writer")
			if want, ok := saved[r.Resources.CPUShares]; !ok || !s.Equal(want) {
				errs <- fmt.Errorf("Inspect during Saves gave a state that was never saved (writer id %d)", r.Resources.CPUShares)
				return
			}
			inspections++
		}
	}()
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := loadDir(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := got.PodResources("writer")
	if id := r.Resources.CPUShares; id%saves != 0 || !got.Equal(saved[id]) {
		t.Errorf("after the Saves the directory holds state %d, want the last state of a writer", id)
	}
}

func TestJournalRecordsAreAligned(t *testing.T) {
	for _, n := range []int{0, 1, 7, 100} {
		ops := []op{{kind: opDeleteContainer, key: strings.Repeat("x", n)}}
		frame := appendRecord(nil, 1, ops)
		if len(frame)%frameAlign != 0 {
			t.Errorf("frame of %d bytes is not a multiple of %d", len(frame), frameAlign)
		}
		if n := binary.LittleEndian.Uint32(frame); int(n) > len(frame)-frameHeaderSize {
			t.Errorf("frame length %d runs past the frame", n)
		}
	}
}

// TestCompactionAfterAFailedWriteLetsSavesAppendAgain breaks the journal,
// so that a Save fails and leaves it unusable; a compaction then moves the
// state to a new journal, and the next Save appends to it instead of
// rewriting the snapshot.
func TestCompactionAfterAFailedWriteLetsSavesAppendAgain(t *testing.T) {
	states := stateLine(t, 4)
	dir := filepath.Join(t.TempDir(), "state")
	st := openTestStore(t, dir, manualOptions)
	save(t, st, states[:2]...)
	st.mu.Lock()
	_ = st.journal.f.Close()
	st.mu.Unlock()
	if err := st.Save(states[2]); err == nil {
		t.Fatal("Save into a closed journal succeeded")
	}
	if err := st.compact(st.opts.prealloc); err != nil {
		t.Fatalf("compaction after a failed write: %v", err)
	}
	snapshot, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Unmarshal(snapshot, kepOnline); err != nil || !got.Equal(states[1]) {
		t.Fatalf("the compaction's snapshot: %v (holds the last saved state: %v)", err, got.Equal(states[1]))
	}
	save(t, st, states[3])
	if after, _ := os.ReadFile(st.Path()); !bytes.Equal(after, snapshot) {
		t.Error("the Save after the compaction rewrote the snapshot instead of appending")
	}
	if got, err := loadDir(t, crashImage(t, dir)); err != nil || !got.Equal(states[3]) {
		t.Errorf("crash image: %v (holds the last state: %v)", err, got.Equal(states[3]))
	}
}
