package plugin

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The log lines an operator follows (docs/troubleshooting.md): one info
// line per applied creation, resize and pod update, with what was asked
// and the cpuset before → after; the raw NRI resources of every request at
// debug.

// requestFields are the CPU and memory a container or pod asks for, as the
// kubelet wrote them in its spec: CPU request (from the shares), limit
// (from quota and period) and memory limit.
func requestFields(r policy.Resources) logrus.Fields {
	return logrus.Fields{
		"cpuRequest":  formatMilli(policy.MilliCPUFromShares(r.CPUShares)),
		"cpuLimit":    formatMilli(policy.MilliCPUFromQuota(r.CPUQuota, r.CPUPeriod)),
		"memoryLimit": formatBytes(r.MemoryLimit),
	}
}

// change formats a value before → after, or the value when it stayed.
func change(before, after string) string {
	if before == after {
		return after
	}
	return before + " → " + after
}

// cpusText formats a cpuset for logs, naming the empty set.
func cpusText(cpus cpuset.CPUSet) string {
	if cpus.IsEmpty() {
		return "none"
	}
	return cpumask.Format(cpus)
}

// formatMilli formats milli-CPU as Kubernetes does: "2", "1500m"; "none"
// for 0.
func formatMilli(milli int64) string {
	switch {
	case milli == 0:
		return "none"
	case milli%1000 == 0:
		return fmt.Sprint(milli / 1000)
	}
	return fmt.Sprintf("%dm", milli)
}

// formatBytes formats a memory size as Kubernetes does: "1Gi", "1536Mi",
// or bytes; "none" for 0.
func formatBytes(b int64) string {
	if b <= 0 {
		return "none"
	}
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b%u.size == 0 {
			return fmt.Sprintf("%d%s", b/u.size, u.suffix)
		}
	}
	return fmt.Sprint(b)
}

