package state

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// journalPrefix starts the file name of every journal generation.
const journalPrefix = CheckpointFile + ".journal."

// journalGenDigits is how many digits a journal's generation has in its
// file name, so that names sort like generations.
const journalGenDigits = 20

// journalName returns the file name of journal generation gen.
func journalName(gen uint64) string {
	return fmt.Sprintf("%s%0*d", journalPrefix, journalGenDigits, gen)
}

// parseJournalName returns the generation of a journal file name.
func parseJournalName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, journalPrefix)
	if !ok || len(digits) != journalGenDigits {
		return 0, false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	gen, err := strconv.ParseUint(digits, 10, 64)
	return gen, err == nil && gen > 0
}

// listJournals returns the generations of the journals in dir, ascending.
func listJournals(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list state directory: %w", err)
	}
	var gens []uint64
	for _, e := range entries {
		if gen, ok := parseJournalName(e.Name()); ok && e.Type().IsRegular() {
			gens = append(gens, gen)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// journalWriter appends records to one journal file.
type journalWriter struct {
	f    *os.File
	path string
	gen  uint64
	// end is the offset where the next record goes.
	end int64
}

// createJournal makes journal generation gen in dir: a header and
// prealloc bytes of zeros written to a temp file, synced, renamed into
// place, and the directory synced. A journal file therefore always has a
// whole header, and records later overwrite zeros that are already on
// disk, so syncing a record writes no file metadata unless it runs past
// the preallocated end.
func createJournal(dir string, gen uint64, prealloc int64) (_ *journalWriter, err error) {
	f, err := os.CreateTemp(dir, tempPrefix+"journal-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("create journal: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	content := make([]byte, max(prealloc, journalHeaderSize))
	copy(content, journalHeader(gen))
	if _, err := f.Write(content); err != nil {
		return nil, fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	path := filepath.Join(dir, journalName(gen))
	if err := os.Rename(f.Name(), path); err != nil {
		return nil, fmt.Errorf("rename %s: %w", f.Name(), err)
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	return &journalWriter{f: f, path: path, gen: gen, end: journalHeaderSize}, nil
}

// append writes one encoded record at the end of the journal and waits
// until it is on disk. On error the journal may hold part of the record
// and must not be appended to again.
func (j *journalWriter) append(frame []byte) error {
	if _, err := j.f.WriteAt(frame, j.end); err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, err)
	}
	if err := unix.Fdatasync(int(j.f.Fd())); err != nil {
		return fmt.Errorf("fdatasync journal %s: %w", j.path, err)
	}
	j.end += int64(len(frame))
	return nil
}

// close closes the journal file.
func (j *journalWriter) close() error {
	return j.f.Close()
}
