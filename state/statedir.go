package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/utils/cpuset"
)

// dirState is the state read from a state directory.
type dirState struct {
	state *State
	// lastGen is the highest journal generation in the directory.
	lastGen uint64
	// lastSeq is the number of the last record the state holds.
	lastSeq uint64
}

// corruption says which file of a state directory is not trusted and why.
type corruption struct {
	path   string
	reason string
}

func (c *corruption) Error() string {
	return c.path + ": " + c.reason
}

// readStateDir reads the snapshot of dir and replays the journals that
// continue it, checking that their records follow each other without a
// gap, then validates the result against online. It changes nothing in
// dir. It returns ErrNoCheckpoint when dir holds no saved state (no
// snapshot, and no journal record), a *corruption when a file cannot be
// trusted, and any other error when a file cannot be read.
func readStateDir(dir string, online cpuset.CPUSet) (*dirState, error) {
	gens, err := listJournals(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoCheckpoint // no state directory
	}
	if err != nil {
		return nil, err
	}
	// The journals are opened before the snapshot is read. A running
	// store's compaction deletes journals only after it has renamed a newer
	// snapshot into place, so every journal the snapshot read here needs
	// is either open already or newer than the listing.
	files := make([]*os.File, 0, len(gens))
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	for _, gen := range gens {
		path := filepath.Join(dir, journalName(gen))
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &corruption{path, "the journal disappeared while the state directory was read"}
		}
		if err != nil {
			return nil, fmt.Errorf("open journal: %w", err)
		}
		files = append(files, f)
	}

	snapshotPath := filepath.Join(dir, CheckpointFile)
	s, ref, haveSnapshot, err := readSnapshot(snapshotPath, online)
	if err != nil {
		return nil, err
	}
	if !haveSnapshot && len(gens) == 0 {
		return nil, ErrNoCheckpoint
	}
	if !haveSnapshot {
		s = New(cpuset.New())
	}
	if ref.Generation > 0 && !slices.Contains(gens, ref.Generation) {
		return nil, &corruption{snapshotPath, fmt.Sprintf("it is continued by journal %s, which is missing",
			journalName(ref.Generation))}
	}

	next := ref.Sequence + 1 // the number the next record must have
	lastPath := snapshotPath
	for i, gen := range gens {
		if gen < ref.Generation {
			continue // its records are in the snapshot
		}
		path := filepath.Join(dir, journalName(gen))
		data, err := io.ReadAll(files[i])
		if err != nil {
			return nil, fmt.Errorf("read journal %s: %w", path, err)
		}
		records, _, err := parseJournal(data, gen)
		if err != nil {
			return nil, &corruption{path, err.Error()}
		}
		for _, r := range records {
			if r.seq != next {
				return nil, &corruption{path, recordOrderReason(r, next, haveSnapshot)}
			}
			for _, o := range r.ops {
				o.apply(s)
			}
			next++
		}
		if len(records) > 0 {
			lastPath = path
		}
	}
	if !haveSnapshot && next == 1 {
		return nil, ErrNoCheckpoint // only journals without a record: no Save ever returned
	}
	if err := s.Validate(online); err != nil {
		return nil, &corruption{lastPath, fmt.Sprintf("replaying journal records %d to %d gives an inconsistent state: %v",
			ref.Sequence+1, next-1, err)}
	}
	return &dirState{state: s, lastGen: lastGen(gens), lastSeq: next - 1}, nil
}

// recordOrderReason explains a record whose number is not the expected one.
func recordOrderReason(r journalRecord, want uint64, haveSnapshot bool) string {
	switch {
	case want > 1 || haveSnapshot:
		return fmt.Sprintf("record at offset %d is number %d where number %d belongs: records are missing or repeated",
			r.offset, r.seq, want)
	default:
		return fmt.Sprintf("there is no snapshot and the first record (at offset %d) is number %d, not 1: "+
			"the snapshot or the records before it are missing", r.offset, r.seq)
	}
}

// lastGen returns the highest of the ascending generations gens, or 0.
func lastGen(gens []uint64) uint64 {
	if len(gens) == 0 {
		return 0
	}
	return gens[len(gens)-1]
}

// readSnapshot reads and verifies the snapshot at path. A missing file is
// not an error (haveSnapshot is false); a file that does not verify is a
// *corruption.
func readSnapshot(path string, online cpuset.CPUSet) (s *State, ref journalRefV1, haveSnapshot bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, journalRefV1{}, false, nil
	}
	if err != nil {
		return nil, journalRefV1{}, false, fmt.Errorf("read checkpoint: %w", err)
	}
	s, ref, err = unmarshalSnapshot(data, online)
	if err != nil {
		return nil, journalRefV1{}, false, &corruption{path, err.Error()}
	}
	return s, ref, true, nil
}
