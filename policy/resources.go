package policy

import "github.com/nri-cpumanager/nri-cpumanager/state"

// Resources are the CPU and memory values of a container or pod as the
// runtime carries them (Linux cgroup units). Zero means unset.
type Resources struct {
	CPUShares   uint64
	CPUQuota    int64
	CPUPeriod   uint64
	MemoryLimit int64
}

// PodResources are a pod's pod-level resources and overhead, as
// UpdatePodSandbox delivers them.
type PodResources struct {
	Resources Resources
	Overhead  Resources
}

// podRecord is r as the checkpoint keeps it.
func podRecord(r PodResources) state.PodRecord {
	return state.PodRecord{Resources: state.ResourceRecord(r.Resources), Overhead: state.ResourceRecord(r.Overhead)}
}

// recordedPod returns the pod-level resources the checkpoint keeps for a
// pod.
func (m *Model) recordedPod(podUID string) (PodResources, bool) {
	r, ok := m.State.PodResources(podUID)
	return PodResources{Resources: Resources(r.Resources), Overhead: Resources(r.Overhead)}, ok
}
