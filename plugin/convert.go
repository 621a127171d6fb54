package plugin

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Every value taken from an NRI payload is bounded before use: a cpuset by
// the online CPUs (a list such as "0-99999999" is refused after reading its
// text, never expanded), numbers by the ranges the kernel accepts, strings
// by the lengths Kubernetes and containerd use and to valid UTF-8 (the
// checkpoint cannot hold other bytes). What is out of bounds is
// treated as absent, with a warning: a container whose pod UID or name is
// absent cannot be pinned and runs on the shared pool (see
// policy.Untrackable).
const (
	// maxIDLen bounds container and sandbox ids (containerd's are 64 hex
	// digits and it accepts at most 76 characters).
	maxIDLen = 128
	// maxUIDLen bounds pod UIDs (36 characters).
	maxUIDLen = 128
	// maxNameLen bounds names and namespaces (a DNS subdomain).
	maxNameLen = 253
	// maxPathLen bounds cgroup paths (PATH_MAX).
	maxPathLen = 4096
	// minPeriod and maxPeriod bound cpu.cfs_period_us (1 ms to 1 s).
	minPeriod, maxPeriod = 1000, 1000000
	// maxQuota is the kernel's largest cpu.cfs_quota_us (2^44-1 µs).
	maxQuota = 1<<44 - 1
)

// payloadLimits bound the values of NRI payloads on one machine.
type payloadLimits struct {
	// maxCPU is the largest online CPU id: a cpuset naming a larger one is
	// invalid.
	maxCPU int
}

// limitsFor returns the payload limits of a machine whose online CPUs are
// online.
func limitsFor(online cpuset.CPUSet) payloadLimits {
	l := payloadLimits{maxCPU: 0}
	for _, cpu := range online.UnsortedList() {
		l.maxCPU = max(l.maxCPU, cpu)
	}
	return l
}

// bounded returns s, or "" when it is longer than n bytes or is not valid
// UTF-8.
func bounded(s string, n int) string {
	if len(s) > n || !utf8.ValidString(s) {
		return ""
	}
	return s
}

// podFromNRI extracts what the policy needs of a pod sandbox. Every field
// of an NRI payload may be missing: the getters are nil-safe.
func podFromNRI(pod *api.PodSandbox) policy.Pod {
	return policy.Pod{
		UID:          bounded(pod.GetUid(), maxUIDLen),
		Namespace:    bounded(pod.GetNamespace(), maxNameLen),
		Name:         bounded(pod.GetName(), maxNameLen),
		CgroupParent: bounded(pod.GetLinux().GetCgroupParent(), maxPathLen),
		Resources:    boundedResources(pod.GetLinux().GetPodResources(), nil),
		SandboxID:    bounded(pod.GetId(), maxIDLen),
	}
}

// boundedResources extracts the CPU and memory values of NRI resources,
// each within the range the kernel accepts (else absent), and warns
// through log (when not nil) of the values it leaves out.
func boundedResources(r *api.LinuxResources, log *logrus.Entry) policy.Resources {
	cpu := r.GetCpu()
	out := policy.Resources{
		CPUShares:   cpu.GetShares().GetValue(),
		CPUQuota:    cpu.GetQuota().GetValue(),
		CPUPeriod:   cpu.GetPeriod().GetValue(),
		MemoryLimit: r.GetMemory().GetLimit().GetValue(),
	}
	var dropped []string
	if out.CPUShares > policy.MaxShares {
		dropped, out.CPUShares = append(dropped, fmt.Sprintf("CPU shares %d", out.CPUShares)), 0
	}
	if out.CPUPeriod != 0 && (out.CPUPeriod < minPeriod || out.CPUPeriod > maxPeriod) {
		dropped, out.CPUPeriod = append(dropped, fmt.Sprintf("CPU period %d", out.CPUPeriod)), 0
	}
	switch {
	case out.CPUQuota < 0:
		out.CPUQuota = -1 // no limit
	case out.CPUQuota > maxQuota:
		dropped, out.CPUQuota = append(dropped, fmt.Sprintf("CPU quota %d", out.CPUQuota)), 0
	}
	if out.MemoryLimit < 0 {
		out.MemoryLimit = -1 // no limit
	}
	if len(dropped) > 0 && log != nil {
		log.WithField("ignored", strings.Join(dropped, ", ")).Warn("resources outside the kernel's ranges; ignoring them")
	}
	return out
}

