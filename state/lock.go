package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockFile is the name of the file in the state directory whose flock
// marks the one process that owns the directory. It is never deleted:
// removing a lock file races with the next owner taking it.
const lockFile = CheckpointFile + ".lock"

// lockDir takes an exclusive flock on dir's lock file without waiting for
// it. The lock lasts until the returned file is closed or the process
// exits, however it exits.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("state directory %s is locked by another process; another nri-cpumanager may be running (flock %s: %w)",
				dir, path, err)
		}
		return nil, fmt.Errorf("lock state directory %s: %w", dir, err)
	}
	return f, nil
}
