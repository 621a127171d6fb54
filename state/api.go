// Package state holds the plugin's memory of which container owns which
// exclusive CPUs, and persists it crash-safely in a state directory.
//
// The in-memory State is a plain value: the policy works on a Clone and the
// plugin swaps it in once Store.Save has put it on disk. Save writes the
// whole checkpoint file at every commit, as the kubelet does: a temp file,
// fsync, rename over cpu_manager_state, fsync of the directory, so the file
// always holds the last state saved. The file keeps the shape of the
// kubelet's cpu_manager_state (policyName, defaultCpuSet, entries,
// checksum), each entry {baseline, resized} as in KEP-5554, so an operator
// who knows the kubelet's file can read it.
//
// This package is the only one in the project that touches the state
// directory. README.md describes the checkpoint format, its checksum, what
// Load refuses, and what ImportKubelet reads and verifies.
package state

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/pmap"
)

// PolicyName is the only policy name this plugin writes and accepts.
const PolicyName = "static"

// CheckpointFile is the checkpoint's file name inside the state directory.
const CheckpointFile = "cpu_manager_state"

// Assignment is the exclusive CPUs of one container.
type Assignment struct {
	// Baseline is the cpuset the container got when it was created
	// (KEP-5554's baseline CPUs; "original" in its first text). A resize
	// never takes any of these CPUs away.
	Baseline cpuset.CPUSet
	// Resized is the cpuset after the latest successful resize, always a
	// superset of Baseline; empty until the first resize.
	Resized cpuset.CPUSet
	// Init marks the entry of an ordinary init container (not a sidecar):
	// the containers its pod starts after it may reuse its CPUs, as the
	// kubelet's static policy reuses them, so its CPUs may also be in
	// other entries of its pod (never in another pod's).
	Init bool
	// Delayed are CPUs a decrease released that the container keeps until
	// ReleaseAt (the scale-down delay), so that its threads can move off
	// them first; disjoint from Assigned, empty when no release is
	// pending.
	Delayed cpuset.CPUSet
	// ReleaseAt is when Delayed go; zero when Delayed is empty.
	ReleaseAt time.Time
	// DeviceNodes are the NUMA nodes of the container's devices as the
	// policy last looked them up (at its creation or re-creation, or at a
	// Synchronize); empty when it has no device on a known node or none
	// was looked up. A record for the operator: the policy places by a
	// fresh lookup.
	DeviceNodes NodeSet
}

// Assigned returns the CPUs the container holds now: Resized if set, else
// Baseline.
func (a Assignment) Assigned() cpuset.CPUSet {
	if a.Resized.Size() > 0 {
		return a.Resized
	}
	return a.Baseline
}

// Held returns every CPU of the container: Assigned and the Delayed ones
// it keeps until their release.
func (a Assignment) Held() cpuset.CPUSet {
	if a.Delayed.IsEmpty() {
		return a.Assigned()
	}
	return a.Assigned().Union(a.Delayed)
}

// ContainerRef names a container the way the checkpoint keys it.
type ContainerRef struct {
	PodUID string `json:"podUID"`
	Name   string `json:"name"`
}

// ResourceRecord is the CPU and memory values of a pod as the checkpoint
// keeps them (Linux cgroup units). Zero means unset.
type ResourceRecord struct {
	CPUShares   uint64 `json:"cpuShares,omitempty"`
	CPUQuota    int64  `json:"cpuQuota,omitempty"`
	CPUPeriod   uint64 `json:"cpuPeriod,omitempty"`
	MemoryLimit int64  `json:"memoryLimit,omitempty"`
}

// PodRecord is the pod-level resources and overhead last delivered by
// UpdatePodSandbox (the runtime's PodSandbox keeps the creation values
// forever, so this is the only record of a resized pod's totals).
type PodRecord struct {
	Resources ResourceRecord `json:"resources"`
	Overhead  ResourceRecord `json:"overhead"`
}

// ConfigRecord is the configuration the assignments were made under
// (checkpoint key "config"), so that a start under another configuration
// can tell what changed.
type ConfigRecord struct {
	// ReservedCPUs are the CPUs reserved for the system.
	ReservedCPUs cpuset.CPUSet
	// Keys maps configuration keys to their canonical values.
	Keys map[string]string
}

// Hold is the CPUs a container's decrease released, held for its pod
// while the pod's resize is in flight (checkpoint key "holds"): neither
// another pod nor the shared pool gets them meanwhile.
type Hold struct {
	// CPUs are the CPUs held; never empty.
	CPUs cpuset.CPUSet
	// Since is when the hold began.
	Since time.Time
}

