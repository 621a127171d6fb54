package state

// Format version 3, frozen: the checkpoint of the first release, which
// format 4 extends with an entry's "deviceNodes". Its other parts are
// those of format 4 (diskContainerRef, diskPod, diskConfig, diskHold,
// diskDelayed), unchanged between the two. A format 3 file is decoded with
// these types, so that its checksum is verified over what it holds and a
// field it cannot have ("deviceNodes") is refused as unknown.

// diskCheckpointV3 is a whole checkpoint file of format 3.
type diskCheckpointV3 struct {
	PolicyName    string                            `json:"policyName"`
	FormatVersion int                               `json:"formatVersion"`
	DefaultCPUSet string                            `json:"defaultCpuSet"`
	Entries       map[string]map[string]diskEntryV3 `json:"entries,omitempty"`
	Containers    map[string]diskContainerRef       `json:"containers,omitempty"`
	Pods          map[string]diskPod                `json:"pods,omitempty"`
	Config        *diskConfig                       `json:"config,omitempty"`
	Holds         map[string]diskHold               `json:"holds,omitempty"`
	Checksum      uint32                            `json:"checksum"`
}

// diskEntryV3 is one container's CPUs in format 3.
type diskEntryV3 struct {
	Baseline string       `json:"baseline"`
	Resized  string       `json:"resized"`
	Init     bool         `json:"init,omitempty"`
	Delayed  *diskDelayed `json:"delayed,omitempty"`
}

// upgrade returns the format 4 checkpoint that holds what cp holds: its
// entries without device nodes.
func (cp *diskCheckpointV3) upgrade() diskCheckpoint {
	entries := make(map[string]map[string]diskEntry, len(cp.Entries))
	for podUID, containers := range cp.Entries {
		converted := make(map[string]diskEntry, len(containers))
		for name, e := range containers {
			converted[name] = diskEntry{Baseline: e.Baseline, Resized: e.Resized, Init: e.Init, Delayed: e.Delayed}
		}
		entries[podUID] = converted
	}
	return diskCheckpoint{
		PolicyName:    cp.PolicyName,
		FormatVersion: cp.FormatVersion,
		DefaultCPUSet: cp.DefaultCPUSet,
		Entries:       entries,
		Containers:    cp.Containers,
		Pods:          cp.Pods,
		Config:        cp.Config,
		Holds:         cp.Holds,
		Checksum:      cp.Checksum,
	}
}
