package state

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// journalFixtures are state directories written by the journal design
// (testdata/journal/<name>): a snapshot naming the journal that continues
// it, journals only (its first Save into an empty directory), two journal
// generations (a crash during a compaction), a journal cut in its last
// record (a crash during a Save), and one whose first record is damaged.
// <name>.want.json holds the state each must load as.
var journalFixtures = []struct {
	name   string
	reason string // of the *CorruptError, for a directory that must not load
}{
	{name: "snapshot-and-journal"},
	{name: "journal-only"},
	{name: "two-journals"},
	{name: "torn-last-record"},
	{name: "damaged-middle-record", reason: "a record in the middle of the journal is damaged"},
}

// copyFixture copies testdata/journal/<name> to a new directory.
func copyFixture(t testing.TB, name string) string {
	t.Helper()
	src := filepath.Join("testdata", "journal", name)
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fixtureWant returns the state testdata/journal/<name>.want.json holds.
func fixtureWant(t testing.TB, name string) *State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "journal", name+".want.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Unmarshal(data, kepOnline)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLoadOfJournalDirectories loads the state directories of the journal
// design: an upgrade keeps the state they hold.
func TestLoadOfJournalDirectories(t *testing.T) {
	for _, tc := range journalFixtures {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyFixture(t, tc.name)
			got, err := openTestStore(t, dir).Load(kepOnline)
			if tc.reason != "" {
				var cerr *CorruptError
				if !errors.As(err, &cerr) || !strings.Contains(cerr.Reason, tc.reason) {
					t.Fatalf("Load: %v, want a *CorruptError saying %q", err, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !got.Equal(fixtureWant(t, tc.name)) {
				t.Errorf("Load gives another state than %s.want.json", tc.name)
			}
		})
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
	dirs := map[string]func(t *testing.T) string{
		"empty": func(t *testing.T) string { return t.TempDir() },
		"a checkpoint file and a leftover temp file": func(t *testing.T) string {
			dir := t.TempDir()
			data, err := Marshal(sampleState(t))
			if err != nil {
				t.Fatal(err)
			}
			for name, content := range map[string][]byte{CheckpointFile: data, tempPrefix + "123": []byte("{")} {
				if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		},
	}
	for _, tc := range journalFixtures {
		if tc.reason == "" {
			dirs[tc.name] = func(t *testing.T) string { return copyFixture(t, tc.name) }
		}
	}
	for name, makeDir := range dirs {
		t.Run(name, func(t *testing.T) {
			dir := makeDir(t)
			before := dirImage(t, dir)
			st := openTestStore(t, dir)
			if _, err := st.Load(kepOnline); err != nil && !errors.Is(err, ErrNoCheckpoint) {
				t.Fatalf("Load: %v", err)
			}
			if after := dirImage(t, dir); !maps.Equal(before, after) {
				t.Errorf("NewStore and Load changed the directory:\nbefore %q\nafter  %q", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
			}
		})
	}
}

// TestSaveAfterAnUpgrade: the first Save after loading a directory of the
// journal design writes the whole file and deletes the journals; journals
// that a crash left next to that file are not read again.
func TestSaveAfterAnUpgrade(t *testing.T) {
	for _, tc := range journalFixtures {
		if tc.reason != "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			dir := copyFixture(t, tc.name)
			journals := map[string][]byte{}
			for name, data := range readStateFiles(t, dir) {
				if _, ok := parseJournalName(name); ok {
					journals[name] = data
				}
			}
			st := openTestStore(t, dir)
			s, err := st.Load(kepOnline)
			if err != nil {
				t.Fatal(err)
			}
			s.DeletePod("pod-b")
			s.SetDefaultCPUSet(s.DefaultCPUSet().Union(cpus(t, "6-7")))
			if err := st.Save(s); err != nil {
				t.Fatal(err)
			}
			files := slices.Sorted(maps.Keys(readStateFiles(t, dir)))
			if want := []string{CheckpointFile, lockFile}; !slices.Equal(files, want) {
				t.Errorf("after the first Save the directory holds %q, want %q", files, want)
			}
			if got := inspectDir(t, dir); !got.Equal(s) {
				t.Error("the checkpoint file does not hold the state saved")
			}

			// A crash before the journals were deleted.
			for name, data := range journals {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := inspectDir(t, dir); !got.Equal(s) {
				t.Error("journals next to a whole checkpoint file were replayed")
			}
		})
	}
}
