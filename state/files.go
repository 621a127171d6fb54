package state

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

const (
	// journalPrefix starts the name of a journal an unreleased earlier
	// format kept next to the checkpoint file.
	journalPrefix = CheckpointFile + ".journal."
	// tempPrefix starts the name of a checkpoint being written.
	tempPrefix = CheckpointFile + ".tmp-"
	// SpareFile is the name of the checkpoint's spare: the file the next
	// Save rewrites in place and exchanges with the checkpoint file. At
	// rest it holds the state saved before the current one (or part of a
	// write that never finished); it is never read.
	SpareFile = CheckpointFile + ".spare"
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
func writeFileAtomic(fsys fileSystem, dir, path string, data []byte) (err error) {
	tmp, err := fsys.CreateTemp(dir, tempPrefix)
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				_ = tmp.Close()
			}
			_ = fsys.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write temp file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync temp file: %w", err)
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temp file: %w", err)
	}
	if err := fsys.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename temp file: %w", err)
	}
	return fsys.SyncDir(dir)
}

// writeSpareAndExchange makes data the content of path (in dir) with one
// data sync and one directory sync: it rewrites the spare file in place,
// fdatasyncs it, exchanges it with path in one atomic step and fsyncs the
// directory. A crash at any moment leaves path naming either the old or
// the new content, never a part of one: the spare is written only while
// no name of the durable directory but the spare's own points at it,
// which the caller guarantees (Store.spareIdle), and it is named path only
// once its content is durable. When the file system cannot exchange two
// names the error wraps errNoExchange and path is unchanged.
func writeSpareAndExchange(fsys fileSystem, dir, path, spare string, data []byte) error {
	f, err := fsys.OpenSpare(spare)
	if err != nil {
		return fmt.Errorf("open spare file: %w", err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("write spare file: %w", err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		_ = f.Close()
		return fmt.Errorf("truncate spare file: %w", err)
	}
	if err := f.Datasync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fdatasync spare file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close spare file: %w", err)
	}
	if err := fsys.Exchange(spare, path); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// isJournal reports whether name is a journal of an unreleased earlier
// format (one moved aside is not).
func isJournal(name string) bool {
	return strings.HasPrefix(name, journalPrefix) && !strings.Contains(name, corruptSuffix)
}

// removeTempFiles deletes the temp files of writes that never finished.
// It syncs the directory if it removed anything.
func removeTempFiles(fsys fileSystem, dir string) error {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list state directory: %w", err)
	}
	removed := false
	for _, name := range names {
		if !strings.HasPrefix(name, tempPrefix) {
			continue
		}
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove temp file: %w", err)
		}
		removed = true
	}
	if removed {
		return fsys.SyncDir(dir)
	}
	return nil
}

// stateFiles returns the paths of dir's checkpoint file (if it exists) and
// leftover journals.
func stateFiles(fsys fileSystem, dir string) ([]string, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list state directory: %w", err)
	}
	var paths []string
	for _, name := range names {
		if name == CheckpointFile || isJournal(name) {
			paths = append(paths, filepath.Join(dir, name))
		}
	}
	return paths, nil
}
