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
)

// errStoreClosed is returned by a Store used after Close.
var errStoreClosed = errors.New("the state store is closed")

// Store keeps the state of one state directory on disk, in one checkpoint
// file (cpu_manager_state) that Save rewrites whole, and its spare.
// README.md ("The state directory") describes the files and what survives
// a crash.
//
// A Store owns its directory: NewStore takes an exclusive lock that Close
// releases. It is safe for concurrent use.
type Store struct {
	dir string
	fs  fileSystem
	now func() time.Time

	// mu serializes Load, Save and Close, and guards the fields below.
	mu  sync.Mutex
	log logrus.FieldLogger
	// lock holds the directory's flock; nil on a read-only file system
	// without a lock file.
	lock   *os.File
	closed bool
	// tidy says that no temp file of an unfinished write is left in the
	// directory; until then each Save looks for them.
	tidy bool
	// enc encodes the state; its buffers are reused by the next Save.
	enc encoder
	// spareIdle says that the spare file, if any, is named by nothing but
	// its own name in the durable directory, so the next Save may rewrite
	// it in place: the last Save succeeded, including its directory sync.
	// It is false until a Save of this Store succeeds (a process killed
	// before its directory sync leaves the names of the running system
	// ahead of the disk's) and after a Save that failed.
	spareIdle bool
	// noExchange says that the file system cannot exchange two names:
	// every Save writes a new temp file.
	noExchange bool
	// refuse, when set, is why Save must not write: Load found a file of
	// a newer version, which a Save would replace.
	refuse error
	// aside is an untrusted state Load could not move aside (a read-only
	// disk): Save moves it aside before it writes over it.
	aside *corruption
}

// Option configures NewStore.
type Option func(*Store)

// WithLogger makes the store log through l from the start (NewStore's own
// messages included); the default is logrus's standard logger.
func WithLogger(l logrus.FieldLogger) Option {
	return func(st *Store) {
		if l != nil {
			st.log = l
		}
	}
}

// NewStore returns the store of state directory dir, creating dir if
// needed, and gives dir mode 0700 whatever created it, unless dir holds
// files that are not the store's (a shared host directory named by
// mistake, such as /var/lib: it is left as it is, with a warning). It takes an
// exclusive flock on dir's lock file and fails if another process holds
// it; Close releases it. On a read-only file system it starts all the same
// (Load works, Save fails until the directory is writable), without the
// lock if there is no lock file yet. It writes nothing else.
func NewStore(dir string, opts ...Option) (*Store, error) {
	st := newStore(dir, osFS{})
	for _, opt := range opts {
		opt(st)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	if err := st.makePrivate(); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir, st.log)
	if err != nil {
		return nil, err
	}
	st.lock = lock
	return st, nil
}

// makePrivate gives the state directory mode 0700 if it has another (a
// kubelet hostPath directory is created 0755), and says so. A directory
// whose mode cannot be changed, or that holds files other than the
// store's (a shared directory: another program's files would become
// unreachable to it), is used as it is, with a warning.
func (st *Store) makePrivate() error {
	info, err := os.Stat(st.dir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("state directory %s is not a directory", st.dir)
	}
	mode := info.Mode().Perm()
	if mode == 0o700 {
		return nil
	}
	log := st.log.WithField("stateDir", st.dir).WithField("mode", fmt.Sprintf("%04o", mode))
	if foreign := foreignEntries(st.dir); len(foreign) > 0 {
		log.WithField("foreign", foreign).Warn("the state directory holds files that are not the plugin's: leaving its mode as it is; give the plugin a directory of its own")
		return nil
	}
	if err := os.Chmod(st.dir, 0o700); err != nil {
		log.WithError(err).Warn("could not make the state directory private (mode 0700); using it as it is")
		return nil
	}
	log.Info("made the state directory private: mode 0700")
	return nil
}

// maxForeignNamed bounds the foreign entries foreignEntries names.
const maxForeignNamed = 5

