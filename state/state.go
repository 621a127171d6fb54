package state

import (
	"iter"
	"maps"
	"reflect"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/pmap"
)

// New returns an empty state whose shared pool is defaultCPUSet.
func New(defaultCPUSet cpuset.CPUSet) *State {
	s := &State{
		entries: map[string]map[string]Assignment{},
		pods:    map[string]PodRecord{},
	}
	s.SetDefaultCPUSet(defaultCPUSet)
	return s
}

// Clone returns a copy: changing one never changes the other. A pod's
// map of assignments is never changed once stored (SetAssignment and
// deleteEntry store a new one: copy on write), so the copies share them
// and Clone copies the maps of pods and ids only, not a pod's record; the
// cpusets are shared, as they are immutable values.
func (s *State) Clone() *State {
	c := &State{
		shared:        s.shared,
		sharedOutside: s.sharedOutside,
		entries:       maps.Clone(s.entries),
		containers:    s.containers,
		pods:          maps.Clone(s.pods),
		holds:         maps.Clone(s.holds),
	}
	if s.config != nil {
		c.config = &ConfigRecord{ReservedCPUs: s.config.ReservedCPUs, Keys: maps.Clone(s.config.Keys)}
	}
	if c.entries == nil {
		c.entries = map[string]map[string]Assignment{}
	}
	if c.pods == nil {
		c.pods = map[string]PodRecord{}
	}
	return c
}

// Equal reports whether two states hold the same data. A nil map and an
// empty one are the same, and so is a pod whose entry map is empty and a pod
// without one.
func (s *State) Equal(o *State) bool {
	if s == nil || o == nil {
		return s == o
	}
	if !s.shared.Equal(o.shared) || !cpumask.Equal(s.sharedOutside, o.sharedOutside) {
		return false
	}
	if !sameRefs(&s.containers, &o.containers) || !maps.Equal(s.pods, o.pods) {
		return false
	}
	if !maps.EqualFunc(s.holds, o.holds, func(a, b Hold) bool { return cpumask.Equal(a.CPUs, b.CPUs) && a.Since.Equal(b.Since) }) {
		return false
	}
	if (s.config == nil) != (o.config == nil) || s.config != nil &&
		(!cpumask.Equal(s.config.ReservedCPUs, o.config.ReservedCPUs) || !maps.Equal(s.config.Keys, o.config.Keys)) {
		return false
	}
	return s.entriesContain(o) && o.entriesContain(s)
}

// entriesContain reports whether every assignment of o is in s. A pod
// whose map of assignments is the same map in both (a copy shares the
// maps it did not change) holds the same assignments.
func (s *State) entriesContain(o *State) bool {
	for podUID, containers := range o.entries {
		if sameMap(s.entries[podUID], containers) {
			continue
		}
		for name, a := range containers {
			b, ok := s.Assignment(podUID, name)
			if !ok || !a.equal(b) {
				return false
			}
		}
	}
	return true
}

// sameMap reports whether a and b are the same map (not only equal ones).
// A pod's map of assignments is never changed once stored (SetAssignment
// and deleteEntry store a new one), so the same map holds the same
// assignments.
func sameMap(a, b map[string]Assignment) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// equal reports whether a and b are the same assignment (ReleaseAt the
// same instant).
func (a Assignment) equal(b Assignment) bool {
	return a.Init == b.Init && a.DeviceNodes == b.DeviceNodes && a.ReleaseAt.Equal(b.ReleaseAt) && cpumask.Equal(a.Baseline, b.Baseline) &&
		cpumask.Equal(a.Resized, b.Resized) && cpumask.Equal(a.Delayed, b.Delayed)
}

// DefaultCPUSet returns the shared pool (checkpoint key "defaultCpuSet").
// It builds the set from the pool's bitmap: a decision reads SharedMask.
func (s *State) DefaultCPUSet() cpuset.CPUSet {
	if s.sharedOutside.IsEmpty() {
		return s.shared.CPUSet()
	}
	return s.shared.CPUSet().Union(s.sharedOutside)
}

// SharedMask returns the shared pool as a bitmap. The state keeps using
// it: the caller must not change it.
func (s *State) SharedMask() cpumask.Mask { return s.shared }

// SetDefaultCPUSet records the shared pool.
func (s *State) SetDefaultCPUSet(cpus cpuset.CPUSet) {
	s.shared, s.sharedOutside = splitMask(cpus)
}

// TakeShared removes cpus from the shared pool.
func (s *State) TakeShared(cpus cpuset.CPUSet) {
	if cpus.IsEmpty() {
		return
	}
	m, outside := splitMask(cpus)
	s.shared = s.shared.AndNot(m)
	if !outside.IsEmpty() && !s.sharedOutside.IsEmpty() {
		s.sharedOutside = s.sharedOutside.Difference(outside)
	}
}

