package plugin

import (
	"context"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// Configure logs which runtime the plugin talks to. The zero event mask
// subscribes the plugin to every event it has a handler for.
func (p *Plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	p.log.WithFields(logrus.Fields{"runtime": runtime, "version": version}).Info("connected to NRI")
	return 0, nil
}

// Synchronize reconciles the plugin with every pod and container the
// runtime has (on each connection) and returns the updates that make every
// container's cpuset what it should be.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) (updates []*api.ContainerUpdate, err error) {
	defer recoverInto(&err, "Synchronize", p.log)
	defer p.metrics.observeEvent("Synchronize", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()

	p.pods = map[string]policy.Pod{}
	policyPods := make([]policy.Pod, 0, len(pods))
	for _, pod := range pods {
		policyPods = append(policyPods, p.rememberPod(pod))
	}
	for _, v := range p.ctrs {
		v.cgroupPath = ""
		v.forget()
	}
	containers := make([]policy.Container, 0, len(ctrs))
	for _, ctr := range ctrs {
		c := p.containerFromNRI(p.pods[ctr.GetPodSandboxId()], ctr)
		containers = append(containers, c)
		if c.ID != "" {
			v := p.view(c.ID)
			v.cgroupPath = bounded(ctr.GetLinux().GetCgroupsPath(), maxPathLen)
			// A container created but not started yet gets the cpuset of
			// its spec unless an update is sent again once it started.
			v.synchronized(ctr.GetState() != api.ContainerState_CONTAINER_CREATED, c.CPUs)
		}
	}

	model := p.model
	if p.importKubelet {
		p.importKubelet = false
		model = p.importFromKubelet(model, containers)
	}
	d := p.policy.Synchronize(model, policyPods, containers)
	p.logNotes("Synchronize", d.Notes)
	p.commitOrKeep(d.Model)

	p.pending = map[string]bool{}
	for _, c := range containers {
		if !c.Exited {
			p.view(c.ID).set(c.CPUs) // what the runtime says it runs on
		}
	}
	for _, u := range d.Others {
		p.handed(u, handedInReply)
	}
	p.forgetContainersNotIn(p.model)
	updates = updatesToNRI(d.Others)
	p.synchronized = true
	p.metrics.setReady(true)
	p.checkInvariants("Synchronize")
	p.log.WithFields(logrus.Fields{"pods": len(pods), "containers": len(ctrs), "updates": len(updates),
		"exclusive": p.model.State.ExclusiveCPUs().String(), "shared": p.model.SharedPool().String()}).Info("synchronized")
	return updates, nil
}

// RunPodSandbox remembers the pod.
func (p *Plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	defer p.metrics.observeEvent("RunPodSandbox", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	p.rememberPod(pod)
	return nil
}

// UpdatePodSandbox admits a pod's new pod-level resources (CRI
// UpdatePodSandboxResources, which the kubelet sends before it writes the
// pod's cgroup for a resize, and after which it stops the resize on an
// error): a pod-level CPU change its exclusive containers could not get is
// refused with the refusal they would get. Accepted resources are
// checkpointed (the runtime keeps only the creation values), and the pod's
// containers are marked due for a cgroup read at PostUpdatePodSandbox,
// which reconciles them with the state. A refusal changes nothing.
func (p *Plugin) UpdatePodSandbox(_ context.Context, pod *api.PodSandbox, overhead, resources *api.LinuxResources) (err error) {
	defer recoverInto(&err, "UpdatePodSandbox", p.log)
	defer p.metrics.observeEvent("UpdatePodSandbox", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	pp := p.rememberPod(pod)
	log := p.podLog(pp)
	if p.debugging() {
		log.WithFields(logrus.Fields{"resources": describeNRI(resources), "overhead": describeNRI(overhead)}).Debug("UpdatePodSandbox request")
	}
	res := podResourcesFromNRI(overhead, resources)
	before, _ := p.model.PodResources(pp)
	d, err := p.decide(func(m *policy.Model) (policy.Decision, error) { return p.policy.UpdatePodSandbox(m, pp, res) })
	if err != nil {
		p.refused("UpdatePodSandbox", log, refusalKey{podUID: pp.UID, requested: res}, err)
		p.metrics.podUpdate(outcomeOf(err))
		return err
	}
	if err := p.commit(d.Model); err != nil {
		p.metrics.podUpdate(outcomeError)
		return err
	}
	p.metrics.podUpdate(outcomeApplied)
	p.refusals.forget(pp.UID, "")
	p.logNotes("UpdatePodSandbox", d.Notes)
	p.markPending(d.Others)
	var cpusets []string
	for _, id := range p.model.SortedContainerIDs() {
		t := p.model.Containers[id]
		if t.PodUID != pp.UID {
			continue
		}
		if v := p.ctrs[id]; v != nil {
			v.due = true
		}
		if !t.Stopped {
			cpusets = append(cpusets, t.Name+"="+cpusText(p.model.CPUsOf(id)))
		}
	}
	now := res.Resources
	log.WithFields(logrus.Fields{
		"cpuRequest":  change(formatMilli(policy.MilliCPUFromShares(before.CPUShares)), formatMilli(policy.MilliCPUFromShares(now.CPUShares))),
		"cpuLimit":    change(formatMilli(policy.MilliCPUFromQuota(before.CPUQuota, before.CPUPeriod)), formatMilli(policy.MilliCPUFromQuota(now.CPUQuota, now.CPUPeriod))),
		"memoryLimit": change(formatBytes(before.MemoryLimit), formatBytes(now.MemoryLimit)),
		"operation":   d.Operation,
		"cpusets":     strings.Join(cpusets, " "),
	}).Info("pod resources updated")
	return nil
}

// PostUpdatePodSandbox triggers a verification of the cpusets.
func (p *Plugin) PostUpdatePodSandbox(_ context.Context, _ *api.PodSandbox) error {
	p.mu.Lock()
	p.event()
	p.mu.Unlock()
	p.requestVerify()
	return nil
}

// StopPodSandbox needs nothing: the pod's containers are stopped one by one.
func (p *Plugin) StopPodSandbox(_ context.Context, _ *api.PodSandbox) error { return nil }

// RemovePodSandbox forgets the pod and anything of it still known.
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) (err error) {
	defer recoverInto(&err, "RemovePodSandbox", p.log)
	defer p.metrics.observeEvent("RemovePodSandbox", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	d := p.policy.RemovePodSandbox(p.model, pod.GetUid())
	delete(p.pods, pod.GetId())
	p.logNotes("RemovePodSandbox", d.Notes)
	p.commitOrKeep(d.Model)
	p.forgetContainersNotIn(d.Model)
	p.markPending(d.Others)
	return nil
}

// CreateContainer gives a new container its cpuset: exclusive CPUs (and the
// shrink of the shared containers, applied by the runtime first) or the
// shared pool. A refusal fails the creation and changes nothing.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (adj *api.ContainerAdjustment, updates []*api.ContainerUpdate, err error) {
	defer recoverInto(&err, "CreateContainer", p.log)
	defer p.metrics.observeEvent("CreateContainer", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	c := p.containerFromNRI(p.rememberPod(pod), ctr)
	log := p.containerLog(c)
	if p.debugging() {
		log.WithField("resources", describeNRI(ctr.GetLinux().GetResources())).Debug("CreateContainer request")
	}
	sharedBefore := p.model.SharedPool()
	d, err := p.decide(func(m *policy.Model) (policy.Decision, error) { return p.policy.CreateContainer(m, c) })
	if err != nil {
		p.refused("CreateContainer", log, refusalKey{podUID: c.Pod.UID, container: c.Name, requested: state.PodResources{Resources: c.Resources}}, err)
		return nil, nil, err
	}
	if err := p.commit(d.Model); err != nil {
		return nil, nil, err
	}
	p.refusals.forget(c.Pod.UID, c.Name)
	p.view(c.ID).cgroupPath = bounded(ctr.GetLinux().GetCgroupsPath(), maxPathLen)
	p.handed(*d.Target, handedInSpec)
	updates = p.replyUpdates(d.Others, c.ID)
	fields := requestFields(c.Resources)
	fields["cpuset"] = cpusText(d.Target.CPUs)
	fields["exclusive"] = d.Model.Containers[c.ID].Exclusive
	shared := d.Model.SharedPool()
	fields["shared"] = cpusText(shared)
	if !identical(sharedBefore, shared) {
		fields["shared"] = change(cpusText(sharedBefore), cpusText(shared))
	}
	fields["others"] = len(updates)
	withNotes(log.WithFields(fields), d.Notes).Info("container created")
	return adjustmentFor(d.Target), updates, nil
}

// PostCreateContainer triggers a verification of the other containers'
// cpusets, which the runtime updated before creating this one.
func (p *Plugin) PostCreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) error {
	p.mu.Lock()
	p.event()
	p.mu.Unlock()
	p.requestVerify()
	return nil
}

// PostStartContainer sends a started container its cpuset again when one
// was handed to it while the runtime was starting it: containerd applies
// an update of a container that is not running yet to its spec only,
// which the task being started may have read already.
func (p *Plugin) PostStartContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) (err error) {
	defer recoverInto(&err, "PostStartContainer", p.log)
	defer p.metrics.observeEvent("PostStartContainer", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	id := ctr.GetId()
	if v := p.ctrs[id]; v != nil && v.start() {
		p.setPending(id)
		if p.debugging() {
			p.log.WithField("container", id).Debug("cpuset handed while the container started; sending it again")
		}
	}
	return nil
}

// UpdateContainer decides a resize (KEP-5554). A growth returns the shrink
// of the shared containers with the target's larger cpuset (the runtime
// applies the target last); a shrink returns only the target's smaller
// cpuset: the shared containers grow once PostUpdateContainer confirms it.
// A refusal is returned as the error the kubelet shows the user.
func (p *Plugin) UpdateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) (updates []*api.ContainerUpdate, err error) {
	defer recoverInto(&err, "UpdateContainer", p.log)
	defer p.metrics.observeEvent("UpdateContainer", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	c := p.containerFromNRI(p.rememberPod(pod), ctr)
	log := p.containerLog(c)
	if p.debugging() {
		log.WithFields(logrus.Fields{"current": describeNRI(ctr.GetLinux().GetResources()), "requested": describeNRI(res)}).Debug("UpdateContainer request")
	}
	requested := boundedResources(res, log)
	op := policy.RequestedOperation(c, requested)
	before := p.model.CPUsOf(c.ID)
	d, err := p.decide(func(m *policy.Model) (policy.Decision, error) { return p.policy.UpdateContainer(m, c, requested) })
	if err != nil {
		p.refused("UpdateContainer", log, refusalKey{podUID: c.Pod.UID, container: c.Name, requested: state.PodResources{Resources: requested}}, err)
		p.metrics.resize(op, outcomeOf(err))
		return nil, err
	}
	if err := p.commit(d.Model); err != nil {
		p.metrics.resize(d.Operation, outcomeError)
		return nil, err
	}
	p.metrics.resize(d.Operation, outcomeApplied)
	p.refusals.forget(c.Pod.UID, c.Name)
	fields := requestFields(policy.MergeResources(c.Resources, requested))
	fields["operation"] = d.Operation
	fields["cpuset"] = change(cpusText(before), cpusText(d.Model.CPUsOf(c.ID)))
	withNotes(log.WithFields(fields), d.Notes).Info("container resized")
	updates = p.replyUpdates(d.Others, c.ID)
	if d.Target != nil {
		p.handed(*d.Target, handedAsTarget) // the reply carries it: no longer pending
		updates = append(updates, updateToNRI(*d.Target))
	}
	return updates, nil
}

// PostUpdateContainer confirms a container's update: CPUs its shrink
// released join the shared pool, and the shared containers grow into them
// through an unsolicited update sent from a goroutine.
func (p *Plugin) PostUpdateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) (err error) {
	defer recoverInto(&err, "PostUpdateContainer", p.log)
	defer p.metrics.observeEvent("PostUpdateContainer", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	if v := p.ctrs[ctr.GetId()]; v != nil && !v.inFlight {
		v.confirm() // the runtime applied the resize's target
	}
	p.confirm(ctr.GetId())
	p.requestVerify()
	return nil
}

// StopContainer releases a stopped container's exclusive CPUs and grows the
// shared containers into them in the reply (the process is gone).
func (p *Plugin) StopContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (updates []*api.ContainerUpdate, err error) {
	defer recoverInto(&err, "StopContainer", p.log)
	defer p.metrics.observeEvent("StopContainer", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	d := p.policy.StopContainer(p.model, p.limits.container(podFromNRI(pod), ctr, p.log))
	p.logNotes("StopContainer", d.Notes)
	p.commitOrKeep(d.Model)
	if v := p.ctrs[ctr.GetId()]; v != nil {
		// Nothing runs any more; a send in flight must not record otherwise.
		v.forget()
	}
	return p.replyUpdates(d.Others, ctr.GetId()), nil
}

// RemoveContainer forgets a container; if its stop was never seen, its
// CPUs go back to the shared containers through an unsolicited update.
func (p *Plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (err error) {
	defer recoverInto(&err, "RemoveContainer", p.log)
	defer p.metrics.observeEvent("RemoveContainer", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event()
	d := p.policy.RemoveContainer(p.model, p.limits.container(podFromNRI(pod), ctr, p.log))
	p.logNotes("RemoveContainer", d.Notes)
	p.commitOrKeep(d.Model)
	p.forgetContainersNotIn(d.Model)
	p.markPending(d.Others)
	return nil
}

// Shutdown is logged; Run reconnects when the runtime comes back.
func (p *Plugin) Shutdown(_ context.Context) {
	p.log.Info("runtime is shutting down")
}
