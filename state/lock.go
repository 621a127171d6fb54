package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// lockFile is the name of the file in the state directory whose flock
// marks the one process that owns the directory. It is never deleted:
// removing a lock file races with the next owner taking it.
const lockFile = CheckpointFile + ".lock"

// lockDir takes an exclusive flock on dir's lock file without waiting for
// it. The lock lasts until the returned file is closed or the process
// exits, however it exits.
//
// On a read-only file system the lock file cannot be opened for writing;
// an existing one is opened read-only, which flock accepts. If there is
// none and none can be created there, lockDir logs a warning and returns
// a nil file: the directory is used without a lock (nothing can be
// written there anyway until it is writable again, and then Save works
// without one).
func lockDir(dir string, log logrus.FieldLogger) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		var roErr error
		f, roErr = os.OpenFile(path, os.O_RDONLY, 0)
		switch {
		case roErr == nil:
		case errors.Is(err, unix.EROFS) && errors.Is(roErr, fs.ErrNotExist):
			log.WithError(err).WithField("lockFile", path).
				Warn("the state directory is on a read-only file system and has no lock file; using it without a lock")
			return nil, nil
		default:
			return nil, fmt.Errorf("open lock file: %w", err)
		}
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
