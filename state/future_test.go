package state

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/future/checkpoint-v5.json was "written by a newer
// nri-cpumanager": a checkpoint of format version 5 with fields this build
// does not know and a checksum it cannot check.

// futureFile returns the content of testdata/future/<name>.
func futureFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "future", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestFileFromTheFuture: a checkpoint of a newer format is refused with a
// *NewerFormatError that says what happened and what to do, whatever else
// the directory holds, and the directory is left as it is: nothing moved
// aside, nothing written, not even by a later Save.
func TestFileFromTheFuture(t *testing.T) {
	future := futureFile(t, "checkpoint-v5.json")
	tests := []struct {
		name  string
		files map[string][]byte
	}{
		{"a checkpoint of format 5", map[string][]byte{CheckpointFile: future}},
		{"a checkpoint of format 5, a journal and a temp file", map[string][]byte{
			CheckpointFile:         future,
			journalPrefix + "0001": []byte("NRICPUJ1"),
			tempPrefix + "7":       []byte("{"),
		}},
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
			path := filepath.Join(dir, CheckpointFile)
			want := "checkpoint " + path + " was written by a newer nri-cpumanager (format 5; this build reads formats up to 4): " +
				"refusing to start rather than lose it; roll forward, or move the file away to start empty"

			_, err := Inspect(dir, kepOnline)
			checkNewer(t, "Inspect", err, path, 5, want)

			st := openTestStore(t, dir)
			_, err = st.Load(kepOnline)
			checkNewer(t, "Load", err, path, 5, want)
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
	_, err := Unmarshal(futureFile(t, "checkpoint-v5.json"), kepOnline)
	want := "checkpoint was written by a newer nri-cpumanager (format 5; this build reads formats up to 4): " +
		"refusing to start rather than lose it; roll forward, or move the file away to start empty"
	var newer *NewerFormatError
	if !errors.As(err, &newer) || err.Error() != want {
		t.Errorf("Unmarshal: %v, want %s", err, want)
	}
}
