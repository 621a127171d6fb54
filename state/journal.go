package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// Earlier versions of this package appended one record per Save to a
// journal next to the checkpoint file, which then named the journal that
// continued it. Load reads such a directory once (README.md, "Journals of
// earlier versions"); the next Save writes the whole file and deletes the
// journals. Nothing here writes a journal.
//
//	file:   cpu_manager_state.journal.<generation, 20 digits>
//	header: "NRICPUJ1", generation (uint64 LE), CRC-32C of those 16 bytes
//	        (uint32 LE), 4 zero bytes
//	frame:  payload length (uint32 LE), CRC-32C of the length's 4 bytes and
//	        the payload (uint32 LE), payload, zero bytes up to a multiple of 8
//
// A payload is the record's sequence number (uvarint) and operations, each
// a kind byte and its fields: strings as a uvarint length and the bytes,
// CPU sets as CPU lists in strings, resource values as uvarints or zig-zag
// varints.
const (
	journalPrefix     = CheckpointFile + ".journal."
	journalGenDigits  = 20
	journalMagic      = "NRICPUJ1"
	journalHeaderSize = 24
	frameHeaderSize   = 8
	frameAlign        = 8
	// maxPayload bounds a record; a longer length field is damage.
	maxPayload = 64 << 20
)

// journalName returns the file name of journal generation gen.
func journalName(gen uint64) string {
	return fmt.Sprintf("%s%0*d", journalPrefix, journalGenDigits, gen)
}

// parseJournalName returns the generation of a journal file name.
func parseJournalName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, journalPrefix)
	if !ok || len(digits) != journalGenDigits || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	gen, err := strconv.ParseUint(digits, 10, 64)
	return gen, err == nil && gen > 0
}

// journalGens returns the generations of the journals among the file
// names of a directory, ascending.
func journalGens(names []string) []uint64 {
	var gens []uint64
	for _, name := range names {
		if gen, ok := parseJournalName(name); ok {
			gens = append(gens, gen)
		}
	}
	slices.Sort(gens)
	return gens
}

// newerJournal returns the *NewerFormatError of a journal whose header
// says it was written in a newer journal format ("NRICPUJ" and a version
// above 1), or nil.
func newerJournal(path string, data []byte) error {
	if len(data) >= len(journalMagic) && string(data[:len(journalMagic)-1]) == journalMagic[:len(journalMagic)-1] &&
		data[len(journalMagic)-1] > journalMagic[len(journalMagic)-1] && data[len(journalMagic)-1] <= '9' {
		return &NewerFormatError{Path: path, Version: int(data[len(journalMagic)-1] - '0'), Newest: 1}
	}
	return nil
}

// checkJournalHeader verifies a journal's header and that it belongs to
// generation gen (the one its file name says).
func checkJournalHeader(data []byte, gen uint64) error {
	if len(data) < journalHeaderSize {
		return fmt.Errorf("bad journal header: the file has %d bytes, a header has %d", len(data), journalHeaderSize)
	}
	if string(data[:8]) != journalMagic {
		return fmt.Errorf("bad journal header: magic %q, want %q", data[:8], journalMagic)
	}
	if sum, want := binary.LittleEndian.Uint32(data[16:]), crc32c(data[:16]); sum != want {
		return fmt.Errorf("bad journal header: checksum %d, its content hashes to %d", sum, want)
	}
	if g := binary.LittleEndian.Uint64(data[8:]); g != gen {
		return fmt.Errorf("bad journal header: it says generation %d, the file name says %d", g, gen)
	}
	return nil
}

// frameAt returns the payload of the frame at offset off of data and the
// offset of the next frame, or ok false when no whole frame with a
// matching checksum starts there.
func frameAt(data []byte, off int) (payload []byte, next int, ok bool) {
	if len(data)-off < frameHeaderSize {
		return nil, 0, false
	}
	n := binary.LittleEndian.Uint32(data[off:])
	if n > maxPayload || int(n) > len(data)-off-frameHeaderSize {
		return nil, 0, false
	}
	payload = data[off+frameHeaderSize : off+frameHeaderSize+int(n)]
	if binary.LittleEndian.Uint32(data[off+4:]) != crc32cUpdate(crc32c(data[off:off+4]), payload) {
		return nil, 0, false
	}
	next = off + frameHeaderSize + int(n)
	next += (frameAlign - next%frameAlign) % frameAlign
	return payload, min(next, len(data)), true
}

