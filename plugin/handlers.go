package plugin

import (
	"context"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The handlers translate NRI into policy calls and decisions into NRI
// replies. Each one takes the plugin's lock, records the event in the
// ledger, converts the payload (convert.go), asks the policy, commits the
// decision (commit.go), records what it hands the runtime, reports the
// outcome (report.go) and replies. Synchronize is in sync.go.

// Configure logs which runtime the plugin talks to and disarms the
// connection's watchdog (connect.go). The zero event mask subscribes the
// plugin to every event it has a handler for.
func (p *Plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	if s := p.configured.Load(); s != nil {
		s.fire()
	}
	p.log.WithFields(logrus.Fields{"runtime": runtime, "version": version}).Info("connected to NRI")
	return 0, nil
}

// RunPodSandbox remembers the pod and its new sandbox, which replaces
// any other of the pod (a re-created sandbox keeps the pod's CPUs).
func (p *Plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) (err error) {
	defer recoverInto(&err, "RunPodSandbox", p.log)
	defer p.metrics.observeEvent("RunPodSandbox", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	if d := p.policy.RunPodSandbox(p.model, p.rememberPod(pod)); d.Model != p.model {
		p.apply("RunPodSandbox", d)
	}
	return nil
}

// UpdatePodSandbox admits a pod's new pod-level resources (CRI
// UpdatePodSandboxResources, which the kubelet sends before it writes the
// pod's cgroup for a resize, and after which it stops the resize on an
// error). Accepted resources are checkpointed (the runtime keeps only the
// creation values), and the pod's containers are marked due for a cgroup
// read at PostUpdatePodSandbox. A refusal changes nothing.
func (p *Plugin) UpdatePodSandbox(_ context.Context, pod *api.PodSandbox, overhead, resources *api.LinuxResources) (err error) {
	defer recoverInto(&err, "UpdatePodSandbox", p.log)
	defer p.metrics.observeEvent("UpdatePodSandbox", time.Now())
	res := podResourcesFromNRI(overhead, resources)
	spec := p.podSpec(podFromNRI(pod).UID, policy.CPULimitMilli(res.Resources))
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	pp := p.rememberPod(pod)
	log := p.podLog(pp)
	if p.debugging() {
		log.WithFields(logrus.Fields{"resources": describeNRI(resources), "overhead": describeNRI(overhead), "spec": spec != nil}).Debug("UpdatePodSandbox request")
	}
	d, err := p.decide(func(m *policy.Model) (policy.Decision, error) {
		return p.policy.UpdatePodSandboxWithSpec(m, pp, res, spec)
	})
	if err == nil {
		err = p.commit(d.Model)
	}
	p.reportPodUpdate(log, pp, res, d, err)
	if err != nil {
		return err
	}
	p.markPodDue(pp.UID) // read again at PostUpdatePodSandbox
	p.markPending(d.Others)
	return nil
}

// PostUpdatePodSandbox triggers a verification of the cpusets.
func (p *Plugin) PostUpdatePodSandbox(_ context.Context, _ *api.PodSandbox) error {
	p.mu.Lock()
	p.ledger.event()
	p.mu.Unlock()
	p.requestVerify()
	return nil
}

// StopPodSandbox records that the pod's sandbox stopped: its CPUs stay
// its own until it is removed, ends, or (nothing of it running, and no
// new sandbox following) the orphan timeout passes.
func (p *Plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) (err error) {
	defer recoverInto(&err, "StopPodSandbox", p.log)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	if d := p.policy.StopPodSandbox(p.model, podFromNRI(pod)); d.Model != p.model {
		p.setModel(d.Model)
	}
	return nil
}

// RemovePodSandbox forgets the pod and anything of it still known; the
// shared containers grow into its CPUs.
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) (err error) {
	defer recoverInto(&err, "RemovePodSandbox", p.log)
	defer p.metrics.observeEvent("RemovePodSandbox", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	delete(p.pods, pod.GetId())
	p.metrics.podRemoved(podFromNRI(pod).UID)
	p.apply("RemovePodSandbox", p.policy.RemovePodSandbox(p.model, podFromNRI(pod)))
	return nil
}

// CreateContainer gives a new container its cpuset: exclusive CPUs (and the
// shrink of the shared containers, applied by the runtime first) or the
// shared pool. A refusal fails the creation and changes nothing.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (adj *api.ContainerAdjustment, updates []*api.ContainerUpdate, err error) {
	defer recoverInto(&err, "CreateContainer", p.log)
	defer p.metrics.observeEvent("CreateContainer", time.Now())
	info := p.withPodInfo(podFromNRI(pod)) // (the API's cache, outside the lock)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	c := p.containerFromNRI(p.rememberPod(pod).WithInfo(policy.PodInfo{Roles: info.Roles, GuaranteedCPUs: info.GuaranteedCPUs}), ctr)
	log := p.containerLog(c)
	if p.debugging() {
		log.WithField("resources", describeNRI(ctr.GetLinux().GetResources())).Debug("CreateContainer request")
	}
	d, err := p.decide(func(m *policy.Model) (policy.Decision, error) { return p.policy.CreateContainer(m, c) })
	if err == nil {
		err = p.commit(d.Model)
	}
	if err != nil {
		p.refused("CreateContainer", log, c.Pod, refusalKey{container: c.Name, requested: policy.PodResources{Resources: c.Resources}}, err)
		return nil, nil, err
	}
	p.accepted(c.Pod.UID, c.Name)
	p.ledger.view(c.ID).cgroupPath = bounded(ctr.GetLinux().GetCgroupsPath(), maxPathLen)
	p.ledger.handed(*d.Target, handedInSpec)
	updates = p.reply(d.Others, c.ID)
	p.reportCreation(log, c, d, len(updates))
	return adjustmentFor(d.Target), updates, nil
}

// PostCreateContainer triggers a verification of the other containers'
// cpusets, which the runtime updated before creating this one.
func (p *Plugin) PostCreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) error {
	p.mu.Lock()
	p.ledger.event()
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
	p.ledger.event()
	id := ctr.GetId()
	if v := p.ledger.views[id]; v != nil && v.start() {
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
	spec := p.resizeSpec(pod, ctr, boundedResources(res, nil)) // (may wait for the API, outside the lock)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	c := p.containerFromNRI(p.rememberPod(pod), ctr)
	log := p.containerLog(c)
	if p.debugging() {
		log.WithFields(logrus.Fields{"current": describeNRI(ctr.GetLinux().GetResources()), "requested": describeNRI(res), "spec": spec != nil}).Debug("UpdateContainer request")
	}
	requested := boundedResources(res, log)
	d, err := p.decide(func(m *policy.Model) (policy.Decision, error) {
		return p.policy.UpdateContainerWithSpec(m, c, requested, spec)
	})
	if err == nil {
		err = p.commit(d.Model)
	}
	p.reportResize(log, c, requested, d, err)
	if err != nil {
		return nil, err
	}
	updates = p.reply(d.Others, c.ID)
	if d.Target != nil {
		p.ledger.handed(*d.Target, handedAsTarget) // the reply carries it: no longer pending
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
	p.ledger.event()
	if v := p.ledger.views[ctr.GetId()]; v != nil && !v.inFlight {
		v.confirm() // the runtime applied the resize's target
	}
	p.confirm(ctr.GetId())
	p.requestVerify()
	return nil
}

// StopContainer records that a container's process is gone. Its pod keeps
// its CPUs for its restart; CPUs of an unconfirmed shrink join the shared
// pool, which grows in the reply.
func (p *Plugin) StopContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (updates []*api.ContainerUpdate, err error) {
	defer recoverInto(&err, "StopContainer", p.log)
	defer p.metrics.observeEvent("StopContainer", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	d := p.policy.StopContainer(p.model, p.limits.container(podFromNRI(pod), ctr, p.log))
	p.logNotes("StopContainer", d.Notes)
	p.commitOrKeep(d.Model)
	p.ledger.stopped(ctr.GetId())
	return p.reply(d.Others, ctr.GetId()), nil
}

// RemoveContainer forgets a container; the removal of its pod's last one
// gives the pod's CPUs back, and the shared containers grow into them
// through an unsolicited update.
func (p *Plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (err error) {
	defer recoverInto(&err, "RemoveContainer", p.log)
	defer p.metrics.observeEvent("RemoveContainer", time.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	p.apply("RemoveContainer", p.policy.RemoveContainer(p.model, p.limits.container(podFromNRI(pod), ctr, p.log)))
	return nil
}

// Shutdown is logged; Run reconnects when the runtime comes back.
func (p *Plugin) Shutdown(_ context.Context) {
	p.log.Info("runtime is shutting down")
}

// rememberPod records a sandbox and returns the policy's view of it.
func (p *Plugin) rememberPod(pod *api.PodSandbox) policy.Pod {
	pp := podFromNRI(pod)
	if id := bounded(pod.GetId(), maxIDLen); id != "" {
		p.pods[id] = pp
	}
	return pp
}

// markPodDue marks a pod's containers for a cgroup read at the next
// verification.
func (p *Plugin) markPodDue(podUID string) {
	for id, t := range p.model.Containers {
		if v := p.ledger.views[id]; v != nil && t.PodUID == podUID {
			v.due = true
		}
	}
}
