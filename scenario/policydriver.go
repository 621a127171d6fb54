package scenario

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// PolicyDriver runs scenarios against the policy alone, with a model of the
// runtime in between: each decision's updates are applied one at a time in
// the order containerd applies them (other containers first, the target
// last; a shrink's deferred growth after the runtime's confirmation), and
// after every single applied update the runtime's cpusets are checked with
// policy.CheckApplied; after every decision the model is checked with
// Policy.CheckInvariants, the model the decision was given is checked to be
// unchanged, and a shrink's confirmation is checked to send exactly the
// updates the shrink announced as deferred.
type PolicyDriver struct {
	Policy *policy.Policy
	Model  *policy.Model
	// Applied is the runtime: container id → cpuset it runs on.
	Applied map[string]cpuset.CPUSet

	ids       map[state.ContainerRef]string
	resources map[string]policy.Resources
	next      int
}

// NewPolicyDriver returns a driver over pol with an empty node.
func NewPolicyDriver(pol *policy.Policy) *PolicyDriver {
	return &PolicyDriver{
		Policy:    pol,
		Model:     policy.NewModel(pol.NewState()),
		Applied:   map[string]cpuset.CPUSet{},
		ids:       map[state.ContainerRef]string{},
		resources: map[string]policy.Resources{},
	}
}

func (d *PolicyDriver) id(pod policy.Pod, name string) (string, bool) {
	id, ok := d.ids[state.ContainerRef{PodUID: pod.UID, Name: name}]
	return id, ok
}

// fingerprint describes everything a model holds, to check that a
// decision did not change the model it was given (the policy shares
// records between a model and its clones, copy on write).
func fingerprint(m *policy.Model) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pool %s lending %s\n", m.State.DefaultCPUSet(), m.Lending)
	m.State.ForEach(func(ref state.ContainerRef, a state.Assignment) {
		fmt.Fprintf(&b, "%s %s %s\n", ref, a.Baseline, a.Resized)
	})
	refs := maps.Collect(m.State.ContainerRefs())
	for _, id := range slices.Sorted(maps.Keys(refs)) {
		fmt.Fprintf(&b, "id %s %s\n", id, refs[id])
	}
	pods := maps.Collect(m.State.AllPodResources())
	for _, uid := range slices.Sorted(maps.Keys(pods)) {
		fmt.Fprintf(&b, "pod %s %+v\n", uid, pods[uid])
	}
	for _, id := range m.SortedContainerIDs() {
		t := m.Containers.Get(id)
		fmt.Fprintf(&b, "tracked %s %v %s %v %dm\n", id, t.Exclusive, m.CPUsOf(id), t.Stopped, t.CPULimitMilli)
	}
	for _, id := range slices.Sorted(maps.Keys(m.Releasing)) {
		fmt.Fprintf(&b, "releasing %s %s\n", id, m.Releasing[id])
	}
	return b.String()
}