// ReturnShared adds cpus to the shared pool.
func (s *State) ReturnShared(cpus cpuset.CPUSet) {
	if cpus.IsEmpty() {
		return
	}
	s.shared, s.sharedOutside = addShared(s.shared, s.sharedOutside, cpus)
}

// addShared returns the pool (shared, outside) with cpus added, in new
// values: the old ones may be a clone's.
func addShared(shared cpumask.Mask, outside, cpus cpuset.CPUSet) (cpumask.Mask, cpuset.CPUSet) {
	m, out := splitMask(cpus)
	if !out.IsEmpty() {
		outside = outside.Union(out)
	}
	return shared.Or(m), outside
}

// splitMask returns the CPUs of cpus a checkpoint's bitmap can hold, and
// the others.
func splitMask(cpus cpuset.CPUSet) (cpumask.Mask, cpuset.CPUSet) {
	var m cpumask.Mask
	var outside []int
	for _, id := range cpus.UnsortedList() {
		if id < 0 || id > cpumask.MaxID {
			outside = append(outside, id)
			continue
		}
		m.Add(id)
	}
	return m, cpuset.New(outside...)
}

// Assignments yields every assignment, in no particular order (ForEach
// sorts).
func (s *State) Assignments() iter.Seq2[ContainerRef, Assignment] {
	return func(yield func(ContainerRef, Assignment) bool) {
		for podUID, containers := range s.entries {
			for name, a := range containers {
				if !yield(ContainerRef{PodUID: podUID, Name: name}, a) {
					return
				}
			}
		}
	}
}

// NumAssignments counts the assignments.
func (s *State) NumAssignments() int {
	n := 0
	for _, containers := range s.entries {
		n += len(containers)
	}
	return n
}