// foreignEntries returns up to maxForeignNamed names of dir's entries that
// are not the store's: its checkpoint and the files it derives from that
// name (lock, temp, journal, moved-aside copies), or lost+found (the root
// of a file system mounted for the state).
func foreignEntries(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var foreign []string
	for _, e := range entries {
		if name := e.Name(); !strings.HasPrefix(name, CheckpointFile) && name != "lost+found" {
			foreign = append(foreign, name)
			if len(foreign) == maxForeignNamed {
				break
			}
		}
	}
	return foreign
}

// newStore returns the store of state directory dir on fsys, without a
// lock.
func newStore(dir string, fsys fileSystem) *Store {
	return &Store{dir: dir, fs: fsys, now: time.Now, log: logrus.StandardLogger(), enc: newCachingEncoder()}
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

// Path returns the checkpoint file's path, <dir>/cpu_manager_state.
func (st *Store) Path() string {
	return filepath.Join(st.dir, CheckpointFile)
}

// Save makes s the saved state: when Save returns nil, s is on disk;
// when it fails, the previous file is left in place, and a later Save can
// succeed. Save refuses an inconsistent state (see Marshal) with an
// *InconsistentError and then writes nothing. It keeps nothing of s.
//
// The file is always rewritten whole. The first Save of a Store, and the
// one after a Save that failed, writes a new temp file, fsyncs it,
// renames it over the checkpoint file and fsyncs the directory. The
// others rewrite the spare file in place, fdatasync it, exchange it with
// the checkpoint file and fsync the directory: no new inode and no new
// blocks to commit, about half the time (README.md, "Saving"). A file
// system that cannot exchange names gets the first way every time.
//
// The first Save that succeeds also deletes the temp files of writes that
// never finished, if any.
func (st *Store) Save(s *State) error {
	if s == nil {
		return errors.New("save checkpoint: nil state")
	}
	if err := s.validate(nil); err != nil {
		return &InconsistentError{Err: err}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return fmt.Errorf("save checkpoint: %w", errStoreClosed)
	}
	if st.refuse != nil {
		return fmt.Errorf("save checkpoint: %w", st.refuse)
	}
	if st.aside != nil {
		_ = st.moveAsideLocked(st.aside)
	}
	data := sealCanonical(st.enc.canonical(s))
	if err := st.writeLocked(data); err != nil {
		st.spareIdle = false
		return fmt.Errorf("save checkpoint %s: %w", st.Path(), err)
	}
	st.spareIdle = true
	if !st.tidy {
		if err := removeTempFiles(st.fs, st.dir); err != nil {
			st.log.WithError(err).Warn("could not delete leftover temp files of the state directory; the next Save will try again")
		} else {
			st.tidy = true
		}
	}
	return nil
}

// writeLocked makes data the checkpoint file's content, durably: through
// the spare file when it is idle and the file system can exchange names,
// through a new temp file otherwise. Called with mu held.
func (st *Store) writeLocked(data []byte) error {
	if st.spareIdle && !st.noExchange {
		err := writeSpareAndExchange(st.fs, st.dir, st.Path(), filepath.Join(st.dir, SpareFile), data)
		switch {
		case errors.Is(err, errNoExchange):
			st.noExchange = true
			st.log.WithError(err).Warn("the state directory's file system cannot exchange two names: every checkpoint write creates a new file (about twice as slow)")
		case errors.Is(err, fs.ErrNotExist):
			// The checkpoint file was removed behind the store's back:
			// there is nothing to exchange with, a new file takes its place.
			st.log.WithError(err).Warn("the checkpoint file disappeared from the state directory; writing it anew")
		default:
			return err
		}
	}
	return writeFileAtomic(st.fs, st.dir, st.Path(), data)
}

// Close releases the state directory's lock. Every Save is on disk
// already; the Store cannot be used afterwards. Close returns nil when
// called again.
func (st *Store) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	st.closed = true
	if st.lock == nil {
		return nil
	}
	if err := st.lock.Close(); err != nil {
		return fmt.Errorf("release state directory lock: %w", err)
	}
	return nil
}
