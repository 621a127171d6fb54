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
	// tempPrefix starts the name of a checkpoint being written.
	tempPrefix = CheckpointFile + ".tmp-"
	// corruptSuffix, followed by a UTC timestamp, ends the name of a file
	// moved aside because it is not trusted.
	corruptSuffix = ".corrupt-"
	// corruptTimeFormat is the UTC timestamp of a moved-aside file,
	// precise enough that two corruptions never share a name.
	corruptTimeFormat = "20060102T150405.000000000Z"
)

// writeFileAtomic replaces path (in dir) with data so that a crash at any
// moment leaves either the old or the new content, and the new content is
// durable when it returns nil: temp file, write, fsync, rename, fsync of
// the directory. On error the temp file is removed if it can be.
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
		return fmt.Errorf("write temp file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync temp file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temp file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename temp file: %w", err)
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

// removeObsolete deletes what a whole checkpoint file makes obsolete: the
// journals of earlier versions and the temp files of writes that never
// finished. It syncs the directory if it removed anything.
func removeObsolete(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list state directory: %w", err)
	}
	removed := false
	for _, e := range entries {
		_, journal := parseJournalName(e.Name())
		if !e.Type().IsRegular() || !journal && !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove obsolete file: %w", err)
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// stateFiles returns the paths of dir's checkpoint file (if it exists) and
// journals.
func stateFiles(dir string) ([]string, error) {
	var paths []string
	path := filepath.Join(dir, CheckpointFile)
	if _, err := os.Lstat(path); err == nil {
		paths = append(paths, path)
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
