package plugin

import (
	"context"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Synchronize reconciles the plugin with every pod and container the
// runtime has (on each connection) and returns the updates that make every
// container's cpuset what it should be.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	var updates []*api.ContainerUpdate
	epoch := p.link.current() // (before the lock, which a stalled handler may hold)
	o := p.handle("Synchronize", nil, func() outcome {
		updates = p.synchronize(epoch, pods, ctrs)
		return outcome{}
	})
	return updates, o.err
}

// synchronize is Synchronize with the lock held, on the connection of
// epoch.
func (p *Plugin) synchronize(epoch uint64, pods []*api.PodSandbox, ctrs []*api.Container) []*api.ContainerUpdate {
	policyPods := p.rememberPods(pods)
	containers := p.recordContainers(ctrs)
	start := p.startingModel(containers) // (may change the policy: first)
	d := p.policy.Synchronize(start, policyPods, containers)
	if was, ok := d.Model.State.ConfigRecord(); !ok || !sameRecord(was, p.record) {
		d.Model.State.SetConfigRecord(p.record) // (Synchronize's state is its own)
	}
	p.reporter.notes("Synchronize", d.Notes)
	updates := d.Updates()
	if !p.commitOrKeep(d.Model) || !p.handing() {
		// (The reply hands nothing that a model which was not kept
		// decided: the containers stay where they run.)
		updates = nil
	}
	for _, u := range updates {
		p.ledger.handed(u, handedInReply)
	}
	p.forgetGone()
	p.link.up(epoch)
	p.checkInvariants("Synchronize")
	p.log.WithFields(logrus.Fields{"pods": len(pods), "containers": len(ctrs), "updates": len(updates),
		"exclusive": p.model.State.ExclusiveCPUs().String(), "shared": p.model.SharedPool().String()}).Info("synchronized")
	return updatesToNRI(updates)
}

// rememberPods replaces the pods the plugin knows with the runtime's,
// with what the Kubernetes API says of their containers when it is
// watched (a read of its cache).
func (p *Plugin) rememberPods(pods []*api.PodSandbox) []policy.Pod {
	p.pods = map[string]policy.Pod{}
	out := make([]policy.Pod, 0, len(pods))
	for _, pod := range pods {
		pp := p.rememberPod(pod)
		pp = pp.WithInfo(p.podInfo(pp, 0))
		if pp.SandboxID != "" {
			p.pods[pp.SandboxID] = pp
		}
		out = append(out, pp)
	}
	return out
}

// recordContainers converts the runtime's containers and records in the
// ledger what each runs on, forgetting everything believed or pending
// before: the Synchronize's reply sends every container what it should
// run on.
func (p *Plugin) recordContainers(ctrs []*api.Container) []policy.Container {
	p.ledger.resync()
	containers := make([]policy.Container, 0, len(ctrs))
	for _, ctr := range ctrs {
		c := p.withDeviceNodes(p.containerFromNRI(p.pods[ctr.GetPodSandboxId()], ctr), ctr)
		containers = append(containers, c)
		if c.ID != "" {
			p.ledger.synced(c.ID, bounded(ctr.GetLinux().GetCgroupsPath(), maxPathLen),
				ctr.GetState() != api.ContainerState_CONTAINER_CREATED, c.Exited, maskOf(c.CPUs))
		}
	}
	return containers
}

// startingModel is the model the Synchronize starts from: the committed
// one, or at the first Synchronize of a plugin without a checkpoint, the
// kubelet's assignments when asked to import them.
func (p *Plugin) startingModel(containers []policy.Container) *policy.Model {
	if !p.importKubelet {
		return p.model
	}
	p.importKubelet = false
	m := p.importFromKubelet(p.model, containers)
	p.startOn(m.State)
	p.metrics.setPolicy(p.policy)
	return m
}
