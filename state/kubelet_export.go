package state

import (
	"encoding/json"
	"fmt"

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
func ExportKubeletV2(st *State, cpus cpuset.CPUSet) ([]byte, error) {
	online := cpus
	cp := kubeletV2{PolicyName: "static", Entries: map[string]map[string]string{}}
	exclusive := cpuset.New()
	for ref, a := range st.Assignments() {
		if a.Init {
			continue
		}
		held := a.Held()
		if !held.IsSubsetOf(online) {
			return nil, fmt.Errorf("export for the kubelet: %s/%s holds CPUs %s, not all online (%s)", ref.PodUID, ref.Name, held, online)
		}
		if cp.Entries[ref.PodUID] == nil {
			cp.Entries[ref.PodUID] = map[string]string{}
		}
		cp.Entries[ref.PodUID][ref.Name] = held.String()
		exclusive = exclusive.Union(held)
	}
	cp.DefaultCPUSet = online.Difference(exclusive).String()
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("export for the kubelet: %w", err)
	}
	return data, nil
}
