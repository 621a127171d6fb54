package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"
)

const (
	// tempPrefix starts the name of a checkpoint being written.
	tempPrefix = CheckpointFile + ".tmp-"
	// corruptPrefix starts the name of a checkpoint moved aside.
	corruptPrefix = CheckpointFile + ".corrupt-"
	// corruptTimeFormat is the UTC timestamp of a moved-aside checkpoint,
	// precise enough that two corruptions never share a name.
	corruptTimeFormat = "20060102T150405.000000000Z"
)

// Store reads and writes the checkpoint file of one state directory. It is
// safe for concurrent use; Load and Save are serialized.
type Store struct {
	dir string
	log logrus.FieldLogger
	now func() time.Time
	mu  sync.Mutex
}

// NewStore returns a store for <dir>/cpu_manager_state, creating dir (0700)
// if needed, and removes temp files a crashed Save left behind. It logs
// through logrus's standard logger; see SetLogger.
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	st := &Store{dir: dir, log: logrus.StandardLogger(), now: time.Now}
	if err := st.removeTempFiles(); err != nil {
		return nil, err
	}
	return st, nil
}

// SetLogger makes the store log through l (a corrupt checkpoint is logged
// at error level when it is moved aside); nil restores logrus's standard
// logger.
func (st *Store) SetLogger(l logrus.FieldLogger) {
	if l == nil {
		l = logrus.StandardLogger()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.log = l
}

// Path returns the checkpoint file's path.
func (st *Store) Path() string {
	return filepath.Join(st.dir, CheckpointFile)
}

// Load reads the checkpoint. online is the machine's CPUs: a cpuset outside
// it makes the file untrusted. It returns ErrNoCheckpoint when there is no
// file, and a *CorruptError (after moving the file aside and logging why)
// when the file cannot be trusted: an empty or truncated file, bad JSON, a
// checksum mismatch, an unknown policy name or format version, or values
// that fail Validate. Any other error (the file cannot be read) leaves the
// file where it is. Temp files of an interrupted Save are removed first.
func (st *Store) Load(online cpuset.CPUSet) (*State, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.removeTempFiles(); err != nil {
		return nil, err
	}
	path := st.Path()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load %s: %w", path, ErrNoCheckpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	s, err := Unmarshal(data, online)
	if err != nil {
		return nil, st.moveAside(err.Error())
	}
	return s, nil
}

// Save writes the state atomically: temp file in the same directory, fsync,
// rename over the checkpoint, fsync of the directory; mode 0600. When Save
// returns nil the state is durable. Save refuses an inconsistent state
// (see Marshal) and then leaves the previous checkpoint in place.
func (st *Store) Save(s *State) error {
	data, err := Marshal(s)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := writeFileAtomic(st.dir, st.Path(), data); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", st.Path(), err)
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

// syncDir makes a rename in dir durable.
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

// moveAside renames an untrusted checkpoint to
// cpu_manager_state.corrupt-<UTC timestamp>, logs why, and returns the
// *CorruptError that says so.
func (st *Store) moveAside(reason string) error {
	cerr := &CorruptError{Path: st.Path(), Reason: reason}
	target := filepath.Join(st.dir, corruptPrefix+st.now().UTC().Format(corruptTimeFormat))
	log := st.log.WithField("path", cerr.Path).WithField("reason", reason)
	if err := os.Rename(cerr.Path, target); err != nil {
		log.WithError(err).Error("checkpoint is not trusted and could not be moved aside; rebuilding state from the runtime")
		return cerr
	}
	if err := syncDir(st.dir); err != nil {
		log.WithError(err).Warn("moved an untrusted checkpoint aside but could not fsync the directory")
	}
	cerr.MovedTo = target
	log.WithField("movedTo", target).Error("checkpoint is not trusted; moved aside, rebuilding state from the runtime")
	return cerr
}

// removeTempFiles deletes the temp files of a Save that never finished.
func (st *Store) removeTempFiles() error {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		return fmt.Errorf("list state directory: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if err := os.Remove(filepath.Join(st.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove leftover temp file: %w", err)
		}
	}
	return nil
}