// container turns an NRI container into the policy's view. A cpuset that
// does not parse, or names a CPU above the largest online one, is reported
// and treated as unknown.
func (l payloadLimits) container(pod policy.Pod, ctr *api.Container, log *logrus.Entry) policy.Container {
	res := ctr.GetLinux().GetResources()
	id := bounded(ctr.GetId(), maxIDLen)
	entry := log.WithField("container", id)
	cpus, err := cpumask.Parse(res.GetCpu().GetCpus(), l.maxCPU)
	if err != nil {
		entry.WithError(err).Warn("container reports an invalid cpuset; treating it as unknown")
		cpus = cpuset.New()
	}
	return policy.Container{
		ID:        id,
		Name:      bounded(ctr.GetName(), maxNameLen),
		Pod:       pod,
		Resources: boundedResources(res, entry),
		CPUs:      cpus,
		Exited:    ctr.GetState() == api.ContainerState_CONTAINER_STOPPED,
		// A process that ended and said so with code 0 (containerd
		// reports an exit's code and time; the undo of a failed creation
		// has neither).
		Completed: ctr.GetFinishedAt() != 0 && ctr.GetExitCode() == 0,
	}
}

// containerFromNRI converts a container of an event and warns, once per
// container, when it cannot be pinned although it asks for whole CPUs.
func (p *Plugin) containerFromNRI(pod policy.Pod, ctr *api.Container) policy.Container {
	c := p.limits.container(pod, ctr, p.log)
	p.warnUntrackable(c)
	return c
}

// warnUntrackable warns once per container that asks for exclusive CPUs
// but cannot be pinned.
func (p *Plugin) warnUntrackable(c policy.Container) {
	why := policy.Untrackable(c)
	if why == "" || p.warned[c.ID] || !policy.Classify(c.Pod.QoS(), c.Resources).Exclusive {
		return
	}
	if c.ID != "" {
		p.warned[c.ID] = true
	}
	p.containerLog(c).WithField("why", why).Warn("container cannot be pinned; it runs on the shared pool")
}

// podResourcesFromNRI turns UpdatePodSandbox's values into the state's.
func podResourcesFromNRI(overhead, resources *api.LinuxResources) policy.PodResources {
	return policy.PodResources{Resources: boundedResources(resources, nil), Overhead: boundedResources(overhead, nil)}
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
func convertUpdates(us []policy.Update) ([]*api.ContainerUpdate, []cpumask.Mask) {
	out := make([]*api.ContainerUpdate, 0, len(us))
	type key struct{ cpus, mems string }
	payloads := map[key]*api.LinuxContainerUpdate{}
	var distinct []cpumask.Mask
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

// Infof logs at debug level: the stub says "Created plugin", "Registering
// plugin" and the like at every connection attempt, every 500 ms while
// containerd is away; the plugin logs what an operator needs of the
// connection itself ("connected to NRI", the reconnection warnings).
func (l nriLogger) Infof(_ context.Context, format string, args ...any) { l.e.Debugf(format, args...) }
func (l nriLogger) Warnf(_ context.Context, format string, args ...any) { l.e.Warnf(format, args...) }
func (l nriLogger) Errorf(_ context.Context, format string, args ...any) {
	l.e.Errorf(format, args...)
}

// maskOf returns a cpuset as a bitmap; a negative id, which no CPU has,
// is left out.
func maskOf(cpus cpuset.CPUSet) cpumask.Mask {
	m, _ := cpumask.Of(cpus)
	return m
}