// PodUIDs returns the UIDs of the pods that hold an assignment, sorted.
func (s *State) PodUIDs() []string {
	uids := make([]string, 0, len(s.entries))
	for uid, containers := range s.entries {
		if len(containers) > 0 {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	return uids
}

// Assignment returns the assignment of a container.
func (s *State) Assignment(podUID, name string) (Assignment, bool) {
	a, ok := s.entries[podUID][name]
	return a, ok
}

// SetAssignment records the assignment of a container.
func (s *State) SetAssignment(podUID, name string, a Assignment) {
	if s.entries == nil {
		s.entries = map[string]map[string]Assignment{}
	}
	// A new map for the pod: clones share the one stored (Clone).
	containers := make(map[string]Assignment, len(s.entries[podUID])+1)
	maps.Copy(containers, s.entries[podUID])
	containers[name] = a
	s.entries[podUID] = containers
}

// DeleteAssignment forgets a container's assignment (and the pod's entry map
// when it becomes empty). Container ids that point at the assignment are
// forgotten with it, so the state stays consistent.
func (s *State) DeleteAssignment(podUID, name string) {
	s.deleteEntry(podUID, name)
	ref := ContainerRef{PodUID: podUID, Name: name}
	s.deleteContainersIf(func(r ContainerRef) bool { return r == ref })
}

// deleteEntry removes one assignment, and the pod's entry map when it
// becomes empty.
func (s *State) deleteEntry(podUID, name string) {
	containers := s.entries[podUID]
	_, ok := containers[name]
	switch {
	case ok && len(containers) > 1:
		// A new map for the pod: clones share the one stored (Clone).
		rest := maps.Clone(containers)
		delete(rest, name)
		s.entries[podUID] = rest
	case ok || len(containers) == 0:
		delete(s.entries, podUID)
	}
}

// DeletePod forgets everything about a pod: its containers' assignments,
// the container ids that point at them, its pod-level resources and the
// CPUs held for it.
func (s *State) DeletePod(podUID string) {
	delete(s.entries, podUID)
	delete(s.pods, podUID)
	delete(s.holds, podUID)
	s.deleteContainersIf(func(r ContainerRef) bool { return r.PodUID == podUID })
}

// ExclusiveCPUs returns the union of every container's CPUs (Held: the
// assigned ones and those whose release is delayed).
func (s *State) ExclusiveCPUs() cpuset.CPUSet {
	var cpus []int
	for _, containers := range s.entries {
		for _, a := range containers {
			cpus = append(cpus, a.Assigned().UnsortedList()...)
			cpus = append(cpus, a.Delayed.UnsortedList()...)
		}
	}
	return cpuset.New(cpus...)
}

// ContainersOfPod returns the names of a pod's containers that hold an
// assignment, sorted.
func (s *State) ContainersOfPod(podUID string) []string {
	return slices.Sorted(maps.Keys(s.entries[podUID]))
}

// ForEach calls fn for every assignment, ordered by pod UID and then by
// container name.
func (s *State) ForEach(fn func(ref ContainerRef, a Assignment)) {
	for _, podUID := range slices.Sorted(maps.Keys(s.entries)) {
		containers := s.entries[podUID]
		for _, name := range slices.Sorted(maps.Keys(containers)) {
			fn(ContainerRef{PodUID: podUID, Name: name}, containers[name])
		}
	}
}

// deleteContainersIf forgets the runtime container ids whose entry drop
// says.
func (s *State) deleteContainersIf(drop func(ContainerRef) bool) {
	for id, r := range s.containers.All() { // (a walk of the version before)
		if drop(r) {
			s.containers.Delete(id)
		}
	}
}

// sameRefs reports whether two maps of container ids hold the same
// entries.
func sameRefs(a, b *pmap.Map[ContainerRef]) bool {
	if a.Same(b) {
		return true
	}
	if a.Len() != b.Len() {
		return false
	}
	for id, r := range a.All() {
		if o, ok := b.Lookup(id); !ok || o != r {
			return false
		}
	}
	return true
}

// SetContainer records that the runtime container id owns the entry ref.
func (s *State) SetContainer(id string, ref ContainerRef) {
	s.containers.Set(id, ref)
}

// Container returns the entry a runtime container id owns.
func (s *State) Container(id string) (ContainerRef, bool) {
	return s.containers.Lookup(id)
}

// DeleteContainer forgets a runtime container id; the entry it owned stays.
func (s *State) DeleteContainer(id string) { s.containers.Delete(id) }

// DeleteContainers forgets every runtime container id; the entries stay.
func (s *State) DeleteContainers() { s.containers = pmap.Map[ContainerRef]{} }

// ContainerRefs yields every runtime container id with the entry it owns,
// in no particular order.
func (s *State) ContainerRefs() iter.Seq2[string, ContainerRef] { return s.containers.All() }

// NumContainers counts the runtime container ids that own an entry.
func (s *State) NumContainers() int { return s.containers.Len() }

// ContainerIDOf returns the runtime container id that owns the entry ref.
// Should several ids point at it (a state Validate refuses), the smallest
// one is returned.
func (s *State) ContainerIDOf(ref ContainerRef) (string, bool) {
	found, ok := "", false
	for id, r := range s.containers.All() {
		if r == ref && (!ok || id < found) {
			found, ok = id, true
		}
	}
	return found, ok
}

// SetPodResources records the pod-level resources last delivered by
// UpdatePodSandbox.
func (s *State) SetPodResources(podUID string, r PodRecord) {
	if s.pods == nil {
		s.pods = map[string]PodRecord{}
	}
	s.pods[podUID] = r
}

// DeletePodResources forgets the pod-level resources of a pod.
func (s *State) DeletePodResources(podUID string) { delete(s.pods, podUID) }

// AllPodResources yields the pod-level resources of every pod that has
// some, in no particular order.
func (s *State) AllPodResources() iter.Seq2[string, PodRecord] { return maps.All(s.pods) }

// PodResources returns the pod-level resources last recorded for a pod.
func (s *State) PodResources(podUID string) (PodRecord, bool) {
	r, ok := s.pods[podUID]
	return r, ok
}

// Hold returns the CPUs held for a pod.
func (s *State) Hold(podUID string) (Hold, bool) {
	h, ok := s.holds[podUID]
	return h, ok
}

// SetHold records CPUs held for a pod, replacing any it had.
func (s *State) SetHold(podUID string, h Hold) {
	if s.holds == nil {
		s.holds = map[string]Hold{}
	}
	s.holds[podUID] = h
}

// DeleteHold releases the CPUs held for a pod.
func (s *State) DeleteHold(podUID string) { delete(s.holds, podUID) }

// Holds yields the CPUs held for every pod that has some, in no
// particular order.
func (s *State) Holds() iter.Seq2[string, Hold] { return maps.All(s.holds) }

// ConfigRecord returns the configuration the assignments were made under,
// and false when none was recorded.
func (s *State) ConfigRecord() (ConfigRecord, bool) {
	if s.config == nil {
		return ConfigRecord{}, false
	}
	return ConfigRecord{ReservedCPUs: s.config.ReservedCPUs, Keys: maps.Clone(s.config.Keys)}, true
}

// SetConfigRecord records the configuration the assignments are made
// under.
func (s *State) SetConfigRecord(c ConfigRecord) {
	s.config = &ConfigRecord{ReservedCPUs: c.ReservedCPUs, Keys: maps.Clone(c.Keys)}
}
