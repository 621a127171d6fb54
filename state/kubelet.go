package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"io/fs"
	"maps"
	"os"
	"slices"

	"k8s.io/utils/cpuset"
)

// kubeletPolicyNone is the kubelet's default CPU manager policy, which
// assigns nothing.
const kubeletPolicyNone = "none"

// ImportKubelet reads the kubelet's own cpu_manager_state (every layout it
// has written: v1, v2, KEP-5554's original/resized, 1.36's pod entries and
// 1.37's "data" string) into a state whose entries hold the kubelet's
// assignments as original sets; resolve maps v1's container ids to their
// pod and name. Anything inconsistent (a cpuset that does not parse or lies
// outside online, overlaps between pods or with the shared pool) is an error
// and nothing is imported; what is skipped instead is listed in the warnings.
// The file is only read. A missing file gives an error wrapping
// ErrNoCheckpoint. state/README.md ("Importing the kubelet's checkpoint")
// has the layouts and every check.
func ImportKubelet(path string, online cpuset.CPUSet, resolve func(containerID string) (ContainerRef, bool)) (*State, []string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("import kubelet checkpoint %s: %w", path, ErrNoCheckpoint)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("import kubelet checkpoint: %w", err)
	}
	s, warnings, err := importKubeletData(data, online, resolve)
	if err != nil {
		return nil, nil, fmt.Errorf("import kubelet checkpoint %s: %w", path, err)
	}
	return s, warnings, nil
}

// kubeletCheckpoint is the union of the kubelet's layouts (the 1.37
// layout's "data" holds the same object without checksum).
type kubeletCheckpoint struct {
	PolicyName    string                     `json:"policyName"`
	DefaultCPUSet string                     `json:"defaultCpuSet"`
	Entries       map[string]json.RawMessage `json:"entries"`
	PodEntries    map[string]kubeletPodEntry `json:"podEntries"`
}

// kubeletPodEntry is the kubelet's PodEntry.
type kubeletPodEntry struct {
	CPUSet string `json:"cpuSet"`
}

// kubeletContainerCPUs is KEP-5554's ContainerCPUs.
type kubeletContainerCPUs struct {
	Original string `json:"original"`
	Resized  string `json:"resized"`
}

// isKubeletField reports whether name is a top-level field of a kubelet
// layout.
func isKubeletField(name string) bool {
	switch name {
	case "policyName", "defaultCpuSet", "entries", "podEntries", "checksum", "data", "dataChecksum":
		return true
	}
	return false
}

// importKubeletData is ImportKubelet without the file.
func importKubeletData(data []byte, online cpuset.CPUSet, resolve func(string) (ContainerRef, bool)) (*State, []string, error) {
	cp, warnings, err := decodeKubelet(data)
	if err != nil {
		return nil, nil, err
	}
	switch cp.PolicyName {
	case kubeletPolicyNone:
		return New(online), warnings, nil
	case PolicyName:
	default:
		return nil, nil, fmt.Errorf("unknown kubelet CPU manager policy %q (want %q or %q)", cp.PolicyName, PolicyName, kubeletPolicyNone)
	}
	defaultSet, err := cpumask.Parse(cp.DefaultCPUSet, cpumask.MaxID)
	if err != nil {
		return nil, nil, fmt.Errorf("defaultCpuSet %q does not parse: %w", cp.DefaultCPUSet, err)
	}
	if err := insideOnline("defaultCpuSet", defaultSet, online); err != nil {
		return nil, nil, err
	}
	imp := &kubeletImport{
		online:     online,
		warnings:   warnings,
		containers: map[ContainerRef]Assignment{},
		source:     map[ContainerRef]string{},
	}
	if err := imp.addEntries(cp.Entries, resolve); err != nil {
		return nil, nil, err
	}
	podSets, err := imp.parsePodEntries(cp.PodEntries)
	if err != nil {
		return nil, nil, err
	}
	imp.dropReusedCPUs()
	if err := imp.checkPodsDisjoint(podSets, defaultSet); err != nil {
		return nil, nil, err
	}
	s := New(defaultSet)
	for ref, a := range imp.containers {
		s.SetAssignment(ref.PodUID, ref.Name, a)
	}
	// Every check of Validate was made above; this guards the invariant.
	if err := s.Validate(online); err != nil {
		return nil, nil, fmt.Errorf("imported state is inconsistent: %w", err)
	}
	slices.Sort(imp.warnings)
	return s, imp.warnings, nil
}

// decodeKubelet decodes the JSON of any kubelet layout, preferring the
// 1.37 "data" payload, and warns about unknown top-level fields.
func decodeKubelet(data []byte) (*kubeletCheckpoint, []string, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, errors.New("empty file")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, nil, describeJSONError(data, err)
	}
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if !isKubeletField(name) {
			warnings = append(warnings, fmt.Sprintf("unknown top-level field %q ignored", name))
		}
	}
	var cp kubeletCheckpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, nil, fmt.Errorf("bad JSON: %w", err)
	}
	if raw, ok := fields["data"]; ok {
		var payload string
		if err := json.Unmarshal(raw, &payload); err != nil {
			return nil, nil, fmt.Errorf("data is not a JSON string: %w", err)
		}
		if payload != "" {
			cp = kubeletCheckpoint{}
			if err := json.Unmarshal([]byte(payload), &cp); err != nil {
				return nil, nil, fmt.Errorf("data does not hold a checkpoint: %w", describeJSONError([]byte(payload), err))
			}
		}
	}
	return &cp, warnings, nil
}