// State is the plugin's memory: the shared pool, the exclusive assignments,
// the runtime container ids that own them, the pods' last pod-level
// resources, the CPUs held for pods in the middle of a resize and the
// configuration they were made under. Create one with New (the zero value
// works too); it changes only through its methods.
type State struct {
	// shared is the shared pool (checkpoint key "defaultCpuSet") as a
	// bitmap: a decision takes CPUs from it and gives them back in a few
	// word operations where a set's map would be rebuilt whole. It is
	// copy on write (TakeShared and ReturnShared store a new one), so
	// clones share it. sharedOutside holds what was set into the pool
	// that no bitmap of a checkpoint can (a negative id or one above
	// cpumask.MaxID): empty unless a caller set an impossible pool, which
	// validation then names.
	shared        cpumask.Mask
	sharedOutside cpuset.CPUSet
	// entries maps pod UID → container name → assignment.
	entries map[string]map[string]Assignment
	// containers maps a runtime container id to the entry it owns: a
	// persistent map, so that a clone costs nothing for the ids a decision
	// leaves alone (most decisions: a resize changes none).
	containers pmap.Map[ContainerRef]
	// pods maps pod UID → pod-level resources last seen in UpdatePodSandbox.
	pods map[string]PodRecord
	// holds maps pod UID → CPUs held for the pod.
	holds map[string]Hold
	// config is the configuration record; nil when none was set.
	config *ConfigRecord
}

// ErrNoCheckpoint is returned by Load and Inspect when the state directory
// holds no saved state: no checkpoint file.
var ErrNoCheckpoint = errors.New("no checkpoint file")

// CorruptError says why the saved state was not trusted and where its
// files were moved aside. Load returns it for a checkpoint file that is
// empty or truncated, bad JSON, fails its checksum, has an unknown policy
// name, an earlier or unknown format version, or values that fail
// State.Validate (cpusets that do not parse, overlap each other or lie
// outside the machine, and the like), and for a journal an unreleased
// earlier format kept next to it. The caller rebuilds the state from the
// runtime's view.
type CorruptError struct {
	// Path is the file at fault: the checkpoint file or a leftover journal.
	Path string
	// MovedTo is where that file now is (<name>.corrupt-<timestamp>), or
	// "" if it was not moved (moving failed, or Inspect, which moves
	// nothing). Load moves the other files of the state aside with it.
	MovedTo string
	// Reason says what was wrong, with the values involved.
	Reason string
}

func (e *CorruptError) Error() string {
	msg := "checkpoint " + e.Path + " is not trusted: " + e.Reason
	if e.MovedTo != "" {
		msg += " (moved aside to " + e.MovedTo + ")"
	}
	return msg
}

// NewerFormatError says that the checkpoint file was written by a newer
// nri-cpumanager, in a format version above FormatVersion. Load and
// Inspect return it and leave the file where it is: nothing is moved or
// written, and a Store whose Load returned it refuses to Save over it.
// Treating the file as corrupt would rebuild the state from the runtime
// and lose every baseline and resized set (a rollback of the plugin would
// wipe them), so the plugin refuses to start instead.
type NewerFormatError struct {
	// Path is the file.
	Path string
	// Version is the file's format version.
	Version int
}

func (e *NewerFormatError) Error() string {
	what := "checkpoint"
	if e.Path != "" {
		what += " " + e.Path
	}
	return fmt.Sprintf("%s was written by a newer nri-cpumanager (format %d; this build reads formats up to %d): "+
		"refusing to start rather than lose it; roll forward, or move the file away to start empty",
		what, e.Version, FormatVersion)
}

// InconsistentError is Save's error for a state that fails validation:
// nothing was written, and saving that state again fails again (unlike a
// failed write, which a later Save may get past).
type InconsistentError struct {
	// Err says what is inconsistent.
	Err error
}

func (e *InconsistentError) Error() string {
	return "save checkpoint: refusing to write an inconsistent state: " + e.Err.Error()
}

func (e *InconsistentError) Unwrap() error { return e.Err }

// KubeletCheckpointError is Load's error when the state directory's
// checkpoint file is the kubelet's own CPU manager checkpoint: the state
// directory is the kubelet's (stateDir set to /var/lib/kubelet). Moving
// the file aside or writing over it would break the kubelet's next
// start, so the Store refuses to Save over it and the plugin refuses to
// start.
type KubeletCheckpointError struct {
	// Path is the file.
	Path string
	// Policy is the kubelet's CPU manager policy the file records.
	Policy string
}

func (e *KubeletCheckpointError) Error() string {
	return fmt.Sprintf("%s is the kubelet's CPU manager checkpoint (policy %q), not nri-cpumanager's: stateDir is the kubelet's directory; "+
		"give the plugin a directory of its own (the default /var/lib/nri-cpumanager), and set kubeletCheckpoint to this file to import its assignments",
		e.Path, e.Policy)
}
