package state

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	"k8s.io/utils/cpuset"
)

// kubeletV2 is the kubelet's CPU manager checkpoint in its format V2 (the
// kubelet 1.36 reads and writes it: CPUManagerCheckpointV2).
type kubeletV2 struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      uint64                       `json:"checksum"`
}

// kubeletV4 is the kubelet's checkpoint in its format V4 (the kubelet
// 1.37: CPUManagerCheckpoint): the V2 fields, for kubelets that read V2
// only, and the authoritative data, serialized, with its checksum.
type kubeletV4 struct {
	kubeletV2
	Data         string `json:"data"`
	DataChecksum uint64 `json:"dataChecksum"`
}

// kubeletV4Data is V4's CPUManagerCheckpointData.
type kubeletV4Data struct {
	PolicyName    string                                  `json:"policyName"`
	DefaultCPUSet string                                  `json:"defaultCpuSet"`
	Entries       map[string]map[string]string            `json:"entries,omitempty"`
	Baselines     map[string]map[string]kubeletV4Baseline `json:"baselines,omitempty"`
}

// kubeletV4Baseline is V4's ContainerCPUs.
type kubeletV4Baseline struct {
	Baseline string `json:"baseline"`
}

// ExportKubeletV2 returns st as the kubelet's own cpu_manager_state in its
// format V2, for a node going back to the kubelet's static policy with its
// pinned pods keeping their CPUs: policy "static"; each container's
// exclusive CPUs as it holds them now (after a resize its resized set: the
// kubelet 1.36 keeps no baseline); the other CPUs of cpus — those the
// kubelet's static policy manages: online, less the reserved ones under
// strict-cpu-reservation — as the default set,
// CPUs held for a pod's resize included (the kubelet has no holds); and
// checksum 0, which the kubelet accepts for compatibility with its old
// file backend (CPUManagerCheckpointV2.VerifyChecksum). The entries of
// ordinary init containers are left out: their pods' containers took
// their CPUs over, and the kubelet reuses them the same way. It fails when
// an assignment is not within cpus (the kubelet would refuse the file).
//
// The kubelet 1.37 reads it too (its V4 and V3 loads fail on it, the V2
// load accepts it and migrates it), with each container's baseline its
// CPUs now: ExportKubeletV4 keeps the baselines.
func ExportKubeletV2(st *State, cpus cpuset.CPUSet) ([]byte, error) {
	cp, _, err := exportKubelet(st, cpus)
	if err != nil {
		return nil, err
	}
	return marshalExport(cp)
}

// ExportKubeletV4 is ExportKubeletV2 in the kubelet 1.37's format V4:
// the same fields, and the data the kubelet 1.37 reads, which adds each
// container's baseline (KEP-5554: its CPUs at admission, the ones a
// resize never takes away) — the plugin's original CPUs. The data's
// checksum is the kubelet's (checksum.New of the data string: FNV-1a, 32
// bits, of the string as k8s.io/utils/dump.ForHash prints it, "(string)"
// and the string); the V2 fields' checksum is 0, which kubelets that read
// V2 only accept, and which the kubelet 1.37 does not check (the data's
// is authoritative).
func ExportKubeletV4(st *State, cpus cpuset.CPUSet) ([]byte, error) {
	cp, baselines, err := exportKubelet(st, cpus)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(kubeletV4Data{PolicyName: cp.PolicyName, DefaultCPUSet: cp.DefaultCPUSet, Entries: cp.Entries, Baselines: baselines})
	if err != nil {
		return nil, fmt.Errorf("export for the kubelet: %w", err)
	}
	return marshalExport(kubeletV4{kubeletV2: cp, Data: string(data), DataChecksum: kubeletStringChecksum(string(data))})
}

// kubeletStringChecksum is the kubelet's checksum.New of a string.
func kubeletStringChecksum(s string) uint64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("(string)" + s))
	return uint64(h.Sum32())
}

// exportKubelet returns the V2 fields of st's export and each container's
// baseline.
func exportKubelet(st *State, online cpuset.CPUSet) (kubeletV2, map[string]map[string]kubeletV4Baseline, error) {
	cp := kubeletV2{PolicyName: "static", Entries: map[string]map[string]string{}}
	baselines := map[string]map[string]kubeletV4Baseline{}
	exclusive := cpuset.New()
	for ref, a := range st.Assignments() {
		if a.Init {
			continue
		}
		held := a.Held()
		if !held.IsSubsetOf(online) {
			return cp, nil, fmt.Errorf("export for the kubelet: %s/%s holds CPUs %s, not all online (%s)", ref.PodUID, ref.Name, held, online)
		}
		if cp.Entries[ref.PodUID] == nil {
			cp.Entries[ref.PodUID] = map[string]string{}
			baselines[ref.PodUID] = map[string]kubeletV4Baseline{}
		}
		cp.Entries[ref.PodUID][ref.Name] = held.String()
		baselines[ref.PodUID][ref.Name] = kubeletV4Baseline{Baseline: a.Baseline.String()}
		exclusive = exclusive.Union(held)
	}
	cp.DefaultCPUSet = online.Difference(exclusive).String()
	return cp, baselines, nil
}

// marshalExport marshals an export.
func marshalExport(cp any) ([]byte, error) {
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("export for the kubelet: %w", err)
	}
	return data, nil
}