// decide runs a policy call and checks that it left the model it was given
// as it was, whatever the outcome.
func (d *PolicyDriver) decide(call func(m *policy.Model) (policy.Decision, error)) (policy.Decision, error) {
	given := d.Model
	before := fingerprint(given)
	dec, err := call(given)
	if after := fingerprint(given); after != before {
		return dec, fmt.Errorf("the decision changed the model it was given:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	return dec, err
}

// apply plays a decision the way containerd does and checks every step.
func (d *PolicyDriver) apply(dec policy.Decision) error {
	old := d.Model
	exclusive := func(id string) bool { return old.Owns(id) || dec.Model.Owns(id) }
	for _, u := range dec.Updates() {
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
	if got, want := d.Model.SharedPoolSize(), d.Model.SharedPool().Size(); got != want {
		return fmt.Errorf("SharedPoolSize says %d, the shared pool %s has %d", got, d.Model.SharedPool(), want)
	}
	// What the plugin re-sends for a container (Desired) must say its set too.
	for _, id := range d.Model.SortedContainerIDs() {
		if u, ok := d.Policy.Desired(d.Model, id); ok {
			if err := checkText(u); err != nil {
				return fmt.Errorf("re-sending: %w", err)
			}
		}
	}
	return d.Policy.CheckInvariants(d.Model)
}

func (d *PolicyDriver) applyOne(u policy.Update, next *policy.Model, exclusive func(string) bool) error {
	if t := next.Containers.Get(u.ContainerID); t == nil || t.Stopped {
		// The runtime ignores updates of containers that are gone.
		return nil
	}
	if err := checkText(u); err != nil {
		return err
	}
	d.Applied[u.ContainerID] = u.CPUSet()
	if err := policy.CheckApplied(d.Applied, exclusive); err != nil {
		return fmt.Errorf("after applying %s to %s: %w", u.CPUs, u.Display, err)
	}
	return nil
}

// checkText checks that an update's text, which the runtime applies, says
// the update's cpuset.
func checkText(u policy.Update) error {
	if sent, err := cpuset.Parse(u.List()); err != nil || !sent.Equals(u.CPUSet()) {
		return fmt.Errorf("the update of %s sends %q, not its cpuset %s", u.Display, u.List(), u.CPUs)
	}
	return nil
}

// applyInfallible runs a decision that cannot be refused and applies it.
func (d *PolicyDriver) applyInfallible(call func(m *policy.Model) policy.Decision) error {
	dec, err := d.decide(func(m *policy.Model) (policy.Decision, error) { return call(m), nil })
	if err != nil {
		return err
	}
	return d.apply(dec)
}

// CreateContainer implements Driver.
func (d *PolicyDriver) CreateContainer(pod policy.Pod, name string, r policy.Resources) error {
	return d.CreateContainerWithDevices(pod, name, r, nil)
}

// CreateContainerWithDevices implements DeviceDriver: the container's
// devices are on the given NUMA nodes, as the plugin would have found.
func (d *PolicyDriver) CreateContainerWithDevices(pod policy.Pod, name string, r policy.Resources, nodes []int) error {
	d.next++
	id := fmt.Sprintf("ctr-%03d-%s", d.next, name)
	dec, err := d.decide(func(m *policy.Model) (policy.Decision, error) {
		return d.Policy.CreateContainer(m, policy.Container{ID: id, Name: name, Pod: pod, Resources: r, DeviceNodes: cpuallocator.NewNodeMask(nodes...)})
	})
	if err != nil {
		return err
	}
	d.ids[state.ContainerRef{PodUID: pod.UID, Name: name}] = id
	d.resources[id] = r
	return d.apply(dec)
}

// UpdateContainer implements Driver: a resize, confirmed by the runtime
// right after it is applied (PostUpdateContainer).
func (d *PolicyDriver) UpdateContainer(pod policy.Pod, name string, r policy.Resources) error {
	id, ok := d.id(pod, name)
	if !ok {
		return fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	c := policy.Container{ID: id, Name: name, Pod: pod, Resources: d.resources[id], CPUs: d.Applied[id]}
	dec, err := d.decide(func(m *policy.Model) (policy.Decision, error) { return d.Policy.UpdateContainer(m, c, r) })
	if err != nil {
		return err
	}
	if err := d.apply(dec); err != nil {
		return err
	}
	d.resources[id] = policy.MergeResources(d.resources[id], r)
	confirmed, err := d.decide(func(m *policy.Model) (policy.Decision, error) { return d.Policy.Confirm(m, id), nil })
	if err != nil {
		return err
	}
	return d.apply(confirmed)
}

// RunPod implements Driver: the sandbox, and the pod's admission when its
// spec is known, as the plugin does at RunPodSandbox (a pod that is not
// admitted still runs its sandbox; its containers' creations are
// refused).
func (d *PolicyDriver) RunPod(pod policy.Pod) error {
	if err := d.applyInfallible(func(m *policy.Model) policy.Decision { return d.Policy.RunPodSandbox(m, pod) }); err != nil {
		return err
	}
	dec, err := d.decide(func(m *policy.Model) (policy.Decision, error) { return d.Policy.AdmitPod(m, pod) })
	if _, refused := policy.AsRefusal(err); refused {
		return nil
	}
	if err != nil {
		return err
	}
	return d.apply(dec)
}

// StopContainer implements Driver.
func (d *PolicyDriver) StopContainer(pod policy.Pod, name string, exitCode int32) error {
	id, ok := d.id(pod, name)
	if !ok {
		return fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	delete(d.Applied, id)
	return d.applyInfallible(func(m *policy.Model) policy.Decision {
		return d.Policy.StopContainer(m, policy.Container{ID: id, Name: name, Pod: pod, Exited: true, Completed: exitCode == 0})
	})
}

// RestartContainer implements Driver.
func (d *PolicyDriver) RestartContainer(pod policy.Pod, name string, r policy.Resources) error {
	old, ok := d.id(pod, name)
	if !ok {
		return fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	if err := d.StopContainer(pod, name, 137); err != nil {
		return err
	}
	if err := d.CreateContainer(pod, name, r); err != nil {
		return err
	}
	return d.applyInfallible(func(m *policy.Model) policy.Decision {
		return d.Policy.RemoveContainer(m, policy.Container{ID: old, Name: name, Pod: pod})
	})
}

// RemoveContainer implements Driver.
func (d *PolicyDriver) RemoveContainer(pod policy.Pod, name string) error {
	id, ok := d.id(pod, name)
	if !ok {
		return fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	delete(d.Applied, id)
	delete(d.ids, state.ContainerRef{PodUID: pod.UID, Name: name})
	return d.applyInfallible(func(m *policy.Model) policy.Decision {
		return d.Policy.RemoveContainer(m, policy.Container{ID: id, Name: name, Pod: pod})
	})
}

// RemovePod implements Driver.
func (d *PolicyDriver) RemovePod(pod policy.Pod) error {
	for ref, id := range d.ids {
		if ref.PodUID == pod.UID {
			delete(d.Applied, id)
			delete(d.ids, ref)
		}
	}
	return d.applyInfallible(func(m *policy.Model) policy.Decision { return d.Policy.RemovePodSandbox(m, pod) })
}

// UpdatePod implements Driver.
// A refusal must leave the model as it was.
func (d *PolicyDriver) UpdatePod(pod policy.Pod, r policy.PodResources) error {
	dec, err := d.decide(func(m *policy.Model) (policy.Decision, error) { return d.Policy.UpdatePodSandbox(m, pod, r) })
	if err != nil {
		return err
	}
	return d.apply(dec)
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
