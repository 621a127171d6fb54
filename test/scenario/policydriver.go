package scenario

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// PolicyDriver runs scenarios against the policy alone, with a model of the
// runtime in between: each decision's updates are applied one at a time in
// the order containerd applies them (other containers first, the target
// last; a shrink's deferred growth after the runtime's confirmation), and
// after every single applied update the runtime's cpusets are checked with
// policy.CheckApplied; after every decision the model is checked with
// Policy.CheckInvariants.
type PolicyDriver struct {
	Policy *policy.Policy
	Model  *policy.Model
	// Applied is the runtime: container id → cpuset it runs on.
	Applied map[string]cpuset.CPUSet

	ids       map[state.ContainerRef]string
	resources map[string]state.Resources
	next      int
}

// NewPolicyDriver returns a driver over pol with an empty node.
func NewPolicyDriver(pol *policy.Policy) *PolicyDriver {
	return &PolicyDriver{
		Policy:    pol,
		Model:     policy.NewModel(pol.NewState()),
		Applied:   map[string]cpuset.CPUSet{},
		ids:       map[state.ContainerRef]string{},
		resources: map[string]state.Resources{},
	}
}

func (d *PolicyDriver) id(pod policy.Pod, name string) (string, bool) {
	id, ok := d.ids[state.ContainerRef{PodUID: pod.UID, Name: name}]
	return id, ok
}

// apply plays a decision the way containerd does and checks every step.
func (d *PolicyDriver) apply(dec policy.Decision) error {
	old := d.Model
	exclusive := func(id string) bool { return old.Owns(id) || dec.Model.Owns(id) }
	for _, u := range dec.Others {
		if err := d.applyOne(u, dec.Model, exclusive); err != nil {
			return err
		}
	}
	if dec.Target != nil {
		if err := d.applyOne(*dec.Target, dec.Model, exclusive); err != nil {
			return err
		}
	}
	d.Model = dec.Model
	return d.Policy.CheckInvariants(d.Model)
}

func (d *PolicyDriver) applyOne(u policy.Update, next *policy.Model, exclusive func(string) bool) error {
	if t := next.Containers[u.ContainerID]; t == nil || t.Stopped {
		// The runtime ignores updates of containers that are gone.
		return nil
	}
	d.Applied[u.ContainerID] = u.CPUs
	if err := policy.CheckApplied(d.Applied, exclusive); err != nil {
		return fmt.Errorf("after applying %s to %s: %w", u.CPUs, u.Display, err)
	}
	return nil
}

// CreateContainer implements Driver.
func (d *PolicyDriver) CreateContainer(pod policy.Pod, name string, r state.Resources) error {
	d.next++
	id := fmt.Sprintf("ctr-%03d-%s", d.next, name)
	dec, err := d.Policy.CreateContainer(d.Model, policy.Container{ID: id, Name: name, Pod: pod, Resources: r})
	if err != nil {
		return err
	}
	d.ids[state.ContainerRef{PodUID: pod.UID, Name: name}] = id
	d.resources[id] = r
	return d.apply(dec)
}

// UpdateContainer implements Driver: a resize, confirmed by the runtime
// right after it is applied (PostUpdateContainer).
func (d *PolicyDriver) UpdateContainer(pod policy.Pod, name string, r state.Resources) error {
	id, ok := d.id(pod, name)
	if !ok {
		return fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	c := policy.Container{ID: id, Name: name, Pod: pod, Resources: d.resources[id], CPUs: d.Applied[id]}
	dec, err := d.Policy.UpdateContainer(d.Model, c, r)
	if err != nil {
		return err
	}
	if err := d.apply(dec); err != nil {
		return err
	}
	d.resources[id] = policy.MergeResources(d.resources[id], r)
	return d.apply(d.Policy.Confirm(d.Model, id))
}

// StopContainer implements Driver.
func (d *PolicyDriver) StopContainer(pod policy.Pod, name string) error {
	id, ok := d.id(pod, name)
	if !ok {
		return fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	delete(d.Applied, id)
	return d.apply(d.Policy.StopContainer(d.Model, id))
}

// RemoveContainer implements Driver.
func (d *PolicyDriver) RemoveContainer(pod policy.Pod, name string) error {
	id, ok := d.id(pod, name)
	if !ok {
		return fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	delete(d.Applied, id)
	delete(d.ids, state.ContainerRef{PodUID: pod.UID, Name: name})
	return d.apply(d.Policy.RemoveContainer(d.Model, id))
}

// RemovePod implements Driver.
func (d *PolicyDriver) RemovePod(pod policy.Pod) error {
	for ref, id := range d.ids {
		if ref.PodUID == pod.UID {
			delete(d.Applied, id)
			delete(d.ids, ref)
		}
	}
	return d.apply(d.Policy.RemovePodSandbox(d.Model, pod.UID))
}

// UpdatePod implements Driver.
func (d *PolicyDriver) UpdatePod(pod policy.Pod, r state.PodResources) error {
	return d.apply(d.Policy.UpdatePodSandbox(d.Model, pod, r))
}

// ContainerCPUs implements Driver.
func (d *PolicyDriver) ContainerCPUs(pod policy.Pod, name string) (cpuset.CPUSet, bool) {
	id, ok := d.id(pod, name)
	if !ok {
		return cpuset.New(), false
	}
	cpus, ok := d.Applied[id]
	return cpus, ok
}

// State implements Driver.
func (d *PolicyDriver) State() *state.State { return d.Model.State }

// NUMANodesOf implements Driver.
func (d *PolicyDriver) NUMANodesOf(cpus cpuset.CPUSet) int {
	return d.Policy.Allocator().Topology().NUMANodesOf(cpus).Count()
}
