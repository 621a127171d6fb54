package state

import (
	"fmt"
	"os"
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
