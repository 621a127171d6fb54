package state

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// fileSystem is what a Store does with the files of its directory. The
// operating system's (osFS) is the one NewStore uses; the tests put in
// their own to model a power loss and a full or read-only disk. Errors
// for a missing file wrap fs.ErrNotExist.
type fileSystem interface {
	// CreateTemp creates a new file of mode 0600 in dir whose name starts
	// with prefix.
	CreateTemp(dir, prefix string) (file, error)
	// ReadFile returns the content of the file at path.
	ReadFile(path string) ([]byte, error)
	// ReadDir returns the names of the regular files in dir.
	ReadDir(dir string) ([]string, error)
	// Rename renames oldpath to newpath, replacing newpath.
	Rename(oldpath, newpath string) error
	// Remove removes the file at path.
	Remove(path string) error
	// SyncDir makes the creations, renames and removals in dir durable.
	SyncDir(dir string) error
	// OpenSpare opens the file at path for writing in place, creating it
	// (mode 0600) if it does not exist.
	OpenSpare(path string) (spareFile, error)
	// Exchange swaps the names of two files of one directory in one
	// atomic step; an error wrapping errNoExchange says the file system
	// cannot.
	Exchange(path1, path2 string) error
}

// errNoExchange says that a file system cannot swap two names atomically
// (renameat2's RENAME_EXCHANGE: Linux 3.15 and later on ext4, XFS, Btrfs,
// tmpfs and most others).
var errNoExchange = errors.New("the file system cannot exchange two names atomically")

// spareFile is the spare checkpoint file, rewritten in place.
type spareFile interface {
	// WriteAt writes p at offset off.
	WriteAt(p []byte, off int64) (int, error)
	// Truncate sets the file's size.
	Truncate(size int64) error
	// Datasync makes the content and the size durable (fdatasync).
	Datasync() error
	Close() error
}

// file is a file being written.
type file interface {
	Name() string
	Write(p []byte) (int, error)
	// Sync makes what was written durable.
	Sync() error
	Close() error
}

// osFS is the operating system's file system.
type osFS struct{}

func (osFS) CreateTemp(dir, prefix string) (file, error) { return os.CreateTemp(dir, prefix+"*") }

func (osFS) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFS) Remove(path string) error { return os.Remove(path) }

func (osFS) OpenSpare(path string) (spareFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return osSpare{f}, nil
}

func (osFS) Exchange(path1, path2 string) error {
	err := unix.Renameat2(unix.AT_FDCWD, path1, unix.AT_FDCWD, path2, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("exchange %s and %s: %w (%w)", path1, path2, errNoExchange, err)
	}
	return &os.LinkError{Op: "exchange", Old: path1, New: path2, Err: err}
}

// osSpare is the spare file on the operating system's file system.
type osSpare struct{ *os.File }

func (f osSpare) Datasync() error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

func (osFS) SyncDir(dir string) error {
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
