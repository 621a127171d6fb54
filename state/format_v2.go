package state

import (
	"fmt"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// The types below are format version 2 as it is on disk, frozen like
// version 1's (see format_v1.go): version 1 and the optional "config" and
// "holds", and no "journal".

// checkpointV2 is a whole version-2 checkpoint file. Field order matters:
// it is the order of the canonical encoding the checksum covers, and the
// checksum comes last.
type checkpointV2 struct {
	PolicyName    string                                `json:"policyName"`
	FormatVersion int                                   `json:"formatVersion"`
	DefaultCPUSet string                                `json:"defaultCpuSet"`
	Entries       map[string]map[string]containerCPUsV2 `json:"entries,omitempty"`
	Containers    map[string]containerRefV2             `json:"containers,omitempty"`
	Pods          map[string]podResourcesV2             `json:"pods,omitempty"`
	Config        *configV2                             `json:"config,omitempty"`
	Holds         map[string]holdV2                     `json:"holds,omitempty"`
	Checksum      uint32                                `json:"checksum"`
}

type containerCPUsV2 struct {
	Original string `json:"original"`
	Resized  string `json:"resized"`
}

type containerRefV2 struct {
	PodUID string `json:"podUID"`
	Name   string `json:"name"`
}

type podResourcesV2 struct {
	Resources resourcesV2 `json:"resources"`
	Overhead  resourcesV2 `json:"overhead"`
}

type resourcesV2 struct {
	CPUShares   uint64 `json:"cpuShares,omitempty"`
	CPUQuota    int64  `json:"cpuQuota,omitempty"`
	CPUPeriod   uint64 `json:"cpuPeriod,omitempty"`
	MemoryLimit int64  `json:"memoryLimit,omitempty"`
}

// configV2 is the configuration the assignments were made under.
type configV2 struct {
	ReservedCPUSet string            `json:"reservedCpuSet"`
	Keys           map[string]string `json:"keys,omitempty"`
}

// holdV2 is the CPUs held for a pod; Since is RFC 3339 in UTC.
type holdV2 struct {
	CPUs  string `json:"cpus"`
	Since string `json:"since"`
}

// The checksum of format version 2 is that of version 1: the CRC-32C of
// the canonical encoding of checkpointV2 with "checksum" set to 0.

// decodeV2 decodes and verifies a version-2 checkpoint: no unknown fields,
// a matching checksum, the static policy, cpusets and times that parse.
// It does not check the cpusets against each other or the machine
// (Unmarshal does).
func decodeV2(data []byte) (*State, error) {
	var cp checkpointV2
	if err := decodeStrict(data, &cp, 2); err != nil {
		return nil, err
	}
	claimed := cp.Checksum
	cp.Checksum = 0
	if err := verifyChecksum(cp, claimed); err != nil {
		return nil, err
	}
	if cp.PolicyName != PolicyName {
		return nil, fmt.Errorf("unknown policy name %q (this plugin writes and reads only %q)", cp.PolicyName, PolicyName)
	}
	return cp.toState()
}

// toState converts a decoded version-2 checkpoint (the current version,
// which older ones migrate to), parsing its cpusets and times.
func (cp *checkpointV2) toState() (*State, error) {
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
			s.SetAssignment(podUID, name, Assignment{Baseline: original, Resized: resized})
		}
	}
	for id, ref := range cp.Containers {
		s.SetContainer(id, ContainerRef(ref))
	}
	for podUID, r := range cp.Pods {
		s.SetPodResources(podUID, PodRecord{Resources: ResourceRecord(r.Resources), Overhead: ResourceRecord(r.Overhead)})
	}
	if cp.Config != nil {
		reserved, err := cpumask.Parse(cp.Config.ReservedCPUSet, cpumask.MaxID)
		if err != nil {
			return nil, fmt.Errorf("config: reservedCpuSet %q does not parse: %w", cp.Config.ReservedCPUSet, err)
		}
		s.SetConfigRecord(ConfigRecord{ReservedCPUs: reserved, Keys: cp.Config.Keys})
	}
	for podUID, h := range cp.Holds {
		held, err := cpumask.Parse(h.CPUs, cpumask.MaxID)
		if err != nil {
			return nil, fmt.Errorf("hold of pod %q: cpus %q does not parse: %w", podUID, h.CPUs, err)
		}
		since, err := time.Parse(time.RFC3339Nano, h.Since)
		if err != nil {
			return nil, fmt.Errorf("hold of pod %q: since %q is not an RFC 3339 time: %w", podUID, h.Since, err)
		}
		s.SetHold(podUID, Hold{CPUs: held, Since: since})
	}
	return s, nil
}
