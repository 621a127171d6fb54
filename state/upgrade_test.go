package state

import (
	"errors"
	"os"
	"path/filepath"
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
			st, err := NewStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			got, err := st.Load(kepOnline)
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
