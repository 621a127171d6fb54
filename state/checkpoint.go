package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"k8s.io/utils/cpuset"
)

// FormatVersion is the checkpoint format version this build writes. It
// reads that version and every one from OldestFormatVersion on. A file
// with a higher version was written by a newer nri-cpumanager and is
// refused with a *NewerFormatError, and left in place; one with a lower
// version is of a format that was never released, and is corrupt.
const FormatVersion = 4

// OldestFormatVersion is the earliest checkpoint format version this build
// reads: format 3, which is format 4 without "deviceNodes".
const OldestFormatVersion = 3

// Marshal encodes a state in the checkpoint format, checksum included. It
// refuses a state that Unmarshal would refuse for reasons other than the
// machine's CPUs (which Marshal does not know), so a checkpoint that is
// written can always be read back.
func Marshal(s *State) ([]byte, error) {
	if s == nil {
		return nil, errors.New("marshal checkpoint: nil state")
	}
	if err := s.validate(nil); err != nil {
		return nil, fmt.Errorf("refusing to write an inconsistent state: %w", err)
	}
	return marshalCurrent(s), nil
}

// marshalCurrent encodes a valid state in the format version this build
// writes.
func marshalCurrent(s *State) []byte {
	var e encoder
	return sealCanonical(e.canonical(s))
}

// Unmarshal decodes and verifies a checkpoint (checksum, policy name,
// format version, cpusets inside online and not overlapping). It returns
// an error saying what is wrong; it never panics, whatever the input.
//
// A file without formatVersion is refused: every file this plugin writes
// carries one, and a kubelet cpu_manager_state (which has none) must be
// brought in with ImportKubelet, whose checks fit that file. A file of a
// newer version gives a *NewerFormatError. A file of format 3 is read as
// format 4 without device nodes; Marshal writes it as format 4.
func Unmarshal(data []byte, online cpuset.CPUSet) (*State, error) {
	version, err := peekFormatVersion(data)
	if err != nil {
		return nil, err
	}
	switch {
	case version > FormatVersion:
		return nil, &NewerFormatError{Version: version}
	case version >= 1 && version < OldestFormatVersion:
		return nil, fmt.Errorf("formatVersion %d is an earlier format that was never released, "+
			"which this build does not read (it reads formats %d to %d)", version, OldestFormatVersion, FormatVersion)
	case version < 1:
		return nil, fmt.Errorf("unknown formatVersion %d (this build reads formats %d to %d)", version, OldestFormatVersion, FormatVersion)
	}
	s, err := decode(data, version)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(online); err != nil {
		return nil, err
	}
	return s, nil
}

// castagnoli is the CRC-32C table of the checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c returns the CRC-32C (Castagnoli) of data.
func crc32c(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// zeroChecksumSuffix ends every canonical encoding: the checksum is the
// last field, and 0 while the checksum is computed.
const zeroChecksumSuffix = `,"checksum":0}`

// verifyChecksum checks that claimed is the checksum of cp, a decoded
// checkpoint whose checksum field is 0 (see sealCanonical).
func verifyChecksum(cp any, claimed uint32) error {
	canonical, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("re-encode for checksum: %w", err)
	}
	if actual := crc32c(canonical); actual != claimed {
		return fmt.Errorf("checksum mismatch: the file says %d, its content hashes to %d", claimed, actual)
	}
	return nil
}

// decodeStrict decodes data, one JSON object and nothing after it, into
// cp, a checkpoint of format version, refusing unknown fields.
func decodeStrict(data []byte, version int, cp any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cp); err != nil {
		return fmt.Errorf("bad JSON for format version %d: %w", version, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("bad JSON for format version %d: data after the checkpoint object", version)
	}
	return nil
}

// peekFormatVersion checks that data is one well-formed JSON object and
// returns its formatVersion.
func peekFormatVersion(data []byte) (int, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		if len(data) == 0 {
			return 0, errors.New("empty file")
		}
		return 0, errors.New("file holds only whitespace")
	}
	var header struct {
		FormatVersion *json.RawMessage `json:"formatVersion"`
	}
	if err := json.Unmarshal(data, &header); err != nil {
		return 0, describeJSONError(data, err)
	}
	if header.FormatVersion == nil {
		return 0, errors.New("no formatVersion: not a checkpoint written by nri-cpumanager" +
			" (a kubelet cpu_manager_state is imported with ImportKubelet, not loaded)")
	}
	var version int
	if err := json.Unmarshal(*header.FormatVersion, &version); err != nil {
		return 0, fmt.Errorf("formatVersion %s is not an integer", *header.FormatVersion)
	}
	return version, nil
}

// describeJSONError tells a truncated file from other bad JSON.
func describeJSONError(data []byte, err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		if syntax.Offset >= int64(len(bytes.TrimRight(data, " \t\r\n"))) {
			return fmt.Errorf("truncated file: the JSON stops after %d bytes", len(data))
		}
		return fmt.Errorf("bad JSON at byte %d: %w", syntax.Offset, err)
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field == "" {
		return fmt.Errorf("bad JSON: the top level is a JSON %s, not an object", typeErr.Value)
	}
	return fmt.Errorf("bad JSON: %w", err)
}
