package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"
)

// errStoreClosed is returned by a Store used after Close.
var errStoreClosed = errors.New("the state store is closed")

// storeOptions tune when a Store compacts its journal.
type storeOptions struct {
	// compactBytes is the journal size that starts a compaction at once.
	compactBytes int64
	// idleDelay is how long without a Save starts a compaction (checked
	// every idleDelay: up to twice that after the last Save).
	idleDelay time.Duration
	// maxDelay bounds how long Saves that keep coming less than idleDelay
	// apart postpone a compaction.
	maxDelay time.Duration
	// prealloc is how many bytes of zeros a new journal starts with.
	prealloc int64
}

// defaultStoreOptions suit the plugin: a journal of a few hundred records
// at most, a snapshot an operator sees a second or two after a change.
func defaultStoreOptions() storeOptions {
	return storeOptions{
		compactBytes: 128 << 10,
		idleDelay:    time.Second,
		maxDelay:     10 * time.Second,
		prealloc:     256 << 10,
	}
}

// Store keeps the state of one state directory on disk: a snapshot
// (cpu_manager_state, the checkpoint format) and a journal of the changes
// made since. Save appends one small record to the journal and syncs it; a
// goroutine the Store owns rewrites the snapshot off the request path and
// deletes the journal it replaces. README.md ("The state directory")
// describes the files and what survives a crash.
//
// A Store owns its directory: NewStore takes an exclusive lock that Close
// releases. It is safe for concurrent use.
type Store struct {
	dir  string
	opts storeOptions
	now  func() time.Time

	// compactMu serializes whatever replaces the snapshot or the journal:
	// compaction, Load, Close, and a Save that must start over. It is
	// taken before mu.
	compactMu sync.Mutex

	// mu guards the fields below. Save holds it while its record is
	// written and synced.
	mu  sync.Mutex
	log logrus.FieldLogger
	// lock holds the directory's flock.
	lock   *os.File
	closed bool
	// journal receives the records; nil until there is a base.
	journal *journalWriter
	// base is the state last saved or loaded, which the next Save's record
	// is a diff from; nil when unknown. Never modified.
	base *State
	// seq is the number of the journal record that made base.
	seq uint64
	// lastGen is the highest journal generation made or found so far.
	lastGen uint64
	// broken says a journal write failed: the journal may end in part of
	// a record, so the next Save starts over instead of appending.
	broken bool
	// behind says the snapshot does not hold base, or obsolete journals
	// remain: a compaction has work to do.
	behind bool
	// claims are those of the state claimsFor, when known: a Save whose
	// base is that state checks only what it changes.
	claims    claims
	claimsFor *State
	// buf is the record buffer, reused from Save to Save.
	buf []byte

	// kick tells the compactor a Save happened; full that the journal
	// passed compactBytes. Both hold at most one pending signal.
	kick, full chan struct{}
	// stop is closed by Close; stopped when the compactor has returned.
	stop, stopped chan struct{}
	stopOnce      sync.Once
}

// NewStore returns the store of state directory dir, creating dir (0700)
// if needed. It takes an exclusive flock on dir's lock file and fails if
// another process holds it, removes temp files an interrupted write left
// behind, and starts the goroutine that compacts the journal; Close stops
// it and releases the lock. It logs through logrus's standard logger; see
// SetLogger.
func NewStore(dir string) (*Store, error) {
	return newStore(dir, defaultStoreOptions())
}

// newStore is NewStore with chosen compaction options.
func newStore(dir string, opts storeOptions) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	gens, err := listJournals(dir)
	if err == nil {
		err = removeTempFiles(dir)
	}
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	st := &Store{
		dir:     dir,
		opts:    opts,
		now:     time.Now,
		log:     logrus.StandardLogger(),
		lock:    lock,
		lastGen: highestGen(gens),
		kick:    make(chan struct{}, 1),
		full:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go st.runCompactor()
	return st, nil
}

