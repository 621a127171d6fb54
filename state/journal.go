package state

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A journal file is a header and then records, each in a frame (README.md,
// "Journal"):
//
//	header: "NRICPUJ1", generation (uint64 LE), CRC-32C of those 16 bytes
//	        (uint32 LE), 4 zero bytes
//	frame:  payload length (uint32 LE), CRC-32C of the length's 4 bytes and
//	        the payload (uint32 LE), payload, zero bytes up to a multiple of 8
//
// Frames start at multiples of 8. A journal is preallocated with zeros,
// so its records are followed by zeros, never by older data.
const (
	journalMagic      = "NRICPUJ1"
	journalHeaderSize = 24
	frameHeaderSize   = 8
	frameAlign        = 8
	// maxPayload bounds a record (a state of thousands of containers is
	// a few MiB); a longer length field is damage.
	maxPayload = 64 << 20
)

// castagnoli is the CRC-32C table (MakeTable builds it once).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journalHeader returns the header of journal generation gen.
func journalHeader(gen uint64) []byte {
	h := make([]byte, journalHeaderSize)
	copy(h, journalMagic)
	binary.LittleEndian.PutUint64(h[8:], gen)
	binary.LittleEndian.PutUint32(h[16:], crc32.Checksum(h[:16], castagnoli))
	return h
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
	if sum, want := binary.LittleEndian.Uint32(data[16:]), crc32.Checksum(data[:16], castagnoli); sum != want {
		return fmt.Errorf("bad journal header: checksum %d, its content hashes to %d", sum, want)
	}
	if g := binary.LittleEndian.Uint64(data[8:]); g != gen {
		return fmt.Errorf("bad journal header: it says generation %d, the file name says %d", g, gen)
	}
	return nil
}

// appendRecord appends the frame of record seq holding ops to buf.
func appendRecord(buf []byte, seq uint64, ops []op) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, frameHeaderSize)...)
	buf = appendPayload(buf, seq, ops)
	frame := buf[start:]
	binary.LittleEndian.PutUint32(frame, uint32(len(frame)-frameHeaderSize))
	binary.LittleEndian.PutUint32(frame[4:], frameChecksum(frame[:4], frame[frameHeaderSize:]))
	for len(buf)%frameAlign != 0 {
		buf = append(buf, 0)
	}
	return buf
}

// frameChecksum is the CRC-32C of a frame's length field and payload.
func frameChecksum(length, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(length, castagnoli), castagnoli, payload)
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
	if binary.LittleEndian.Uint32(data[off+4:]) != frameChecksum(data[off:off+4], payload) {
		return nil, 0, false
	}
	next = off + frameHeaderSize + int(n)
	next += (frameAlign - next%frameAlign) % frameAlign
	return payload, min(next, len(data)), true
}

// journalRecord is one record read back from a journal.
type journalRecord struct {
	offset int
	seq    uint64
	ops    []op
}

// parseJournal reads the records of a journal file of generation gen.
//
// The records end at the first frame that does not verify. Only the write
// of the last record can have been cut short by a crash, and nothing is
// ever written after it, so that frame is a torn tail (or the zeros after
// the last record) when no valid frame follows it anywhere in the file;
// tail is then its offset. A valid frame after it means a record in the
// middle of the journal is damaged, and parseJournal fails.
func parseJournal(data []byte, gen uint64) (records []journalRecord, tail int, err error) {
	if err := checkJournalHeader(data, gen); err != nil {
		return nil, 0, err
	}
	off := journalHeaderSize
	for {
		payload, next, ok := frameAt(data, off)
		if !ok {
			break
		}
		seq, ops, err := decodePayload(payload)
		if err != nil {
			return nil, 0, fmt.Errorf("record at offset %d does not decode: %w", off, err)
		}
		records = append(records, journalRecord{offset: off, seq: seq, ops: ops})
		off = next
	}
	if valid := nextValidFrame(data, off+frameAlign); valid >= 0 {
		return nil, 0, fmt.Errorf("the frame at offset %d does not verify, yet a valid record follows at offset %d: "+
			"a record in the middle of the journal is damaged", off, valid)
	}
	return records, off, nil
}

// nextValidFrame returns the offset of the first frame at or after from
// (a multiple of frameAlign) that verifies, or -1.
func nextValidFrame(data []byte, from int) int {
	for off := from; len(data)-off >= frameHeaderSize; off += frameAlign {
		if binary.LittleEndian.Uint64(data[off:]) == 0 {
			continue // zeros: no frame, and cheap to skip
		}
		if _, _, ok := frameAt(data, off); ok {
			return off
		}
	}
	return -1
}