// journalRecord is one record read from a journal.
type journalRecord struct {
	offset int
	seq    uint64
	ops    []op
}

// parseJournal reads the records of a journal file of generation gen.
//
// The records end at the first frame that does not verify. Only the write
// of the last record can have been cut short by a crash, and nothing was
// ever written after it, so that frame is a torn tail (or the zeros after
// the last record) when no valid frame follows it anywhere in the file. A
// valid frame after it means a record in the middle of the journal is
// damaged, and parseJournal fails.
func parseJournal(data []byte, gen uint64) ([]journalRecord, error) {
	if err := checkJournalHeader(data, gen); err != nil {
		return nil, err
	}
	var records []journalRecord
	off := journalHeaderSize
	for {
		payload, next, ok := frameAt(data, off)
		if !ok {
			break
		}
		seq, ops, err := decodePayload(payload)
		if err != nil {
			return nil, fmt.Errorf("record at offset %d does not decode: %w", off, err)
		}
		records = append(records, journalRecord{offset: off, seq: seq, ops: ops})
		off = next
	}
	for valid := off + frameAlign; len(data)-valid >= frameHeaderSize; valid += frameAlign {
		if binary.LittleEndian.Uint64(data[valid:]) == 0 {
			continue // zeros: no frame, and cheap to skip
		}
		if _, _, ok := frameAt(data, valid); ok {
			return nil, fmt.Errorf("the frame at offset %d does not verify, yet a valid record follows at offset %d: "+
				"a record in the middle of the journal is damaged", off, valid)
		}
	}
	return records, nil
}

// opKind is the kind of one journal operation, as written.
type opKind byte

const (
	opSetDefault opKind = 1 + iota
	opSetAssignment
	opDeleteAssignment
	opSetContainer
	opDeleteContainer
	opSetPod
	opDeletePod
)

// op is one absolute change to a State: it names one key and gives its new
// value, or says the key is gone, and touches no other key.
type op struct {
	kind opKind
	// key is the pod UID (assignment and pod ops) or the runtime container
	// id (container ops).
	key string
	// name is the container name (assignment ops).
	name       string
	cpus       cpuset.CPUSet
	assignment Assignment
	ref        ContainerRef
	pod        PodRecord
}

// apply performs o on s. Unlike State.DeleteAssignment, deleting an
// assignment does not delete the container ids that point at it: a record
// lists those deletions itself.
func (o op) apply(s *State) {
	switch o.kind {
	case opSetDefault:
		s.defaultCPUSet = o.cpus
	case opSetAssignment:
		s.SetAssignment(o.key, o.name, o.assignment)
	case opDeleteAssignment:
		s.deleteEntry(o.key, o.name)
	case opSetContainer:
		s.SetContainer(o.key, o.ref)
	case opDeleteContainer:
		s.DeleteContainer(o.key)
	case opSetPod:
		s.SetPodResources(o.key, o.pod)
	case opDeletePod:
		s.DeletePodResources(o.key)
	}
}

// decodePayload decodes a record's payload. It never panics and its cost
// is bounded by the payload's length.
func decodePayload(payload []byte) (seq uint64, ops []op, err error) {
	r := payloadReader{data: payload}
	seq = r.uvarint()
	for r.err == nil && len(r.data) > 0 {
		o := op{kind: opKind(r.data[0])}
		r.data = r.data[1:]
		switch o.kind {
		case opSetDefault:
			o.cpus = r.cpus("defaultCpuSet")
		case opSetAssignment:
			o.key, o.name = r.string(), r.string()
			o.assignment.Baseline = r.cpus("original")
			o.assignment.Resized = r.cpus("resized")
		case opDeleteAssignment:
			o.key, o.name = r.string(), r.string()
		case opSetContainer:
			o.key = r.string()
			o.ref.PodUID, o.ref.Name = r.string(), r.string()
		case opDeleteContainer, opDeletePod:
			o.key = r.string()
		case opSetPod:
			o.key = r.string()
			o.pod.Resources, o.pod.Overhead = r.resources(), r.resources()
		default:
			return 0, nil, fmt.Errorf("operation %d: unknown kind %d", len(ops)+1, o.kind)
		}
		if r.err != nil {
			return 0, nil, fmt.Errorf("operation %d: %w", len(ops)+1, r.err)
		}
		ops = append(ops, o)
	}
	if r.err != nil {
		return 0, nil, fmt.Errorf("sequence number: %w", r.err)
	}
	return seq, ops, nil
}

