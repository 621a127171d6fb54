package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

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
// continue it (see replay). It changes nothing in dir. It returns
// ErrNoCheckpoint when dir holds no saved state (no snapshot, and no
// journal record), a *corruption when a file cannot be trusted, and any
// other error when a file cannot be read.
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
	var journals []journalData
	for i, gen := range gens {
		if gen < ref.Generation {
			continue // its records are in the snapshot
		}
		path := filepath.Join(dir, journalName(gen))
		data, err := io.ReadAll(files[i])
		if err != nil {
			return nil, fmt.Errorf("read journal %s: %w", path, err)
		}
		journals = append(journals, journalData{path: path, gen: gen, data: data})
	}
	base := snapshotBase{state: New(cpuset.New())}
	if haveSnapshot {
		base = snapshotBase{state: s, ref: ref, path: snapshotPath}
	}
	s, lastSeq, err := replay(base, journals, online)
	if err != nil {
		return nil, err
	}
	return &dirState{state: s, lastGen: highestGen(gens), lastSeq: lastSeq}, nil
}

// snapshotBase is what the journals continue: a snapshot, or (path "")
// the empty state before record 1.
type snapshotBase struct {
	state *State
	ref   journalRefV1
	path  string
}

// journalData is the content of one journal file.
type journalData struct {
	path string
	gen  uint64
	data []byte
}

// replay applies to base.state, which it modifies, the records of the
// journals that continue it, given in generation order from the one base
// names, checking that the records follow each other without a gap; then
// it validates the result against online. It returns the state and the
// number of its last record, ErrNoCheckpoint when there is neither a
// snapshot nor a record, or a *corruption.
func replay(base snapshotBase, journals []journalData, online cpuset.CPUSet) (*State, uint64, error) {
	haveSnapshot := base.path != ""
	if base.ref.Generation > 0 && (len(journals) == 0 || journals[0].gen != base.ref.Generation) {
		return nil, 0, &corruption{base.path, fmt.Sprintf("it is continued by journal %s, which is missing",
			journalName(base.ref.Generation))}
	}
	s := base.state
	next := base.ref.Sequence + 1 // the number the next record must have
	lastPath := base.path
	for _, j := range journals {
		records, _, err := parseJournal(j.data, j.gen)
		if err != nil {
			return nil, 0, &corruption{j.path, err.Error()}
		}
		for _, r := range records {
			if r.seq != next {
				return nil, 0, &corruption{j.path, recordOrderReason(r, next, haveSnapshot)}
			}
			for _, o := range r.ops {
				o.apply(s)
			}
			next++
		}
		if len(records) > 0 {
			lastPath = j.path
		}
	}
	if !haveSnapshot && next == 1 {
		return nil, 0, ErrNoCheckpoint // only journals without a record: no Save ever returned
	}
	if err := s.Validate(online); err != nil {
		return nil, 0, &corruption{lastPath, fmt.Sprintf("replaying journal records %d to %d gives an inconsistent state: %v",
			base.ref.Sequence+1, next-1, err)}
	}
	return s, next - 1, nil
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

// highestGen returns the highest of the ascending generations gens, or 0.
func highestGen(gens []uint64) uint64 {
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
