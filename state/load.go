package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/cpuset"
)

// Inspect retries a read that does not fit together this many times, this
// far apart: a running plugin may be appending or compacting meanwhile.
const (
	inspectAttempts   = 5
	inspectRetryDelay = 20 * time.Millisecond
)

// Load reads the saved state: the snapshot, then the journal records after
// it. online is the machine's CPUs: a cpuset outside it makes the state
// untrusted. It returns ErrNoCheckpoint when there is no saved state, and a
// *CorruptError, after moving every file of the state aside, when a file
// cannot be trusted (state/README.md "Loading: what is never trusted"); a
// torn last journal record (a crash inside a Save that never returned) is
// ignored. On success it starts a new journal generation and rewrites the
// snapshot.
func (st *Store) Load(online cpuset.CPUSet) (*State, error) {
	st.compactMu.Lock()
	defer st.compactMu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, fmt.Errorf("load checkpoint: %w", errStoreClosed)
	}
	if err := removeTempFiles(st.dir); err != nil {
		return nil, err
	}
	ds, err := readStateDir(st.dir, online)
	var c *corruption
	switch {
	case errors.As(err, &c):
		st.forgetLocked()
		return nil, st.moveAsideLocked(c)
	case errors.Is(err, ErrNoCheckpoint):
		st.forgetLocked()
		return nil, fmt.Errorf("load %s: %w", st.Path(), ErrNoCheckpoint)
	case err != nil:
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}

	gen := max(st.lastGen, ds.lastGen) + 1
	journal, err := createJournal(st.dir, gen, st.opts.prealloc)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	st.lastGen = gen
	st.setJournalLocked(journal)
	st.base, st.seq, st.broken, st.behind = ds.state, ds.lastSeq, false, true
	if err := writeSnapshot(st.dir, ds.state, journalRefV1{Generation: gen, Sequence: ds.lastSeq}); err != nil {
		st.log.WithError(err).Warn("could not rewrite the snapshot after loading it; the journal keeps the state, retrying later")
		signal(st.kick)
	} else if err := removeJournalsBefore(st.dir, gen); err != nil {
		st.log.WithError(err).Warn("could not delete obsolete journals; the next compaction will")
		signal(st.kick)
	} else {
		st.behind = false
	}
	return ds.state.Clone(), nil
}

// moveAsideLocked renames the snapshot and the journals of an untrusted
// state to <name>.corrupt-<UTC timestamp>, logs why, and returns the
// *CorruptError that says so. Called with mu held.
func (st *Store) moveAsideLocked(c *corruption) error {
	cerr := &CorruptError{Path: c.path, Reason: c.reason}
	log := st.log.WithField("path", cerr.Path).WithField("reason", cerr.Reason)
	files, err := stateFiles(st.dir)
	if err != nil {
		log.WithError(err).Error("checkpoint is not trusted and could not be moved aside; rebuilding state from the runtime")
		return cerr
	}
	suffix := corruptSuffix + st.now().UTC().Format(corruptTimeFormat)
	var others []string
	for _, path := range files {
		target := path + suffix
		if err := os.Rename(path, target); err != nil {
			log.WithError(err).WithField("file", path).Error("could not move an untrusted state file aside")
			continue
		}
		if path == c.path {
			cerr.MovedTo = target
		} else {
			others = append(others, target)
		}
	}
	if err := syncDir(st.dir); err != nil {
		log.WithError(err).Warn("moved untrusted state files aside but could not fsync the directory")
	}
	if cerr.MovedTo == "" {
		log.WithField("alsoMoved", others).Error("checkpoint is not trusted and could not be moved aside; rebuilding state from the runtime")
		return cerr
	}
	log.WithField("movedTo", cerr.MovedTo).WithField("alsoMoved", others).
		Error("checkpoint is not trusted; moved aside, rebuilding state from the runtime")
	return cerr
}

// Inspect reads the saved state of state directory dir as Load does, for
// a look at a running plugin's state: it never writes, moves or deletes a
// file and needs no lock. What a running plugin writes meanwhile can make
// a read not fit together (a record half written, a journal compacted
// away); Inspect then reads again, and reports a *CorruptError (MovedTo
// empty) only when the files keep failing. It returns ErrNoCheckpoint
// when dir holds no saved state.
func Inspect(dir string, online cpuset.CPUSet) (*State, error) {
	var err error
	for attempt := range inspectAttempts {
		if attempt > 0 {
			time.Sleep(inspectRetryDelay)
		}
		var ds *dirState
		if ds, err = readStateDir(dir, online); err == nil {
			return ds.state, nil
		}
		var c *corruption
		if !errors.As(err, &c) {
			break
		}
	}
	var c *corruption
	switch {
	case errors.As(err, &c):
		return nil, &CorruptError{Path: c.path, Reason: c.reason}
	case errors.Is(err, ErrNoCheckpoint):
		return nil, fmt.Errorf("inspect %s: %w", filepath.Join(dir, CheckpointFile), ErrNoCheckpoint)
	default:
		return nil, fmt.Errorf("inspect state directory %s: %w", dir, err)
	}
}
