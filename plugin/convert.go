package plugin

import (
	"context"
	"fmt"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// podFromNRI extracts what the policy needs of a pod sandbox. Every field of
// an NRI payload may be missing: the getters are nil-safe.
func podFromNRI(pod *api.PodSandbox) policy.Pod {
	return policy.Pod{
		UID:          pod.GetUid(),
		Namespace:    pod.GetNamespace(),
		Name:         pod.GetName(),
		CgroupParent: pod.GetLinux().GetCgroupParent(),
		Resources:    resourcesFromNRI(pod.GetLinux().GetPodResources()),
	}
}

// resourcesFromNRI extracts the CPU and memory values of NRI resources.
func resourcesFromNRI(r *api.LinuxResources) state.Resources {
	cpu := r.GetCpu()
	return state.Resources{
		CPUShares:   cpu.GetShares().GetValue(),
		CPUQuota:    cpu.GetQuota().GetValue(),
		CPUPeriod:   cpu.GetPeriod().GetValue(),
		MemoryLimit: r.GetMemory().GetLimit().GetValue(),
	}
}

// containerFromNRI turns an NRI container into the policy's view. A cpuset
// that does not parse is reported and treated as unknown.
func containerFromNRI(pod policy.Pod, ctr *api.Container, log *logrus.Entry) policy.Container {
	res := ctr.GetLinux().GetResources()
	cpus, err := cpumask.Parse(res.GetCpu().GetCpus(), cpumask.MaxID)
	if err != nil {
		log.WithError(err).WithField("container", ctr.GetId()).Warn("container reports an invalid cpuset; treating it as unknown")
		cpus = cpuset.New()
	}
	return policy.Container{
		ID:        ctr.GetId(),
		Name:      ctr.GetName(),
		Pod:       pod,
		Resources: resourcesFromNRI(res),
		CPUs:      cpus,
		Exited:    ctr.GetState() == api.ContainerState_CONTAINER_STOPPED,
	}
}

// podResourcesFromNRI turns UpdatePodSandbox's values into the state's.
func podResourcesFromNRI(overhead, resources *api.LinuxResources) state.PodResources {
	return state.PodResources{Resources: resourcesFromNRI(resources), Overhead: resourcesFromNRI(overhead)}
}

// updateToNRI turns a policy update into an NRI container update.
func updateToNRI(u policy.Update) *api.ContainerUpdate {
	return updatesToNRI([]policy.Update{u})[0]
}

// updatesToNRI turns policy updates into NRI container updates. Updates
// that set the same cpus and mems share one payload (a reply is marshalled,
// never changed): the shared containers' updates are many and alike.
func updatesToNRI(us []policy.Update) []*api.ContainerUpdate {
	out, _ := convertUpdates(us)
	return out
}

// convertUpdates is updatesToNRI that also returns the cpusets of its
// distinct payloads. Updates are told apart by their cpuset's list text, which
// the policy formats once for the many shared-pool updates: no set
// comparison per update.
func convertUpdates(us []policy.Update) ([]*api.ContainerUpdate, []cpuset.CPUSet) {
	out := make([]*api.ContainerUpdate, 0, len(us))
	type key struct{ cpus, mems string }
	payloads := map[key]*api.LinuxContainerUpdate{}
	var distinct []cpuset.CPUSet
	for _, u := range us {
		k := key{cpus: u.List()}
		if !u.Mems.IsEmpty() {
			k.mems = u.Mems.String()
		}
		linux := payloads[k]
		if linux == nil {
			// A new payload; its cpus may repeat another's with other
			// mems, which the callers' unions do not mind.
			distinct = append(distinct, u.CPUs)
			nu := &api.ContainerUpdate{}
			nu.SetLinuxCPUSetCPUs(k.cpus)
			if k.mems != "" {
				nu.SetLinuxCPUSetMems(k.mems)
			}
			linux = nu.Linux
			payloads[k] = linux
		}
		out = append(out, &api.ContainerUpdate{ContainerId: u.ContainerID, Linux: linux})
	}
	return out, distinct
}

// adjustmentFor turns the target of a creation into a container adjustment.
func adjustmentFor(u *policy.Update) *api.ContainerAdjustment {
	adj := &api.ContainerAdjustment{}
	if u == nil {
		return adj
	}
	adj.SetLinuxCPUSetCPUs(u.CPUs.String())
	if !u.Mems.IsEmpty() {
		adj.SetLinuxCPUSetMems(u.Mems.String())
	}
	return adj
}

// nriLogger routes the NRI stub's logs into logrus.
type nriLogger struct{ e *logrus.Entry }

func (l nriLogger) Debugf(_ context.Context, format string, args ...any) {
	l.e.Debugf(format, args...)
}
func (l nriLogger) Infof(_ context.Context, format string, args ...any) { l.e.Infof(format, args...) }
func (l nriLogger) Warnf(_ context.Context, format string, args ...any) { l.e.Warnf(format, args...) }
func (l nriLogger) Errorf(_ context.Context, format string, args ...any) {
	l.e.Errorf(format, args...)
}

// recoverInto turns a panic in a handler into an error, so that a bug never
// takes the plugin (and the CRI call waiting on it) down.
func recoverInto(err *error, event string, log *logrus.Entry) {
	if r := recover(); r != nil {
		log.WithField("event", event).Errorf("panic while handling the event: %v", r)
		*err = fmt.Errorf("nri-cpumanager: internal error while handling %s: %v", event, r)
	}
}