// describeNRI formats NRI resources as sent, every field that is set, in
// cgroup terms: "cpu.shares=1024 cpu.quota=100000 cpu.period=100000
// memory.limit=1073741824". Empty resources are "none".
func describeNRI(r *api.LinuxResources) string {
	var parts []string
	add := func(name string, v any) { parts = append(parts, fmt.Sprintf("%s=%v", name, v)) }
	if cpu := r.GetCpu(); cpu != nil {
		if v := cpu.GetShares(); v != nil {
			add("cpu.shares", v.GetValue())
		}
		if v := cpu.GetQuota(); v != nil {
			add("cpu.quota", v.GetValue())
		}
		if v := cpu.GetPeriod(); v != nil {
			add("cpu.period", v.GetValue())
		}
		if v := cpu.GetRealtimeRuntime(); v != nil {
			add("cpu.rt_runtime", v.GetValue())
		}
		if v := cpu.GetRealtimePeriod(); v != nil {
			add("cpu.rt_period", v.GetValue())
		}
		if cpu.GetCpus() != "" {
			add("cpuset.cpus", cpu.GetCpus())
		}
		if cpu.GetMems() != "" {
			add("cpuset.mems", cpu.GetMems())
		}
	}
	if mem := r.GetMemory(); mem != nil {
		for _, f := range []struct {
			name string
			v    *api.OptionalInt64
		}{{"memory.limit", mem.GetLimit()}, {"memory.reservation", mem.GetReservation()}, {"memory.swap", mem.GetSwap()},
			{"memory.kernel", mem.GetKernel()}, {"memory.kernel_tcp", mem.GetKernelTcp()}} {
			if f.v != nil {
				add(f.name, f.v.GetValue())
			}
		}
		if v := mem.GetSwappiness(); v != nil {
			add("memory.swappiness", v.GetValue())
		}
		if v := mem.GetDisableOomKiller(); v != nil {
			add("memory.disable_oom_killer", v.GetValue())
		}
	}
	for _, h := range r.GetHugepageLimits() {
		add("hugetlb."+h.GetPageSize(), h.GetLimit())
	}
	if v := r.GetPids(); v != nil {
		add("pids.max", v.GetLimit())
	}
	if v := r.GetBlockioClass(); v != nil {
		add("blockio.class", v.GetValue())
	}
	if v := r.GetRdtClass(); v != nil {
		add("rdt.class", v.GetValue())
	}
	for _, k := range slices.Sorted(maps.Keys(r.GetUnified())) {
		add("unified."+k, r.GetUnified()[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// debugging reports whether debug lines are logged: the raw resources of
// a request are formatted only then.
func (p *Plugin) debugging() bool {
	return p.log.Logger.IsLevelEnabled(logrus.DebugLevel)
}

// podLog returns the log entry of a pod-level event.
func (p *Plugin) podLog(pod policy.Pod) *logrus.Entry {
	return p.log.WithFields(logrus.Fields{"pod": pod.Namespace + "/" + pod.Name, "podUID": pod.UID})
}

// withNotes adds a decision's notes to a log line.
func withNotes(e *logrus.Entry, notes []string) *logrus.Entry {
	if len(notes) == 0 {
		return e
	}
	return e.WithField("notes", strings.Join(notes, "; "))
}

// refused logs a failed request. A refusal is a warning, and counted in
// refusals_total, the first time in refusalWindow; the kubelet's retries of
// it are logged at debug. A fault is always an error. key names the
// request; refused fills in the event and the refusal's reason.
func (p *Plugin) refused(event string, entry *logrus.Entry, pod policy.Pod, key refusalKey, err error) {
	key.podUID = pod.UID
	entry = entry.WithError(err)
	r, ok := policy.AsRefusal(err)
	if !ok {
		entry.Errorf("%s failed", event)
		return
	}
	key.event, key.reason, key.verdict = event, r.Reason, r.Verdict
	p.metrics.refusing(pod, key.container, event, r)
	entry = entry.WithFields(logrus.Fields{"reason": r.Reason, "verdict": r.Verdict})
	if p.refusals.first(key) {
		p.metrics.refusal(r)
		entry.Warnf("%s refused", event)
		if p.opts.API != nil {
			p.opts.API.Refused(pod, key.container, event, r)
		}
		return
	}
	entry.Debugf("%s refused again (the kubelet retries; warned about once every %s)", event, refusalWindow)
}

// accepted records that a request of a pod's container (container "" for
// the pod's own) was accepted: a later refusal is news again, and it is
// not refused now.
func (p *Plugin) accepted(podUID, container string) {
	p.refusals.forget(podUID, container)
	p.metrics.accepted(podUID, container)
}

// reportCreation logs an applied creation.
func (p *Plugin) reportCreation(log *logrus.Entry, c policy.Container, d policy.Decision, others int) {
	fields := requestFields(c.Resources)
	fields["cpuset"] = cpusText(d.After)
	fields["exclusive"] = d.Exclusive
	fields["shared"] = cpusText(d.SharedAfter)
	if !identical(d.SharedBefore, d.SharedAfter) {
		fields["shared"] = change(cpusText(d.SharedBefore), cpusText(d.SharedAfter))
	}
	fields["others"] = others
	withNotes(log.WithFields(fields), d.Notes).Info("container created")
	for _, w := range d.Warnings {
		log.Warn(w)
	}
}

// reportResize logs and counts a resize, applied or not.
func (p *Plugin) reportResize(log *logrus.Entry, c policy.Container, requested policy.Resources, d policy.Decision, err error) {
	if err != nil {
		p.refused("UpdateContainer", log, c.Pod, refusalKey{container: c.Name, requested: policy.PodResources{Resources: requested}}, err)
		p.metrics.resize(d.Operation, outcomeOf(err))
		return
	}
	p.metrics.resize(d.Operation, outcomeApplied)
	p.accepted(c.Pod.UID, c.Name)
	fields := requestFields(policy.MergeResources(c.Resources, requested))
	fields["operation"] = d.Operation
	fields["cpuset"] = change(cpusText(d.Before), cpusText(d.After))
	withNotes(log.WithFields(fields), d.Notes).Info("container resized")
	if p.opts.API != nil && !d.Before.Equals(d.After) {
		p.opts.API.Resized(c.Pod, c.Name, d.Before, d.After)
	}
}

// reportPodUpdate logs and counts a pod-level update, applied or not.
func (p *Plugin) reportPodUpdate(log *logrus.Entry, pod policy.Pod, res policy.PodResources, d policy.Decision, err error) {
	if err != nil {
		p.refused("UpdatePodSandbox", log, pod, refusalKey{requested: res}, err)
		p.metrics.podUpdate(outcomeOf(err))
		return
	}
	p.metrics.podUpdate(outcomeApplied)
	p.accepted(pod.UID, "")
	cpusets := make([]string, 0, len(d.PodCPUs))
	for _, c := range d.PodCPUs {
		cpusets = append(cpusets, c.Name+"="+cpusText(c.CPUs))
	}
	before, now := d.PodBefore, res.Resources
	withNotes(log.WithFields(logrus.Fields{
		"cpuRequest":  change(formatMilli(policy.MilliCPUFromShares(before.CPUShares)), formatMilli(policy.MilliCPUFromShares(now.CPUShares))),
		"cpuLimit":    change(formatMilli(policy.MilliCPUFromQuota(before.CPUQuota, before.CPUPeriod)), formatMilli(policy.MilliCPUFromQuota(now.CPUQuota, now.CPUPeriod))),
		"memoryLimit": change(formatBytes(before.MemoryLimit), formatBytes(now.MemoryLimit)),
		"operation":   d.Operation,
		"cpusets":     strings.Join(cpusets, " "),
	}), d.Notes).Info("pod resources updated")
}

// containerLog returns the log entry of a container's event.
func (p *Plugin) containerLog(c policy.Container) *logrus.Entry {
	return p.log.WithFields(logrus.Fields{"pod": c.Pod.Namespace + "/" + c.Pod.Name, "container": c.Name, "id": c.ID})
}

// logNotes logs a decision's notes, one line each.
func (p *Plugin) logNotes(event string, notes []string) {
	for _, n := range notes {
		p.log.WithField("event", event).Info(n)
	}
}
