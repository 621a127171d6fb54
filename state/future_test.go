package state

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files of testdata/future were "written by a newer nri-cpumanager":
// checkpoint-v3.json, a checkpoint of format version 3 with fields this
// build does not know and a checksum it cannot check, and journal/, a
// journal whose header says journal format 2.

// futureFile returns the content of testdata/future/<name>.
func futureFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "future", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestFileFromTheFuture: a checkpoint or a journal of a newer format is
// refused with a *NewerFormatError that says what happened and what to do,
// whatever else the directory holds, and the directory is left as it is:
// nothing moved aside, nothing written, not even by a later Save.
func TestFileFromTheFuture(t *testing.T) {
	futureJournal := futureFile(t, "journal/"+journalName(1))
	damagedJournal, err := os.ReadFile(filepath.Join("testdata", "journal", "damaged-middle-record", journalName(2)))
	if err != nil {
		t.Fatal(err)
	}
	v1Ref := encodeV1(sampleState(t))
	v1Ref.Journal = &journalRefV1{Generation: 1}
	v1WithJournal, err := seal(v1Ref)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		files   map[string][]byte
		path    string // of the file at fault
		version int
		text    string
	}{
		{"a checkpoint of format 3", map[string][]byte{CheckpointFile: futureFile(t, "checkpoint-v3.json")},
			CheckpointFile, 3, "format 3; this build reads formats 1–2"},
		{"a checkpoint of format 3 and a damaged journal", map[string][]byte{
			CheckpointFile:   futureFile(t, "checkpoint-v3.json"),
			journalName(2):   damagedJournal,
			tempPrefix + "7": []byte("{"),
		}, CheckpointFile, 3, "format 3; this build reads formats 1–2"},
		{"a journal of format 2", map[string][]byte{journalName(1): futureJournal},
			journalName(1), 2, "format 2; this build reads format 1"},
		{"a journal of format 2 continuing a version-1 file", map[string][]byte{
			CheckpointFile: v1WithJournal, journalName(1): futureJournal,
		}, journalName(1), 2, "format 2; this build reads format 1"},
		{"a journal of format 2 next to a whole file", map[string][]byte{
			CheckpointFile: referenceEncoding(t, sampleState(t)), journalName(1): futureJournal,
		}, journalName(1), 2, "format 2; this build reads format 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, data := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before := dirImage(t, dir)
			path := filepath.Join(dir, tc.path)
			want := "checkpoint " + path + " was written by a newer nri-cpumanager (" + tc.text +
				"): refusing to start rather than lose it; roll forward, or move the file away to start empty"

			_, err := Inspect(dir, kepOnline)
			checkNewer(t, "Inspect", err, path, tc.version, want)

			st := openTestStore(t, dir)
			_, err = st.Load(kepOnline)
			checkNewer(t, "Load", err, path, tc.version, want)
			err = st.Save(sampleState(t))
			var newer *NewerFormatError
			if !errors.As(err, &newer) || !strings.Contains(err.Error(), want) {
				t.Errorf("Save after Load refused the file: %v, want the refusal again", err)
			}
			if after := dirImage(t, dir); !maps.Equal(before, after) {
				t.Errorf("the directory changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// checkNewer fails the test unless err is the *NewerFormatError of path
// with the text want.
func checkNewer(t *testing.T, what string, err error, path string, version int, want string) {
	t.Helper()
	var newer *NewerFormatError
	var cerr *CorruptError
	switch {
	case errors.As(err, &cerr):
		t.Errorf("%s: a file of a newer format taken for corruption: %v", what, err)
	case !errors.As(err, &newer):
		t.Errorf("%s: %v, want a *NewerFormatError", what, err)
	case newer.Path != path || newer.Version != version || err.Error() != want:
		t.Errorf("%s: %+v\n%v\nwant %s (version %d)\n%s", what, newer, err, path, version, want)
	}
}

func TestUnmarshalOfANewerFormat(t *testing.T) {
	_, err := Unmarshal(futureFile(t, "checkpoint-v3.json"), kepOnline)
	want := "checkpoint was written by a newer nri-cpumanager (format 3; this build reads formats 1–2): " +
		"refusing to start rather than lose it; roll forward, or move the file away to start empty"
	var newer *NewerFormatError
	if !errors.As(err, &newer) || err.Error() != want {
		t.Errorf("Unmarshal: %v, want %s", err, want)
	}
}
