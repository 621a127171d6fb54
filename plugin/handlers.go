package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The handlers translate NRI into policy calls and decisions into NRI
// replies. Each one runs through handle (handle.go: recover, timing,
// lock, ledger event, report): it converts the payload (convert.go), asks
// the policy and commits the decision (commit.go), records in the ledger
// what it hands the runtime, and returns the outcome the reporter tells
// (report.go); the reply is built from it. Synchronize is in sync.go.

// outcome is what one request came to: the event, whom it concerns, what
// was asked, the policy's decision and the error returned to the runtime
// (a refusal or a fault). The handlers make one; the reporter tells it.
type outcome struct {
	event string
	// log is the request's log entry (its pod and container).
	log *logrus.Entry
	pod policy.Pod
	// container is the container concerned; its Name is "" for a pod's
	// event.
	container policy.Container
	// requested is what was asked: a resize's resources, a pod update's.
	requested policy.PodResources
	decision  policy.Decision
	err       error
	// others counts the updates of other containers in the reply.
	others int
}

// handle runs one NRI request, every handler the same way: a panic turned
// into the request's error, its time measured; outside (if any) first,
// without the plugin's lock (it may wait for the Kubernetes API); then,
// with the lock held and the event recorded in the ledger, run decides,
// commits and says what came of it; the reporter tells the outcome.
func (p *Plugin) handle(event string, outside func(), run func() outcome) (o outcome) {
	defer p.metrics.observeEvent(event, time.Now())
	defer func() {
		if r := recover(); r != nil {
			p.log.WithField("event", event).Errorf("panic while handling the event: %v", r)
			o = outcome{event: event, err: &internalError{event: event, cause: r}}
		}
	}()
	if outside != nil {
		outside()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger.event()
	o = run()
	o.event = event
	p.reporter.report(o)
	if p.opts.ObserveOnly {
		o.err = nil // nothing is refused: the runtime goes on as without the plugin
	}
	return o
}

// internalError is a handler's panic, turned into the request's error.
type internalError struct {
	event string
	cause any
}

func (e *internalError) Error() string {
	return fmt.Sprintf("nri-cpumanager: internal error while handling %s: %v", e.event, e.cause)
}

// handing reports whether the plugin hands the runtime what it decides
// (not ObserveOnly).
func (p *Plugin) handing() bool { return !p.opts.ObserveOnly }

// Configure logs which runtime the plugin talks to, records it in the
// metrics (runtime_info) and hands it to Options.OnConfigure, and
// disarms the connection's watchdog (connect.go). The zero event mask
// subscribes the plugin to every event it has a handler for.
func (p *Plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	if s := p.configured.Load(); s != nil {
		s.fire()
	}
	p.log.WithFields(logrus.Fields{"runtime": runtime, "version": version}).Info("connected to NRI")
	p.opts.Metrics.setRuntime(runtime, version)
	if p.opts.OnConfigure != nil {
		p.opts.OnConfigure(runtime, version)
	}
	return 0, nil
}

// RunPodSandbox remembers the pod and its new sandbox, which replaces
// any other of the pod (a re-created sandbox keeps the pod's CPUs), and
// admits the pod when its spec is known (the Kubernetes API): every
// container's exclusive CPUs decided at once, as the kubelet's admission
// does (policy.AdmitPod); the shared containers shrink through an
// unsolicited update. A pod that cannot be admitted is reported, and its
// containers' creations are refused until it fits; the sandbox itself is
// never refused.
func (p *Plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	var info policy.PodInfo
	outside := func() { nri := podFromNRI(pod); info = p.podInfo(nri, admissionWait(nri)) }
	o := p.handle("RunPodSandbox", outside, func() outcome {
		pp := p.rememberPod(pod).WithInfo(info)
		if d := p.policy.RunPodSandbox(p.model, pp); d.Model != p.model {
			p.apply("RunPodSandbox", d)
		}
		o := outcome{log: p.podLog(pp), pod: pp}
		if pp.Containers == nil || p.model.Admitted(pp) {
			return o
		}
		o = p.decideAndCommit(o, func(m *policy.Model) (policy.Decision, error) { return p.policy.AdmitPod(m, pp) })
		if o.err == nil && p.handing() {
			p.markPending(o.decision.Updates())
		}
		return o
	})
	if _, internal := o.err.(*internalError); internal {
		return o.err
	}
	return nil // a pod not admitted still runs its sandbox: its containers are refused
}

// UpdatePodSandbox admits a pod's new pod-level resources (CRI
// UpdatePodSandboxResources, which the kubelet sends before it writes the
// pod's cgroup for a resize, and after which it stops the resize on an
// error). Accepted resources are checkpointed (the runtime keeps only the
// creation values), and the pod's containers are marked due for a cgroup
// read at PostUpdatePodSandbox. A refusal changes nothing.
func (p *Plugin) UpdatePodSandbox(_ context.Context, pod *api.PodSandbox, overhead, resources *api.LinuxResources) error {
	var res policy.PodResources
	var spec policy.PodSpec
	var info policy.PodInfo
	outside := func() {
		res = podResourcesFromNRI(overhead, resources)
		spec = p.podSpec(podFromNRI(pod).UID, policy.CPULimitMilli(res.Resources))
		info = p.podInfo(podFromNRI(pod), 0) // (the API's cache)
	}
	return p.handle("UpdatePodSandbox", outside, func() outcome {
		pp := p.rememberPod(pod).WithInfo(info)
		o := outcome{log: p.podLog(pp), pod: pp, requested: res}
		if p.debugging() {
			o.log.WithFields(logrus.Fields{"resources": describeNRI(resources), "overhead": describeNRI(overhead), "spec": spec != nil}).Debug("UpdatePodSandbox request")
		}
		o = p.decideAndCommit(o, func(m *policy.Model) (policy.Decision, error) {
			return p.policy.UpdatePodSandboxWithSpec(m, pp, res, spec)
		})
		if o.err == nil {
			p.markPodDue(pp.UID) // read again at PostUpdatePodSandbox
			p.markPending(o.decision.Updates())
			if p.opts.API != nil && spec == nil {
				p.specLagged[pp.UID] = true
			} else {
				delete(p.specLagged, pp.UID)
			}
		}
		return o
	}).err
}

// PostUpdatePodSandbox triggers a verification of the cpusets.
func (p *Plugin) PostUpdatePodSandbox(_ context.Context, _ *api.PodSandbox) error {
	defer p.requestVerify()
	return p.handle("PostUpdatePodSandbox", nil, func() outcome { return outcome{} }).err
}

// StopPodSandbox records that the pod's sandbox stopped: its CPUs stay
// its own until it is removed, ends, or (nothing of it running, and no
// new sandbox following) the orphan timeout passes.
func (p *Plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	return p.handle("StopPodSandbox", nil, func() outcome {
		if d := p.policy.StopPodSandbox(p.model, podFromNRI(pod)); d.Model != p.model {
			p.setModel(d.Model)
		}
		return outcome{}
	}).err
}

// RemovePodSandbox forgets the pod and anything of it still known; the
// shared containers grow into its CPUs.
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	return p.handle("RemovePodSandbox", nil, func() outcome {
		pp := podFromNRI(pod)
		delete(p.pods, pod.GetId())
		p.reporter.refusals.podRemoved(pp.UID)
		p.apply("RemovePodSandbox", p.policy.RemovePodSandbox(p.model, pp))
		return outcome{}
	}).err
}

