package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// kubeletPolicyNone is the kubelet's default CPU manager policy, which
// assigns nothing.
const kubeletPolicyNone = "none"

// ImportKubelet reads the kubelet's own cpu_manager_state (every layout it
// has written: v1, v2, KEP-5554's first original/resized, 1.36's pod
// entries and V4's "data" string, with KEP-5554's baselines) into a state
// whose entries hold the kubelet's assignments: a container's baseline
// where the kubelet recorded one (its current CPUs then its resized set
// when they differ), else its current CPUs as its baseline; resolve maps
// v1's container ids to their pod and name. Anything inconsistent (a cpuset that does not parse or lies
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

// kubeletCheckpoint is the union of the kubelet's layouts: the top level
// of every one, and V4's "data" (CPUManagerCheckpointData, whose entries
// are V2's and which adds the baselines).
type kubeletCheckpoint struct {
	PolicyName    string                     `json:"policyName"`
	DefaultCPUSet string                     `json:"defaultCpuSet"`
	Entries       map[string]json.RawMessage `json:"entries"`
	PodEntries    map[string]kubeletPodEntry `json:"podEntries"`
	// Baselines (KEP-5554, kubernetes#140314) and Originals (the KEP's
	// earlier drafts) are read from "data" only.
	Baselines map[string]map[string]kubeletBaseline `json:"baselines"`
	Originals map[string]map[string]kubeletBaseline `json:"originals"`
}

// kubeletBaseline is V4's ContainerCPUs: {"baseline": cpuset}, or
// {"original": cpuset} in the KEP's earlier drafts.
type kubeletBaseline struct {
	Baseline *string `json:"baseline"`
	Original *string `json:"original"`
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
// layout, or, if inData, a field of V4's "data".
func isKubeletField(name string, inData bool) bool {
	switch name {
	case "policyName", "defaultCpuSet", "entries", "podEntries":
		return true
	case "checksum", "data", "dataChecksum":
		return !inData
	case "baselines", "originals":
		return inData
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
	if err := imp.applyBaselines(cp.Baselines, cp.Originals); err != nil {
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

// decodeKubelet decodes the JSON of any kubelet layout, preferring V4's
// "data" payload, and warns about fields it does not know.
func decodeKubelet(data []byte) (*kubeletCheckpoint, []string, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, errors.New("empty file")
	}
	cp, warnings, err := decodeKubeletObject(data, false)
	if err != nil {
		return nil, nil, err
	}
	cp.Baselines, cp.Originals = nil, nil // data's fields only
	var payload struct {
		Data *json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &payload); err != nil || payload.Data == nil {
		return cp, warnings, err
	}
	var text string
	if err := json.Unmarshal(*payload.Data, &text); err != nil {
		return nil, nil, fmt.Errorf("data is not a JSON string: %w", err)
	}
	if text == "" {
		return cp, warnings, nil
	}
	cp, dataWarnings, err := decodeKubeletObject([]byte(text), true)
	if err != nil {
		return nil, nil, fmt.Errorf("data does not hold a checkpoint: %w", err)
	}
	return cp, append(warnings, dataWarnings...), nil
}

// decodeKubeletObject decodes one JSON object of a kubelet layout, the
// file's or its "data", warning about the fields it does not know.
func decodeKubeletObject(data []byte, inData bool) (*kubeletCheckpoint, []string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, nil, describeJSONError(data, err)
	}
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if !isKubeletField(name, inData) {
			what := "top-level field"
			if inData {
				what = "field of data"
			}
			warnings = append(warnings, fmt.Sprintf("unknown %s %q ignored", what, name))
		}
	}
	var cp kubeletCheckpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, nil, fmt.Errorf("bad JSON: %w", err)
	}
	return &cp, warnings, nil
}

// kubeletCheckpointPolicy reports whether data is a kubelet CPU manager
// checkpoint (of any layout: a JSON object with the kubelet's policyName,
// and no formatVersion of nri-cpumanager's), and its policy.
func kubeletCheckpointPolicy(data []byte) (string, bool) {
	var header struct {
		PolicyName    *string          `json:"policyName"`
		FormatVersion *json.RawMessage `json:"formatVersion"`
	}
	if err := json.Unmarshal(data, &header); err != nil || header.PolicyName == nil || header.FormatVersion != nil {
		return "", false
	}
	return *header.PolicyName, true
}
