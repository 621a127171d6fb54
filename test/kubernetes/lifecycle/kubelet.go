package lifecycle

import (
	"fmt"
	"maps"
	"slices"

	"github.com/go-logr/logr"
	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
	kubelifecycle "k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/kubernetes/placement"
)

// Kubelet is the kubelet v1.36.3's CPU management as it drives a pod's
// life: its topology manager (topologymanager.NewManager with the node's
// policy and scope) admits a pod, with the static CPU manager policy as
// its hint provider, which allocates every init and app container in the
// spec's order (per container in the container scope, with the pod's
// affinity in the pod scope); nothing happens at a container's restart or
// a sandbox's re-creation (the entries stay); removeStaleState drops the
// entries of pods no longer active (terminal or deleted). Its state is in
// memory and survives what the kubelet's checkpoint survives: a restart
// of the kubelet or of the node, after which the kubelet admits its pods
// again (Restart).
//
// The oracle writes the plugin's CPUs into its state once they are a
// choice the kubelet could have made (SetEntry), so that both compare CPU
// for CPU; Rebuild then restarts the static policy on that state, so that
// its private cpusToReuse follows.
type Kubelet struct {
	cfg     Config
	topo    *topology.CPUTopology
	info    *cadvisorapi.MachineInfo
	manager topologymanager.Manager
	hints   *placement.CPUProvider
	state   state.State
	// active are the pods the kubelet runs, as it admitted them (their
	// containers' CPUs as allocated), in the order it admitted them.
	active map[types.UID]*v1.Pod
	order  []types.UID
}

// NewKubelet starts the kubelet's CPU management for cfg on the machine
// topo (info: as cadvisor reports it, for the topology manager).
func NewKubelet(cfg Config, topo *topology.CPUTopology, info *cadvisorapi.MachineInfo) (*Kubelet, error) {
	k := &Kubelet{cfg: cfg, topo: topo, info: info, state: state.NewMemoryState(logr.Discard()), active: map[types.UID]*v1.Pod{}}
	if err := k.start(); err != nil {
		return nil, err
	}
	return k, nil
}

// start builds the topology manager and the static policy on the state,
// as the kubelet's container manager does at its start.
func (k *Kubelet) start() error {
	tm, err := topologymanager.NewManager(k.info.Topology, k.cfg.TopologyPolicy, k.cfg.TopologyScope, nil)
	if err != nil {
		return fmt.Errorf("the kubelet's topology manager: %w", err)
	}
	p, err := k.newPolicy(tm)
	if err != nil {
		return err
	}
	k.manager = tm
	k.hints = &placement.CPUProvider{Policy: p, State: k.state}
	tm.AddHintProvider(logr.Discard(), k.hints)
	return nil
}

// newPolicy starts a static policy on the kubelet's state with store as
// its topology manager.
func (k *Kubelet) newPolicy(store topologymanager.Store) (cpumanager.Policy, error) {
	p, err := cpumanager.NewStaticPolicy(logr.Discard(), k.topo, k.cfg.Reserved.Size(), k.cfg.Reserved, store, k.cfg.Options)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's static policy: %w", err)
	}
	if err := p.Start(logr.Discard(), k.state); err != nil {
		return nil, fmt.Errorf("starting the kubelet's static policy: %w", err)
	}
	return p, nil
}

// Admission is the kubelet's answer to a pod.
type Admission struct {
	Admitted bool
	// Reason and Message are the kubelet's (the pod's status when it
	// refuses).
	Reason, Message string
}

// Admit admits a pod through the topology manager (which calls the static
// policy's Allocate), or refuses it: the kubelet fails the pod; the
// entries of the containers allocated before the refusal go at the next
// removeStaleState, done here at once.
func (k *Kubelet) Admit(pod *v1.Pod) Admission {
	k.Reconcile()
	res := k.manager.Admit(&kubelifecycle.PodAdmitAttributes{Pod: pod})
	if !res.Admit {
		k.Reconcile()
		return Admission{Reason: res.Reason, Message: res.Message}
	}
	k.active[pod.UID] = pod
	k.order = append(k.order, pod.UID)
	return Admission{Admitted: true}
}

// Affinity returns the NUMA affinity the topology manager gave a
// container (nil: none, policy none).
func (k *Kubelet) Affinity(uid types.UID, name string) bitmask.BitMask {
	return k.manager.GetAffinity(string(uid), name).NUMANodeAffinity
}

// Restart is a restart of the kubelet (alone, or with the node): its CPU
// manager and topology manager start again on the state its checkpoint
// kept, it admits its active pods again in the order it admitted them —
// as they are allocated (each container with the CPUs its entry holds),
// so that the static policy finds every one "already present in state"
// and the topology manager regenerates its hints from them — and
// removeStaleState runs. It returns the pods the kubelet no longer admits,
// with its reasons, but those keep says it keeps (the oracle's rules).
func (k *Kubelet) Restart(keep func(uid types.UID, reason, message string) bool) ([]string, error) {
	if err := k.start(); err != nil {
		return nil, err
	}
	var refused []string
	order := slices.Clone(k.order)
	k.order = nil
	for _, uid := range order {
		pod := k.active[uid]
		if pod == nil {
			continue
		}
		pod = k.allocated(pod)
		if res := k.manager.Admit(&kubelifecycle.PodAdmitAttributes{Pod: pod}); !res.Admit && !keep(uid, res.Reason, res.Message) {
			delete(k.active, uid)
			refused = append(refused, fmt.Sprintf("%s (%s: %s)", uid, res.Reason, res.Message))
			continue
		}
		k.active[uid] = pod
		k.order = append(k.order, uid)
	}
	k.Reconcile()
	return refused, nil
}

