package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	// tempPrefix starts the name of a snapshot or journal being written.
	tempPrefix = CheckpointFile + ".tmp-"
	// corruptSuffix, followed by a UTC timestamp, ends the name of a file
	// moved aside because it is not trusted.
	corruptSuffix = ".corrupt-"
	// corruptTimeFormat is the UTC timestamp of a moved-aside file,
	// precise enough that two corruptions never share a name.
	corruptTimeFormat = "20060102T150405.000000000Z"
)

// writeSnapshot writes s as the snapshot of dir, continued by the journal
// records ref names.
func writeSnapshot(dir string, s *State, ref journalRefV1) error {
	data, err := marshalSnapshot(s, ref)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	path := filepath.Join(dir, CheckpointFile)
	if err := writeFileAtomic(dir, path, data); err != nil {
		return fmt.Errorf("write snapshot %s: %w", path, err)
	}
	return nil
}

// writeFileAtomic replaces path (in dir) with data so that a crash at any
// moment leaves either the old or the new content, and the new content is
// durable when it returns nil.
func writeFileAtomic(dir, path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(dir, tempPrefix+"*") // mode 0600
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp.Name(), err)
	}
	return syncDir(dir)
}

// syncDir makes a rename, creation or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// removeJournalsBefore deletes the journals of dir older than generation
// gen, oldest first, and syncs the directory.
func removeJournalsBefore(dir string, gen uint64) error {
	gens, err := listJournals(dir)
	if err != nil {
		return err
	}
	removed := false
	for _, g := range gens {
		if g >= gen {
			break
		}
		if err := os.Remove(filepath.Join(dir, journalName(g))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove obsolete journal: %w", err)
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// removeTempFiles deletes the temp files of a write that never finished.
func removeTempFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list state directory: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove leftover temp file: %w", err)
		}
	}
	return nil
}

// stateFiles returns the paths of dir's snapshot (if it exists) and
// journals.
func stateFiles(dir string) ([]string, error) {
	var paths []string
	snapshot := filepath.Join(dir, CheckpointFile)
	if _, err := os.Lstat(snapshot); err == nil {
		paths = append(paths, snapshot)
	}
	gens, err := listJournals(dir)
	if err != nil {
		return nil, err
	}
	for _, g := range gens {
		paths = append(paths, filepath.Join(dir, journalName(g)))
	}
	return paths, nil
}
