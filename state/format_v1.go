package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"hash/crc32"
	"io"
	"strconv"
)

// The types below are format version 1 as it is on disk. They are frozen:
// a change of the file's shape is a new format version with its own types
// and a decoder that converts this one (see decodeVersion). They do not
// reuse the package's exported types so that adding a field to, say,
// Resources cannot change the file format by accident.

// checkpointV1 is a whole version-1 checkpoint file. Field order matters:
// it is the order of the canonical encoding the checksum covers, and the
// checksum comes last.
type checkpointV1 struct {
	PolicyName    string                                `json:"policyName"`
	FormatVersion int                                   `json:"formatVersion"`
	DefaultCPUSet string                                `json:"defaultCpuSet"`
	Entries       map[string]map[string]containerCPUsV1 `json:"entries,omitempty"`
	Containers    map[string]containerRefV1             `json:"containers,omitempty"`
	Pods          map[string]podResourcesV1             `json:"pods,omitempty"`
	Journal       *journalRefV1                         `json:"journal,omitempty"`
	Checksum      uint32                                `json:"checksum"`
}

// journalRefV1 ties a snapshot to the journal that continues it: the
// snapshot is the state after record Sequence, and journal generation
// Generation and the later ones hold the records after it. A file without
// it is a whole state by itself (Generation 0 and Sequence 0: the journals,
// if any, start at record 1). Marshal never writes it.
type journalRefV1 struct {
	Generation uint64 `json:"generation"`
	Sequence   uint64 `json:"sequence"`
}

// containerCPUsV1 is KEP-5554's ContainerCPUs: "resized" is "" until the
// first resize.
type containerCPUsV1 struct {
	Original string `json:"original"`
	Resized  string `json:"resized"`
}

type containerRefV1 struct {
	PodUID string `json:"podUID"`
	Name   string `json:"name"`
}

type podResourcesV1 struct {
	Resources resourcesV1 `json:"resources"`
	Overhead  resourcesV1 `json:"overhead"`
}

type resourcesV1 struct {
	CPUShares   uint64 `json:"cpuShares,omitempty"`
	CPUQuota    int64  `json:"cpuQuota,omitempty"`
	CPUPeriod   uint64 `json:"cpuPeriod,omitempty"`
	MemoryLimit int64  `json:"memoryLimit,omitempty"`
}

// checksumV1 is the checksum of format version 1: CRC-32C (Castagnoli) of
// the canonical encoding of the checkpoint with "checksum" set to 0. The
// canonical encoding is what Go's encoding/json produces for checkpointV1:
// compact, fields in declaration order, map keys sorted, empty maps
// omitted. See README.md ("Checkpoint format").
func checksumV1(canonical []byte) uint32 {
	return crc32.Checksum(canonical, castagnoli)
}

// zeroChecksumSuffix ends every canonical version-1 encoding.
const zeroChecksumSuffix = `,"checksum":0}`

// encodeV1 converts a state into its version-1 form, checksum unset.
func encodeV1(s *State) checkpointV1 {
	cp := checkpointV1{
		PolicyName:    PolicyName,
		FormatVersion: 1,
		DefaultCPUSet: cpumask.Format(s.defaultCPUSet),
		Entries:       make(map[string]map[string]containerCPUsV1, len(s.entries)),
		Containers:    make(map[string]containerRefV1, len(s.containers)),
		Pods:          make(map[string]podResourcesV1, len(s.pods)),
	}
	for podUID, containers := range s.entries {
		if len(containers) == 0 {
			continue
		}
		entries := make(map[string]containerCPUsV1, len(containers))
		for name, a := range containers {
			entries[name] = containerCPUsV1{Original: cpumask.Format(a.Original), Resized: cpumask.Format(a.Resized)}
		}
		cp.Entries[podUID] = entries
	}
	for id, ref := range s.containers {
		cp.Containers[id] = containerRefV1(ref)
	}
	for podUID, r := range s.pods {
		cp.Pods[podUID] = podResourcesV1{Resources: resourcesV1(r.Resources), Overhead: resourcesV1(r.Overhead)}
	}
	return cp
}