// SetLogger makes the store log through l (a corrupt checkpoint is logged
// at error level when it is moved aside, a failed compaction too); nil
// restores logrus's standard logger.
func (st *Store) SetLogger(l logrus.FieldLogger) {
	if l == nil {
		l = logrus.StandardLogger()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.log = l
}

// logger returns the current logger.
func (st *Store) logger() logrus.FieldLogger {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.log
}

// Path returns the snapshot's path, <dir>/cpu_manager_state.
func (st *Store) Path() string {
	return filepath.Join(st.dir, CheckpointFile)
}

// Save makes s the saved state: when it returns nil, s is on disk. It
// appends to the journal one record of the changes from the previous
// saved (or loaded) state and syncs it; the snapshot is rewritten later,
// in the background. Save refuses an inconsistent state (see Marshal) and
// then changes nothing.
//
// The Store keeps s to compute the next Save's changes, so s must not be
// modified after Save is called with it: save a new State (a Clone) for
// every change. Saving the state of the previous Save again makes Save
// rewrite the whole snapshot, as it cannot tell what changed. So does the
// first Save of a Store that has not loaded a state, unless the directory
// holds none, and the first Save after a failed one.
func (st *Store) Save(s *State) error {
	if s == nil {
		return errors.New("save checkpoint: nil state")
	}
	st.mu.Lock()
	if st.canAppend(s) {
		defer st.mu.Unlock()
		ops := diff(st.base, s)
		claims, err := st.checkLocked(s, ops)
		if err != nil {
			return err
		}
		if err := st.appendLocked(s, ops); err != nil {
			return err
		}
		st.claims, st.claimsFor = claims, s
		return nil
	}
	st.mu.Unlock()
	if err := s.validateForSave(); err != nil {
		return refusedInconsistent(err)
	}
	return st.startOver(s)
}

// refusedInconsistent is Save's error for a state that fails validation.
func refusedInconsistent(err error) error {
	return &InconsistentError{Err: err}
}

// InconsistentError is Save's error for a state that fails validation:
// nothing was written, and saving that state again fails again (unlike a
// failed write, which a later Save may get past).
type InconsistentError struct {
	// Err says what is inconsistent.
	Err error
}

func (e *InconsistentError) Error() string {
	return "save checkpoint: refusing to write an inconsistent state: " + e.Err.Error()
}

func (e *InconsistentError) Unwrap() error { return e.Err }

// checkLocked checks that s is consistent, the way validateForSave does,
// and returns its claims. When the claims of base are known it checks only
// what ops change (base is consistent: it was saved or loaded). Called with
// mu held.
func (st *Store) checkLocked(s *State, ops []op) (claims, error) {
	if st.claimsFor == st.base && st.claims != nil {
		if next, ok := st.claims.after(st.base, s, ops); ok {
			return next, nil
		}
	}
	if c, ok := claimsOf(s); ok {
		return c, nil
	}
	// The quick pass found a problem, or could not tell: validate names
	// the problem, if there is one.
	if err := s.validate(nil); err != nil {
		return nil, refusedInconsistent(err)
	}
	return nil, nil
}

// canAppend reports whether s can be saved as a journal record of its
// changes from base. Called with mu held.
func (st *Store) canAppend(s *State) bool {
	return !st.closed && st.journal != nil && st.base != nil && st.base != s && !st.broken
}

// appendLocked writes the record that turns base into s and makes s the
// base. No ops means nothing changed and nothing is written. Called with
// mu held.
func (st *Store) appendLocked(s *State, ops []op) error {
	if len(ops) > 0 {
		if err := st.writeRecordLocked(ops); err != nil {
			return err
		}
	}
	st.base = s
	return nil
}

// writeRecordLocked writes and syncs the next record. Called with mu held.
func (st *Store) writeRecordLocked(ops []op) error {
	st.buf = appendRecord(st.buf[:0], st.seq+1, ops)
	if err := st.journal.append(st.buf); err != nil {
		st.broken = true
		return fmt.Errorf("save checkpoint: %w", err)
	}
	st.seq++
	st.behind = true
	if st.journal.end >= st.opts.compactBytes {
		signal(st.full)
	} else {
		signal(st.kick)
	}
	return nil
}

// startOver saves s when no journal can take a record of its changes:
// nothing was loaded or saved yet, a journal write failed, or s is the
// state of the previous Save. When the directory holds no state at all, s
// becomes record 1 of a new journal, the changes from an empty state (the
// snapshot is written later, as after any Save). Otherwise s is written as
// a new snapshot with a new journal to continue it, and the older journals
// are deleted.
func (st *Store) startOver(s *State) error {
	st.compactMu.Lock()
	defer st.compactMu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return fmt.Errorf("save checkpoint: %w", errStoreClosed)
	}
	if st.canAppend(s) { // another Save started over meanwhile
		return st.appendLocked(s, diff(st.base, s))
	}
	files, err := stateFiles(st.dir)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	gen := st.lastGen + 1
	journal, err := createJournal(st.dir, gen, st.opts.prealloc)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	st.lastGen = gen
	if len(files) == 0 {
		st.setJournalLocked(journal)
		st.base, st.seq, st.broken = New(cpuset.New()), 0, false
		// Written even without ops: record 1 is what says a state exists.
		if err := st.writeRecordLocked(diff(st.base, s)); err != nil {
			return err
		}
		st.base = s
		return nil
	}
	if err := writeSnapshot(st.dir, s, journalRefV1{Generation: gen, Sequence: st.seq}); err != nil {
		_ = journal.close()
		st.broken = true // the next Save starts over again
		return fmt.Errorf("save checkpoint: %w", err)
	}
	st.setJournalLocked(journal)
	st.base, st.broken, st.behind = s, false, false
	if err := removeJournalsBefore(st.dir, gen); err != nil {
		st.log.WithError(err).Warn("could not delete obsolete journals; the next compaction will")
		st.behind = true
	}
	return nil
}

// setJournalLocked makes j the journal records go to, closing the
// previous one. Called with mu held.
func (st *Store) setJournalLocked(j *journalWriter) {
	if st.journal != nil {
		_ = st.journal.close()
	}
	st.journal = j
}

// forgetLocked drops the base: the next Save starts over. Called with mu
// held.
func (st *Store) forgetLocked() {
	st.setJournalLocked(nil)
	st.base, st.seq, st.broken, st.behind = nil, 0, false, false
}

// Close writes the saved state to the snapshot if the snapshot is behind,
// stops the compaction goroutine, closes the journal and releases the
// state directory's lock. The plugin calls it on shutdown; a crash instead
// loses nothing, as the journal holds every Save. The Store cannot be used
// afterwards. Close returns an error if the final snapshot could not be
// written, and nil when called again.
func (st *Store) Close() error {
	st.stopOnce.Do(func() { close(st.stop) })
	<-st.stopped
	err := st.compact(0)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	st.closed = true
	st.forgetLocked()
	if lockErr := st.lock.Close(); lockErr != nil && err == nil {
		err = fmt.Errorf("release state directory lock: %w", lockErr)
	}
	return err
}

// signal sends on a channel of capacity 1 unless a signal is pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
