package state

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"k8s.io/utils/cpuset"
)

// Load reads the saved state. online is the machine's CPUs: a cpuset
// outside it makes the state untrusted. Load writes nothing, with one
// exception: a state that cannot be trusted (state/README.md "Loading:
// what is never trusted") has its files moved aside, and Load returns a
// *CorruptError. It returns ErrNoCheckpoint when there is no saved state,
// a *NewerFormatError, moving nothing, for a file a newer nri-cpumanager
// wrote (the Store then refuses to Save over it), and a plain error,
// moving nothing, when a file cannot be read.
func (st *Store) Load(online cpuset.CPUSet) (*State, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, fmt.Errorf("load checkpoint: %w", errStoreClosed)
	}
	s, err := readStateDir(st.fs, st.dir, online)
	var c *corruption
	var newer *NewerFormatError
	var kubelet *KubeletCheckpointError
	switch {
	case errors.As(err, &newer):
		st.refuse = newer
		return nil, newer
	case errors.As(err, &kubelet):
		st.refuse = kubelet
		return nil, kubelet
	case errors.As(err, &c):
		return nil, st.moveAsideLocked(c)
	case errors.Is(err, ErrNoCheckpoint):
		return nil, fmt.Errorf("load %s: %w", st.Path(), ErrNoCheckpoint)
	case err != nil:
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	return s, nil
}

// moveAsideLocked renames the checkpoint file and the leftover journals of
// an untrusted state to <name>.corrupt-<UTC timestamp>, logs why, and returns
// the *CorruptError that says so. When a file cannot be moved, the next
// Save tries again before it writes. Called with mu held.
func (st *Store) moveAsideLocked(c *corruption) error {
	cerr := &CorruptError{Path: c.path, Reason: c.reason}
	st.aside = c
	log := st.log.WithField("path", cerr.Path).WithField("reason", cerr.Reason)
	files, err := stateFiles(st.fs, st.dir)
	if err != nil {
		log.WithError(err).Error("checkpoint is not trusted and could not be moved aside; rebuilding state from the runtime")
		return cerr
	}
	suffix := corruptSuffix + st.now().UTC().Format(corruptTimeFormat)
	var others []string
	failed := false
	for _, path := range files {
		target := path + suffix
		if err := st.fs.Rename(path, target); err != nil {
			log.WithError(err).WithField("file", path).Error("could not move an untrusted state file aside; the next Save tries again")
			failed = true
			continue
		}
		if path == c.path {
			cerr.MovedTo = target
		} else {
			others = append(others, target)
		}
	}
	if cerr.MovedTo != "" || len(others) > 0 {
		if err := st.fs.SyncDir(st.dir); err != nil {
			log.WithError(err).Warn("moved untrusted state files aside but could not fsync the directory")
		}
	}
	if !failed {
		st.aside = nil
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
// file and needs no lock. A state that cannot be trusted is reported as a
// *CorruptError whose MovedTo is empty, a file of a newer version as a
// *NewerFormatError. It returns ErrNoCheckpoint when dir holds no saved
// state.
//
// A running plugin may rewrite the very file Inspect is reading: the file
// it had just opened can become the spare of the next Save (Store.Save).
// What such a read gives fails its checksum, so a file that fails is read
// again, and reported untrusted only when the second read gives the same
// bytes (a file at rest); after maxInspectReads attempts that all
// differ, Inspect says the file kept changing.
func Inspect(dir string, online cpuset.CPUSet) (*State, error) {
	return inspect(osFS{}, dir, online)
}

// inspect is Inspect on fsys.
func inspect(fsys fileSystem, dir string, online cpuset.CPUSet) (*State, error) {
	path := filepath.Join(dir, CheckpointFile)
	rec := &recordingFS{fileSystem: fsys}
	for read := 1; ; read++ {
		s, err := readStateDir(rec, dir, online)
		var c *corruption
		var newer *NewerFormatError
		switch {
		case errors.As(err, &newer):
			return nil, newer
		case errors.As(err, &c) && c.path == path && read < maxInspectReads:
			failed := rec.last
			if again, rerr := fsys.ReadFile(path); rerr == nil && !bytes.Equal(again, failed) {
				continue // rewritten while it was read: read it whole again
			}
			return nil, &CorruptError{Path: c.path, Reason: c.reason}
		case errors.As(err, &c) && c.path == path:
			return nil, fmt.Errorf("inspect %s: the file kept changing while it was read (%d attempts; the last read: %s)", path, read, c.reason)
		case errors.As(err, &c):
			return nil, &CorruptError{Path: c.path, Reason: c.reason}
		case errors.Is(err, ErrNoCheckpoint):
			return nil, fmt.Errorf("inspect %s: %w", path, ErrNoCheckpoint)
		case err != nil:
			return nil, fmt.Errorf("inspect state directory %s: %w", dir, err)
		}
		return s, nil
	}
}

// maxInspectReads bounds the attempts to read whole a file that a running
// plugin keeps rewriting under Inspect (each Save takes a fraction of a millisecond, a
// read of the largest checkpoint less).
const maxInspectReads = 10

// recordingFS is a file system that remembers the content of the last
// file it read.
type recordingFS struct {
	fileSystem
	last []byte
}

func (f *recordingFS) ReadFile(path string) ([]byte, error) {
	data, err := f.fileSystem.ReadFile(path)
	f.last = data
	return data, err
}

// corruption says which file of a state directory is not trusted and why.
type corruption struct {
	path   string
	reason string
}

func (c *corruption) Error() string {
	return c.path + ": " + c.reason
}

// readStateDir reads the state saved in dir, changing nothing. It returns
// ErrNoCheckpoint when dir holds no saved state, a *NewerFormatError for a
// checkpoint file of a newer format, a *corruption when the state cannot
// be trusted, and any other error when a file cannot be read.
//
// A journal an unreleased earlier format kept next to the file makes the
// state untrusted, whatever the file holds; a newer file is refused first,
// so that nothing of it is moved aside.
func readStateDir(fsys fileSystem, dir string, online cpuset.CPUSet) (*State, error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoCheckpoint // no state directory
	}
	if err != nil {
		return nil, fmt.Errorf("list state directory: %w", err)
	}
	path := filepath.Join(dir, CheckpointFile)
	data, err := fsys.ReadFile(path)
	haveFile := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	var s *State
	if haveFile {
		var newer *NewerFormatError
		if s, err = Unmarshal(data, online); errors.As(err, &newer) {
			newer.Path = path
			return nil, newer
		}
		if policy, ok := kubeletCheckpointPolicy(data); err != nil && ok {
			return nil, &KubeletCheckpointError{Path: path, Policy: policy}
		}
	}
	for _, name := range names {
		if isJournal(name) {
			return nil, &corruption{filepath.Join(dir, name), "a journal of an earlier format that was never released; " +
				"this build keeps no journal and does not read one"}
		}
	}
	switch {
	case !haveFile:
		return nil, ErrNoCheckpoint
	case err != nil:
		return nil, &corruption{path, err.Error()}
	}
	return s, nil
}