// marshalV1 encodes a state as a version-1 checkpoint, checksum included.
func marshalV1(s *State) ([]byte, error) {
	return sealV1(encodeV1(s))
}

// sealV1 encodes a version-1 checkpoint with its checksum. It encodes
// once: the canonical encoding ends in "checksum":0, which is replaced by
// the checksum of those very bytes.
func sealV1(cp checkpointV1) ([]byte, error) {
	cp.Checksum = 0
	canonical, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	if !bytes.HasSuffix(canonical, []byte(zeroChecksumSuffix)) {
		return nil, fmt.Errorf("encode checkpoint: canonical encoding does not end in %s", zeroChecksumSuffix)
	}
	sum := checksumV1(canonical)
	out := canonical[:len(canonical)-len(zeroChecksumSuffix)]
	out = append(out, `,"checksum":`...)
	out = strconv.AppendUint(out, uint64(sum), 10)
	return append(out, '}'), nil
}

// decodeV1 decodes and verifies a version-1 checkpoint: no unknown fields,
// a matching checksum, the static policy, cpusets that parse. It does not
// check the cpusets against each other or the machine (Unmarshal does).
// It returns the snapshot's journal reference, zero when it has none.
func decodeV1(data []byte) (*State, journalRefV1, error) {
	var cp checkpointV1
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cp); err != nil {
		return nil, journalRefV1{}, fmt.Errorf("bad JSON for format version 1: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, journalRefV1{}, fmt.Errorf("bad JSON for format version 1: data after the checkpoint object")
	}
	claimed := cp.Checksum
	cp.Checksum = 0
	canonical, err := json.Marshal(cp)
	if err != nil {
		return nil, journalRefV1{}, fmt.Errorf("re-encode for checksum: %w", err)
	}
	if actual := checksumV1(canonical); actual != claimed {
		return nil, journalRefV1{}, fmt.Errorf("checksum mismatch: the file says %d, its content hashes to %d", claimed, actual)
	}
	if cp.PolicyName != PolicyName {
		return nil, journalRefV1{}, fmt.Errorf("unknown policy name %q (this plugin writes and reads only %q)", cp.PolicyName, PolicyName)
	}
	var ref journalRefV1
	if cp.Journal != nil {
		ref = *cp.Journal
	}
	s, err := cp.toState()
	return s, ref, err
}

// toState converts a decoded version-1 checkpoint, parsing its cpusets.
func (cp *checkpointV1) toState() (*State, error) {
	defaultSet, err := cpumask.Parse(cp.DefaultCPUSet, cpumask.MaxID)
	if err != nil {
		return nil, fmt.Errorf("defaultCpuSet %q does not parse: %w", cp.DefaultCPUSet, err)
	}
	s := New(defaultSet)
	for podUID, containers := range cp.Entries {
		for name, e := range containers {
			ref := ContainerRef{PodUID: podUID, Name: name}
			original, err := cpumask.Parse(e.Original, cpumask.MaxID)
			if err != nil {
				return nil, fmt.Errorf("%s: original %q does not parse: %w", ref, e.Original, err)
			}
			resized, err := cpumask.Parse(e.Resized, cpumask.MaxID)
			if err != nil {
				return nil, fmt.Errorf("%s: resized %q does not parse: %w", ref, e.Resized, err)
			}
			s.SetAssignment(podUID, name, Assignment{Original: original, Resized: resized})
		}
	}
	// s is new and shares no map: its maps are filled directly.
	for id, ref := range cp.Containers {
		s.containers[id] = ContainerRef(ref)
	}
	for podUID, r := range cp.Pods {
		s.pods[podUID] = PodResources{Resources: Resources(r.Resources), Overhead: Resources(r.Overhead)}
	}
	return s, nil
}
