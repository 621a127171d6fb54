package state

import (
	"fmt"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// The types below are the checkpoint file as it is on disk (format
// version FormatVersion). They do not reuse the package's exported types,
// so that adding a field to, say, ResourceRecord cannot change the file
// format by accident; a change of them is a new format version.

// diskCheckpoint is a whole checkpoint file. Field order matters: it is
// the order of the canonical encoding the checksum covers, and the
// checksum comes last.
type diskCheckpoint struct {
	PolicyName    string                          `json:"policyName"`
	FormatVersion int                             `json:"formatVersion"`
	DefaultCPUSet string                          `json:"defaultCpuSet"`
	Entries       map[string]map[string]diskEntry `json:"entries,omitempty"`
	Containers    map[string]diskContainerRef     `json:"containers,omitempty"`
	Pods          map[string]diskPod              `json:"pods,omitempty"`
	Config        *diskConfig                     `json:"config,omitempty"`
	Holds         map[string]diskHold             `json:"holds,omitempty"`
	Checksum      uint32                          `json:"checksum"`
}

// diskEntry is one container's CPUs (Assignment): "resized" is "" until
// the first resize; "init", "delayed" and "deviceNodes" (a Linux list of
// NUMA nodes, NodeSet) are left out unless set.
type diskEntry struct {
	Baseline    string       `json:"baseline"`
	Resized     string       `json:"resized"`
	Init        bool         `json:"init,omitempty"`
	Delayed     *diskDelayed `json:"delayed,omitempty"`
	DeviceNodes string       `json:"deviceNodes,omitempty"`
}

// diskDelayed is the CPUs a decrease released that the container keeps
// until releaseAt (RFC 3339 in UTC).
type diskDelayed struct {
	CPUs      string `json:"cpus"`
	ReleaseAt string `json:"releaseAt"`
}

type diskContainerRef struct {
	PodUID string `json:"podUID"`
	Name   string `json:"name"`
}

type diskPod struct {
	Resources diskResources `json:"resources"`
	Overhead  diskResources `json:"overhead"`
}

type diskResources struct {
	CPUShares   uint64 `json:"cpuShares,omitempty"`
	CPUQuota    int64  `json:"cpuQuota,omitempty"`
	CPUPeriod   uint64 `json:"cpuPeriod,omitempty"`
	MemoryLimit int64  `json:"memoryLimit,omitempty"`
}

// diskConfig is the configuration the assignments were made under.
type diskConfig struct {
	ReservedCPUSet string            `json:"reservedCpuSet"`
	Keys           map[string]string `json:"keys,omitempty"`
}

// diskHold is the CPUs held for a pod; Since is RFC 3339 in UTC.
type diskHold struct {
	CPUs  string `json:"cpus"`
	Since string `json:"since"`
}

// The checksum is the CRC-32C (Castagnoli) of the canonical encoding of
// diskCheckpoint with "checksum" set to 0: what encoding/json writes for
// it, compact, fields in declaration order, map keys sorted, empty maps
// omitted (README.md "Checksum").

// decode decodes and verifies a checkpoint of format version (the current
// one or format 3): no unknown fields, a matching checksum, the static
// policy, cpusets, times and nodes that parse. It does not check the
// cpusets against each other or the machine (Unmarshal does).
func decode(data []byte, version int) (*State, error) {
	var cp diskCheckpoint
	if version == 3 {
		var old diskCheckpointV3
		if err := decodeVerified(data, version, &old, &old.Checksum); err != nil {
			return nil, err
		}
		cp = old.upgrade()
	} else if err := decodeVerified(data, version, &cp, &cp.Checksum); err != nil {
		return nil, err
	}
	if cp.PolicyName != PolicyName {
		return nil, fmt.Errorf("unknown policy name %q (this plugin writes and reads only %q)", cp.PolicyName, PolicyName)
	}
	return cp.toState()
}

// decodeVerified decodes data strictly into cp, a checkpoint of format
// version whose checksum field is *checksum, and verifies the checksum.
func decodeVerified(data []byte, version int, cp any, checksum *uint32) error {
	if err := decodeStrict(data, version, cp); err != nil {
		return err
	}
	claimed := *checksum
	*checksum = 0
	return verifyChecksum(cp, claimed)
}

// toState converts a decoded checkpoint, parsing its cpusets and times.
func (cp *diskCheckpoint) toState() (*State, error) {
	defaultSet, err := cpumask.Parse(cp.DefaultCPUSet, cpumask.MaxID)
	if err != nil {
		return nil, fmt.Errorf("defaultCpuSet %q does not parse: %w", cp.DefaultCPUSet, err)
	}
	s := New(defaultSet)
	for podUID, containers := range cp.Entries {
		for name, e := range containers {
			a, err := e.assignment()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ContainerRef{PodUID: podUID, Name: name}, err)
			}
			s.SetAssignment(podUID, name, a)
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

// assignment parses an entry's cpusets, time and nodes.
func (e diskEntry) assignment() (a Assignment, err error) {
	a.Init = e.Init
	if a.DeviceNodes, err = ParseNodeSet(e.DeviceNodes); err != nil {
		return a, fmt.Errorf("deviceNodes %q does not parse: %w", e.DeviceNodes, err)
	}
	if a.Baseline, err = cpumask.Parse(e.Baseline, cpumask.MaxID); err != nil {
		return a, fmt.Errorf("baseline %q does not parse: %w", e.Baseline, err)
	}
	if a.Resized, err = cpumask.Parse(e.Resized, cpumask.MaxID); err != nil {
		return a, fmt.Errorf("resized %q does not parse: %w", e.Resized, err)
	}
	if e.Delayed == nil {
		return a, nil
	}
	if a.Delayed, err = cpumask.Parse(e.Delayed.CPUs, cpumask.MaxID); err != nil {
		return a, fmt.Errorf("delayed cpus %q does not parse: %w", e.Delayed.CPUs, err)
	}
	if a.ReleaseAt, err = time.Parse(time.RFC3339Nano, e.Delayed.ReleaseAt); err != nil {
		return a, fmt.Errorf("delayed releaseAt %q is not an RFC 3339 time: %w", e.Delayed.ReleaseAt, err)
	}
	return a, nil
}