// CreateContainer gives a new container its cpuset: exclusive CPUs (and the
// shrink of the shared containers, applied by the runtime first) or the
// shared pool. A refusal fails the creation and changes nothing.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	var info policy.PodInfo
	var updates []*api.ContainerUpdate
	outside := func() { info = p.podInfo(podFromNRI(pod), 0) } // (the API's cache)
	o := p.handle("CreateContainer", outside, func() outcome {
		c := p.containerFromNRI(p.rememberPod(pod).WithInfo(info), ctr)
		c = p.withDeviceNodes(c, ctr)
		o := outcome{log: p.containerLog(c), pod: c.Pod, container: c, requested: policy.PodResources{Resources: c.Resources}}
		if p.debugging() {
			o.log.WithField("resources", describeNRI(ctr.GetLinux().GetResources())).Debug("CreateContainer request")
		}
		o = p.decideAndCommit(o, func(m *policy.Model) (policy.Decision, error) { return p.policy.CreateContainer(m, c) })
		if o.err != nil || !p.handing() {
			return o
		}
		p.ledger.created(*o.decision.Target, bounded(ctr.GetLinux().GetCgroupsPath(), maxPathLen))
		updates = updatesToNRI(p.ledger.reply(o, p.desired))
		o.others = len(updates)
		return o
	})
	if o.err != nil || !p.handing() {
		return nil, nil, o.err
	}
	return adjustmentFor(o.decision.Target), updates, nil
}

