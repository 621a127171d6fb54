package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/utils/cpuset"
)

// FormatVersion is the checkpoint format version this build writes. Load
// reads this version and every earlier one; a file with a higher version
// was written by a newer nri-cpumanager and is refused.
const FormatVersion = 1

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
	return marshalV1(s)
}

// Unmarshal decodes and verifies a checkpoint (checksum, policy name,
// format version, cpusets inside online and not overlapping). It returns
// an error saying what is wrong; it never panics, whatever the input.
//
// A file without formatVersion is refused: every file this plugin writes
// carries one, and a kubelet cpu_manager_state (which has none) must be
// brought in with ImportKubelet, whose checks fit that file.
//
// A snapshot written by Store names the journal that continues it; Unmarshal
// returns the snapshot alone (Store.Load and Inspect replay the journal).
func Unmarshal(data []byte, online cpuset.CPUSet) (*State, error) {
	s, _, err := unmarshalSnapshot(data, online)
	return s, err
}

// unmarshalSnapshot is Unmarshal that also returns the snapshot's journal
// reference.
func unmarshalSnapshot(data []byte, online cpuset.CPUSet) (*State, journalRefV1, error) {
	version, err := peekFormatVersion(data)
	if err != nil {
		return nil, journalRefV1{}, err
	}
	s, ref, err := decodeVersion(version, data)
	if err != nil {
		return nil, journalRefV1{}, err
	}
	if err := s.Validate(online); err != nil {
		return nil, journalRefV1{}, err
	}
	return s, ref, nil
}

// marshalSnapshot is Marshal for a snapshot that the journal generation
// and records named by ref continue.
func marshalSnapshot(s *State, ref journalRefV1) ([]byte, error) {
	if err := s.validate(nil); err != nil {
		return nil, fmt.Errorf("refusing to write an inconsistent state: %w", err)
	}
	cp := encodeV1(s)
	cp.Journal = &ref
	return sealV1(cp)
}

// decodeVersion decodes a checkpoint of the given format version into the
// current in-memory State. Each version's decoder verifies its own
// checksum. When the format changes, version N+1 gets its types and
// decoder, and older versions are decoded by their own decoder and then
// migrated forward one version at a time.
func decodeVersion(version int, data []byte) (*State, journalRefV1, error) {
	switch {
	case version == 1:
		return decodeV1(data)
	case version > FormatVersion:
		return nil, journalRefV1{}, fmt.Errorf("formatVersion %d was written by a newer nri-cpumanager (this build reads up to %d)",
			version, FormatVersion)
	default:
		return nil, journalRefV1{}, fmt.Errorf("unknown formatVersion %d (this build reads 1 to %d)", version, FormatVersion)
	}
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
