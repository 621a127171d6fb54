package harness

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fileLock is an exclusive advisory lock (flock) on a file, held across
// processes so that concurrent test binaries install tools one at a time.
type fileLock struct {
	f *os.File
}

// lockFile blocks until it holds an exclusive lock on path, creating the file
// and its directory if needed.
func lockFile(path string) (*fileLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create lock directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

// Unlock releases the lock.
func (l *fileLock) Unlock() error {
	// Closing the only descriptor releases the flock.
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("unlock %s: %w", l.f.Name(), err)
	}
	return nil
}

// LockFile blocks until it holds an exclusive lock on path (created with
// its directory if needed), so that concurrent test binaries build shared
// caches one at a time; call the returned function to release it.
func LockFile(path string) (unlock func() error, err error) {
	l, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}
