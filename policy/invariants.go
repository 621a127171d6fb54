package policy

import (
	"errors"
	"fmt"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"maps"
	"slices"

	"k8s.io/utils/cpuset"
)

// CheckInvariants verifies a model against the rules every decision must
// keep, and returns every violation found (nil when none):
//   - no CPU is in two pods' exclusive sets, nor in two sets of one pod
//     unless one is an ordinary init container's (whose CPUs its pod's
//     later containers reuse);
//   - every baseline set is non-empty and inside its assigned set;
//   - exclusive CPUs are online and never reserved;
//   - the checkpointed shared pool is exactly the CPUs nobody holds
//     exclusively (minus reserved ones under strict-cpu-reservation), and
//     the pool shared containers run on is not empty;
//   - every container id of the state names an existing assignment;
//   - CPUs being released belong to nobody, CPUs being lent to shared
//     containers to no exclusive one.
func (p *Policy) CheckInvariants(m *Model) error {
	var errs []error
	online := p.topo.CPUs()
	exclusive := cpuset.New()
	owner := map[int]string{}
	for _, uid := range m.State.PodUIDs() {
		podOwner := map[int]string{} // CPU → the pod's non-init entry holding it
		for _, name := range m.State.ContainersOfPod(uid) {
			a, _ := m.State.Assignment(uid, name)
			who := uid + "/" + name
			assigned, held := a.Assigned(), a.Held()
			if a.Baseline.IsEmpty() {
				errs = append(errs, fmt.Errorf("%s: empty baseline CPUs", who))
			}
			if !a.Baseline.IsSubsetOf(assigned) {
				errs = append(errs, fmt.Errorf("%s: baseline CPUs %s not inside assigned %s", who, a.Baseline, assigned))
			}
			if d := a.Delayed.Intersection(assigned); !d.IsEmpty() {
				errs = append(errs, fmt.Errorf("%s: CPUs %s are both assigned and delayed", who, d))
			}
			if !held.IsSubsetOf(online) {
				errs = append(errs, fmt.Errorf("%s: CPUs %s are not online", who, held.Difference(online)))
			}
			if r := held.Intersection(p.opts.Reserved); !r.IsEmpty() {
				errs = append(errs, fmt.Errorf("%s: holds reserved CPUs %s", who, r))
			}
			for _, cpu := range held.List() {
				if other, taken := owner[cpu]; taken {
					errs = append(errs, fmt.Errorf("CPU %d is exclusive to both %s and %s", cpu, other, who))
				}
				if a.Init {
					continue // the pod's later containers may reuse it
				}
				if other, taken := podOwner[cpu]; taken {
					errs = append(errs, fmt.Errorf("CPU %d is exclusive to both %s and %s, neither an init container", cpu, other, who))
				}
				podOwner[cpu] = who
			}
			exclusive = exclusive.Union(held)
		}
		for _, cpu := range exclusive.List() {
			if _, taken := owner[cpu]; !taken {
				owner[cpu] = "pod " + uid
			}
		}
	}
	held := cpuset.New()
	for uid, h := range m.State.Holds() {
		if r := h.CPUs.Intersection(exclusive.Union(held)); !r.IsEmpty() {
			errs = append(errs, fmt.Errorf("CPUs %s held for pod %s are exclusive or held twice", r, uid))
		}
		held = held.Union(h.CPUs)
	}
	if want := p.poolWithout(exclusive.Union(held)); !cpumask.Equal(m.State.DefaultCPUSet(), want) {
		errs = append(errs, fmt.Errorf("shared pool is %s, want %s", describe(m.State.DefaultCPUSet()), describe(want)))
	}
	pool := m.SharedPool()
	if pool.IsEmpty() {
		errs = append(errs, errors.New("the shared pool is empty"))
	}
	for id, ref := range m.State.ContainerRefs() {
		if _, ok := m.State.Assignment(ref.PodUID, ref.Name); !ok {
			errs = append(errs, fmt.Errorf("container %s refers to missing assignment %s/%s", id, ref.PodUID, ref.Name))
		}
	}
	releasing := cpuset.New()
	for id, cpus := range m.Releasing {
		if r := cpus.Intersection(exclusive); !r.IsEmpty() {
			errs = append(errs, fmt.Errorf("CPUs %s released by %s are also exclusive", r, id))
		}
		if r := cpus.Intersection(releasing); !r.IsEmpty() {
			errs = append(errs, fmt.Errorf("CPUs %s are released twice", r))
		}
		releasing = releasing.Union(cpus)
	}
	if r := m.Lending.Intersection(exclusive); !r.IsEmpty() {
		errs = append(errs, fmt.Errorf("CPUs %s are lent to shared containers and exclusive", r))
	}
	if ids, sorted := slices.Sorted(m.Containers.Keys()), m.SortedContainerIDs(); !slices.Equal(sorted, ids) {
		errs = append(errs, fmt.Errorf("the model's records by id %q are not those of its containers %q", sorted, ids))
	} else {
		for i, id := range ids {
			if m.recs[i] != m.Containers.Get(id) {
				errs = append(errs, fmt.Errorf("the model's record in order of container %s is not its record", id))
			}
		}
	}
	return errors.Join(append(errs, m.checkPodIndex())...)
}

// checkPodIndex verifies that the index by pod (Model.byPod) holds exactly
// the pods' tracked containers and known sandboxes.
func (m *Model) checkPodIndex() error {
	want := map[string]*podIDs{}
	entry := func(uid string) *podIDs {
		if want[uid] == nil {
			want[uid] = &podIDs{}
		}
		return want[uid]
	}
	for _, t := range m.recs {
		p := entry(t.PodUID)
		p.containers = append(p.containers, t.ID)
	}
	for _, id := range slices.Sorted(m.Sandboxes.Keys()) {
		p := entry(m.Sandboxes.Get(id).PodUID)
		p.sandboxes = append(p.sandboxes, id)
	}
	var errs []error
	if m.byPod.Len() != len(want) {
		errs = append(errs, fmt.Errorf("the model's index by pod has %d pods, its containers and sandboxes %d", m.byPod.Len(), len(want)))
	}
	for uid, w := range want {
		got := m.byPod.Get(uid)
		if !slices.Equal(got.containers, w.containers) || !slices.Equal(got.sandboxes, w.sandboxes) {
			errs = append(errs, fmt.Errorf("the model's index by pod has %q and sandboxes %q for pod %s, not %q and %q",
				got.containers, got.sandboxes, uid, w.containers, w.sandboxes))
		}
	}
	return errors.Join(errs...)
}

// CheckApplied verifies cpusets as a runtime has applied them, at any
// instant: no CPU is in two exclusive containers' sets, nor in an exclusive
// and a shared container's set. exclusive tells which containers hold
// exclusive CPUs.
func CheckApplied(applied map[string]cpuset.CPUSet, exclusive func(id string) bool) error {
	var errs []error
	owner := map[int]string{}
	shared := cpuset.New()
	for _, id := range slices.Sorted(maps.Keys(applied)) {
		cpus := applied[id]
		if !exclusive(id) {
			shared = shared.Union(cpus)
			continue
		}
		for _, cpu := range cpus.List() {
			if other, taken := owner[cpu]; taken {
				errs = append(errs, fmt.Errorf("CPU %d is applied to exclusive containers %s and %s", cpu, other, id))
			}
			owner[cpu] = id
		}
	}
	for _, cpu := range shared.List() {
		if id, taken := owner[cpu]; taken {
			errs = append(errs, fmt.Errorf("CPU %d is applied to exclusive container %s and to a shared container", cpu, id))
		}
	}
	return errors.Join(errs...)
}
