package state

import (
	"fmt"
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

// journalRefV1 ties a file of the journal design to the journal that
// continues it: the file is the state after record Sequence, and journal
// generation Generation and the later ones hold the records after it. A
// file without it is a whole state by itself, and journals next to it are
// obsolete (a Save of this design writes no journal and none with it).
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

// The checksum of format version 1 is the CRC-32C (Castagnoli) of the
// canonical encoding of checkpointV1 with "checksum" set to 0: what
// encoding/json writes for it, compact, fields in declaration order, map
// keys sorted, empty maps omitted (README.md "Checksum").

// decodeV1 decodes and verifies a version-1 checkpoint: no unknown fields,
// a matching checksum, the static policy, cpusets that parse. It does not
// check the cpusets against each other or the machine (Unmarshal does).
// It returns the file's journal reference, nil when it has none.
func decodeV1(data []byte) (*State, *journalRefV1, error) {
	var cp checkpointV1
	if err := decodeStrict(data, &cp, 1); err != nil {
		return nil, nil, err
	}
	claimed := cp.Checksum
	cp.Checksum = 0
	if err := verifyChecksum(cp, claimed); err != nil {
		return nil, nil, err
	}
	if cp.PolicyName != PolicyName {
		return nil, nil, fmt.Errorf("unknown policy name %q (this plugin writes and reads only %q)", cp.PolicyName, PolicyName)
	}
	s, err := cp.migrate().toState()
	return s, cp.Journal, err
}

// migrate converts a decoded version-1 checkpoint into version 2 (which
// adds only optional fields), leaving its journal reference out.
func (cp *checkpointV1) migrate() *checkpointV2 {
	v2 := &checkpointV2{PolicyName: cp.PolicyName, FormatVersion: 2, DefaultCPUSet: cp.DefaultCPUSet,
		Entries:    make(map[string]map[string]containerCPUsV2, len(cp.Entries)),
		Containers: make(map[string]containerRefV2, len(cp.Containers)),
		Pods:       make(map[string]podResourcesV2, len(cp.Pods)),
	}
	for podUID, containers := range cp.Entries {
		v2.Entries[podUID] = make(map[string]containerCPUsV2, len(containers))
		for name, e := range containers {
			v2.Entries[podUID][name] = containerCPUsV2(e)
		}
	}
	for id, ref := range cp.Containers {
		v2.Containers[id] = containerRefV2(ref)
	}
	for podUID, r := range cp.Pods {
		v2.Pods[podUID] = podResourcesV2{Resources: resourcesV2(r.Resources), Overhead: resourcesV2(r.Overhead)}
	}
	return v2
}