// allocated returns pod with each pinned container's CPUs as its entry
// holds them (the kubelet admits a pod again with its allocated
// resources; a resize KEP-5554 applied changed them).
func (k *Kubelet) allocated(pod *v1.Pod) *v1.Pod {
	out := pod.DeepCopy()
	for _, cs := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			if cpus, ok := k.Entry(pod.UID, cs[i].Name); ok {
				setCPUs(&cs[i], int64(cpus.Size())*1000)
			}
		}
	}
	return out
}

// Rebuild restarts the static policy on the current state (as a restart
// of the kubelet would, without re-admitting through the topology
// manager): NewStaticPolicy, Start, then Allocate of every active pod's
// containers in spec order, which finds each "already present in state"
// and sets the policy's private cpusToReuse as its allocations would have
// (updateCPUsToReuse). Called after the oracle wrote CPUs into the state.
func (k *Kubelet) Rebuild() error {
	p, err := k.newPolicy(k.manager)
	if err != nil {
		return err
	}
	for _, uid := range k.order {
		pod := k.allocated(k.active[uid])
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			if _, ok := k.Entry(uid, c.Name); ok {
				_ = p.Allocate(logr.Discard(), k.state, pod, &c)
			}
		}
	}
	k.hints.Policy = p
	return nil
}

// End makes a pod inactive (terminal, or deleted) and reconciles.
func (k *Kubelet) End(uid types.UID) {
	delete(k.active, uid)
	k.order = slices.DeleteFunc(k.order, func(u types.UID) bool { return u == uid })
	k.Reconcile()
}

// Active reports whether the kubelet runs a pod.
func (k *Kubelet) Active(uid types.UID) bool { return k.active[uid] != nil }

// Reconcile is the CPU manager's removeStaleState: the entries of pods no
// longer active, and of names their spec no longer has, go.
func (k *Kubelet) Reconcile() {
	for uid, containers := range k.state.GetCPUAssignments() {
		pod := k.active[types.UID(uid)]
		for name := range containers {
			if pod != nil && inSpec(pod, name) {
				continue
			}
			_ = k.hints.Policy.RemoveContainer(logr.Discard(), k.state, uid, name)
		}
	}
	// (RemoveContainer gives back the CPUs no sibling holds; entries the
	// oracle left on CPUs another pod's entry holds too stay out.)
	k.recomputePool()
}

// inSpec reports whether a pod's spec names container name.
func inSpec(pod *v1.Pod, name string) bool {
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if c.Name == name {
			return true
		}
	}
	return false
}

// Entry returns a container's exclusive CPUs, if it has any.
func (k *Kubelet) Entry(uid types.UID, name string) (cpuset.CPUSet, bool) {
	return k.state.GetCPUSet(string(uid), name)
}

// Entries returns a pod's entries by container name.
func (k *Kubelet) Entries(uid types.UID) map[string]cpuset.CPUSet {
	return maps.Clone(k.state.GetCPUAssignments()[string(uid)])
}

// Pool returns the shared pool (the default CPU set).
func (k *Kubelet) Pool() cpuset.CPUSet { return k.state.GetDefaultCPUSet() }

// Free returns the CPUs the kubelet could give a new exclusive container:
// the default set but the reserved CPUs.
func (k *Kubelet) Free() cpuset.CPUSet { return k.Pool().Difference(k.cfg.Reserved) }

// Held returns every CPU a pod's entries hold.
func (k *Kubelet) Held(uid types.UID) cpuset.CPUSet {
	all := cpuset.New()
	for _, cpus := range k.state.GetCPUAssignments()[string(uid)] {
		all = all.Union(cpus)
	}
	return all
}

// SetEntry writes a container's CPUs into the state (nil-sized: deletes
// the entry) and recomputes the default set: every CPU no entry holds.
func (k *Kubelet) SetEntry(uid types.UID, name string, cpus cpuset.CPUSet) {
	if cpus.IsEmpty() {
		k.state.Delete(string(uid), name)
	} else {
		k.state.SetCPUSet(string(uid), name, cpus)
	}
	k.recomputePool()
}

// recomputePool sets the default set to the CPUs no entry holds.
func (k *Kubelet) recomputePool() {
	taken := cpuset.New()
	for _, entries := range k.state.GetCPUAssignments() {
		for _, cpus := range entries {
			taken = taken.Union(cpus)
		}
	}
	k.state.SetDefaultCPUSet(k.topo.CPUDetails.CPUs().Difference(taken))
}

// Pod returns the pod as the kubelet admitted it (nil when not active).
func (k *Kubelet) Pod(uid types.UID) *v1.Pod { return k.active[uid] }

// SetPod replaces an active pod's spec (an admitted resize).
func (k *Kubelet) SetPod(pod *v1.Pod) {
	if k.active[pod.UID] != nil {
		k.active[pod.UID] = pod
	}
}

// Snapshot returns a copy of the state: the default set and every entry.
func (k *Kubelet) Snapshot() (cpuset.CPUSet, map[string]map[string]cpuset.CPUSet) {
	entries := map[string]map[string]cpuset.CPUSet{}
	for uid, cs := range k.state.GetCPUAssignments() {
		entries[uid] = maps.Clone(cs)
	}
	return k.Pool(), entries
}

// restore puts back a state Snapshot returned.
func (k *Kubelet) restore(pool cpuset.CPUSet, entries map[string]map[string]cpuset.CPUSet) {
	k.state.SetCPUAssignments(entries)
	k.state.SetDefaultCPUSet(pool)
}