// PostCreateContainer triggers a verification of the other containers'
// cpusets, which the runtime updated before creating this one.
func (p *Plugin) PostCreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) error {
	defer p.requestVerify()
	return p.handle("PostCreateContainer", nil, func() outcome { return outcome{} }).err
}

// PostStartContainer sends a started container its cpuset again when one
// was handed to it while the runtime was starting it: containerd applies
// an update of a container that is not running yet to its spec only,
// which the task being started may have read already.
func (p *Plugin) PostStartContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	return p.handle("PostStartContainer", nil, func() outcome {
		id := ctr.GetId()
		if p.ledger.started(id) && p.handing() {
			p.setPending(id)
			if p.debugging() {
				p.log.WithField("container", id).Debug("cpuset handed while the container started; sending it again")
			}
		}
		return outcome{}
	}).err
}

// UpdateContainer decides a resize (KEP-5554). A growth returns the shrink
// of the shared containers with the target's larger cpuset (the runtime
// applies the target last); a shrink returns only the target's smaller
// cpuset: the shared containers grow once PostUpdateContainer confirms it.
// A refusal is returned as the error the kubelet shows the user.
func (p *Plugin) UpdateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	var spec policy.PodSpec
	var info policy.PodInfo
	var updates []*api.ContainerUpdate
	outside := func() {
		spec = p.resizeSpec(pod, ctr, boundedResources(res, nil)) // (may wait for the API)
		info = p.podInfo(podFromNRI(pod), 0)
	}
	o := p.handle("UpdateContainer", outside, func() outcome {
		c := p.containerFromNRI(p.rememberPod(pod).WithInfo(info), ctr)
		o := outcome{log: p.containerLog(c), pod: c.Pod, container: c}
		if p.debugging() {
			o.log.WithFields(logrus.Fields{"current": describeNRI(ctr.GetLinux().GetResources()), "requested": describeNRI(res), "spec": spec != nil}).Debug("UpdateContainer request")
		}
		requested := boundedResources(res, o.log)
		o.requested = policy.PodResources{Resources: requested}
		o = p.decideAndCommit(o, func(m *policy.Model) (policy.Decision, error) {
			return p.policy.UpdateContainerWithSpec(m, c, requested, spec)
		})
		if o.err == nil && spec != nil {
			p.resized[c.ID] = resizedWith{pod: c.Pod, spec: spec}
		}
		if o.err != nil || !p.handing() {
			return o
		}
		updates = updatesToNRI(p.ledger.reply(o, p.desired))
		if t := o.decision.Target; t != nil {
			p.ledger.handed(*t, handedAsTarget) // the reply carries it: no longer pending
			updates = append(updates, updateToNRI(*t))
		}
		return o
	})
	if o.err != nil {
		return nil, o.err
	}
	return updates, nil
}

// PostUpdateContainer confirms a container's update: CPUs its shrink
// released join the shared pool, and the shared containers grow into them
// through an unsolicited update sent from a goroutine.
func (p *Plugin) PostUpdateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	defer p.requestVerify()
	return p.handle("PostUpdateContainer", nil, func() outcome {
		p.ledger.confirmApplied(ctr.GetId()) // the runtime applied the resize's target
		p.confirm(ctr.GetId())
		return outcome{}
	}).err
}

// StopContainer records that a container's process is gone. Its pod keeps
// its CPUs for its restart; CPUs of an unconfirmed shrink join the shared
// pool, which grows in the reply.
func (p *Plugin) StopContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	var updates []*api.ContainerUpdate
	o := p.handle("StopContainer", nil, func() outcome {
		c := p.limits.container(podFromNRI(pod), ctr, p.log)
		o := outcome{pod: c.Pod, container: c, decision: p.policy.StopContainer(p.model, c)}
		p.reporter.notes("StopContainer", o.decision.Notes)
		p.commitOrKeep(o.decision.Model)
		p.ledger.stopped(c.ID)
		if p.handing() {
			updates = updatesToNRI(p.ledger.reply(o, p.desired))
		}
		return o
	})
	return updates, o.err
}

// RemoveContainer forgets a container; the removal of its pod's last one
// gives the pod's CPUs back, and the shared containers grow into them
// through an unsolicited update.
func (p *Plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return p.handle("RemoveContainer", nil, func() outcome {
		p.apply("RemoveContainer", p.policy.RemoveContainer(p.model, p.limits.container(podFromNRI(pod), ctr, p.log)))
		return outcome{}
	}).err
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
	for id, t := range p.model.Containers.All() {
		if t.PodUID == podUID {
			p.ledger.markDue(id)
		}
	}
}