// errPayloadTruncated says a field runs past the end of the payload.
var errPayloadTruncated = errors.New("truncated")

// payloadReader reads the fields of a payload; the first error sticks and
// every later read returns a zero value.
type payloadReader struct {
	data []byte
	err  error
}

func (r *payloadReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.data)
	if n <= 0 {
		r.err = errPayloadTruncated
		return 0
	}
	r.data = r.data[n:]
	return v
}

func (r *payloadReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.data)
	if n <= 0 {
		r.err = errPayloadTruncated
		return 0
	}
	r.data = r.data[n:]
	return v
}

func (r *payloadReader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.data)) {
		r.err = errPayloadTruncated
		return ""
	}
	s := string(r.data[:n])
	r.data = r.data[n:]
	return s
}

func (r *payloadReader) cpus(what string) cpuset.CPUSet {
	text := r.string()
	if r.err != nil {
		return cpuset.CPUSet{}
	}
	set, err := cpumask.Parse(text, cpumask.MaxID)
	if err != nil {
		r.err = fmt.Errorf("%s %q does not parse: %w", what, text, err)
	}
	return set
}

func (r *payloadReader) resources() ResourceRecord {
	return ResourceRecord{CPUShares: r.uvarint(), CPUQuota: r.varint(), CPUPeriod: r.uvarint(), MemoryLimit: r.varint()}
}

// journalData is the content of one journal file.
type journalData struct {
	path string
	gen  uint64
	data []byte
	// gone says the file disappeared between the listing and the read.
	gone bool
}

// replay applies to base, which it modifies, the records of the journals
// that continue it, given in generation order from generation ref names
// (a base without a file, path "", is the empty state before record 1),
// checking that the records follow each other without a gap; then it
// validates the result against online. It returns ErrNoCheckpoint when
// there is neither a file nor a record, or a *corruption.
func replay(base *State, ref journalRefV1, path string, journals []journalData, online cpuset.CPUSet) (*State, error) {
	haveFile := path != ""
	if ref.Generation > 0 && (len(journals) == 0 || journals[0].gen != ref.Generation) {
		return nil, &corruption{path, fmt.Sprintf("it is continued by journal %s, which is missing",
			journalName(ref.Generation))}
	}
	next := ref.Sequence + 1 // the number the next record must have
	lastPath := path
	for _, j := range journals {
		records, err := parseJournal(j.data, j.gen)
		if err != nil {
			return nil, &corruption{j.path, err.Error()}
		}
		for _, r := range records {
			if r.seq != next {
				return nil, &corruption{j.path, recordOrderReason(r, next, haveFile)}
			}
			for _, o := range r.ops {
				o.apply(base)
			}
			next++
		}
		if len(records) > 0 {
			lastPath = j.path
		}
	}
	if !haveFile && next == 1 {
		return nil, ErrNoCheckpoint // only journals without a record: no Save ever returned
	}
	if err := base.Validate(online); err != nil {
		return nil, &corruption{lastPath, fmt.Sprintf("replaying journal records %d to %d gives an inconsistent state: %v",
			ref.Sequence+1, next-1, err)}
	}
	return base, nil
}

// recordOrderReason explains a record whose number is not the expected one.
func recordOrderReason(r journalRecord, want uint64, haveFile bool) string {
	if want > 1 || haveFile {
		return fmt.Sprintf("record at offset %d is number %d where number %d belongs: records are missing or repeated",
			r.offset, r.seq, want)
	}
	return fmt.Sprintf("there is no snapshot and the first record (at offset %d) is number %d, not 1: "+
		"the snapshot or the records before it are missing", r.offset, r.seq)
}
