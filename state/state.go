package state

import (
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"maps"
	"slices"

	"k8s.io/utils/cpuset"
)

// New returns an empty state whose shared pool is defaultCPUSet.
func New(defaultCPUSet cpuset.CPUSet) *State {
	return &State{
		DefaultCPUSet: defaultCPUSet,
		Entries:       map[string]map[string]Assignment{},
		Containers:    map[string]ContainerRef{},
		Pods:          map[string]PodResources{},
	}
}

// Clone returns a copy that can be changed without changing s. Maps are
// shared by both until one of them changes them (copy on write): a pod's
// entry map is copied by SetAssignment and DeleteAssignment before they
// write, Containers and Pods by every method that changes them, in
// whichever state changes first. A clone thus costs a copy of Entries, not
// of every map. (cpusets are immutable values and are always shared.)
//
// Clone marks s as sharing its maps too, and writes nothing else of s: a
// state being saved or scraped may be read meanwhile.
func (s *State) Clone() *State {
	// maps.Clone copies a map's table as it is, much faster than inserting
	// every key into a new one.
	c := &State{
		DefaultCPUSet: s.DefaultCPUSet,
		Entries:       maps.Clone(s.Entries),
		Containers:    s.Containers,
		Pods:          s.Pods,
	}
	if c.Containers == nil || c.Pods == nil {
		c.Containers, c.Pods = maps.Clone(s.Containers), maps.Clone(s.Pods)
		if c.Containers == nil {
			c.Containers = map[string]ContainerRef{}
		}
		if c.Pods == nil {
			c.Pods = map[string]PodResources{}
		}
	} else {
		s.sharedMaps.Store(true)
		c.sharedMaps.Store(true)
	}
	maps.DeleteFunc(c.Entries, func(_ string, containers map[string]Assignment) bool { return len(containers) == 0 })
	if c.Entries == nil {
		c.Entries = map[string]map[string]Assignment{}
	}
	return c
}

// ownMaps gives s its own Containers and Pods before a change, when they
// may be shared with a clone.
func (s *State) ownMaps() {
	if !s.sharedMaps.Load() {
		return
	}
	s.Containers = maps.Clone(s.Containers)
	if s.Containers == nil {
		s.Containers = map[string]ContainerRef{}
	}
	s.Pods = maps.Clone(s.Pods)
	if s.Pods == nil {
		s.Pods = map[string]PodResources{}
	}
	s.sharedMaps.Store(false)
}

// Equal reports whether two states hold the same data. A nil map and an
// empty one are the same, and so is a pod whose entry map is empty and a pod
// without one.
func (s *State) Equal(o *State) bool {
	if s == nil || o == nil {
		return s == o
	}
	if !cpumask.Equal(s.DefaultCPUSet, o.DefaultCPUSet) {
		return false
	}
	if !maps.Equal(s.Containers, o.Containers) || !maps.Equal(s.Pods, o.Pods) {
		return false
	}
	return s.entriesContain(o) && o.entriesContain(s)
}

// entriesContain reports whether every assignment of o is in s.
func (s *State) entriesContain(o *State) bool {
	for podUID, containers := range o.Entries {
		for name, a := range containers {
			b, ok := s.Assignment(podUID, name)
			if !ok || !cpumask.Equal(a.Original, b.Original) || !cpumask.Equal(a.Resized, b.Resized) {
				return false
			}
		}
	}
	return true
}

// Assignment returns the assignment of a container.
func (s *State) Assignment(podUID, name string) (Assignment, bool) {
	a, ok := s.Entries[podUID][name]
	return a, ok
}

// SetAssignment records the assignment of a container.
func (s *State) SetAssignment(podUID, name string, a Assignment) {
	if s.Entries == nil {
		s.Entries = map[string]map[string]Assignment{}
	}
	containers := make(map[string]Assignment, len(s.Entries[podUID])+1)
	maps.Copy(containers, s.Entries[podUID]) // copy on write: see Clone
	containers[name] = a
	s.Entries[podUID] = containers
}

// DeleteAssignment forgets a container's assignment (and the pod's entry map
// when it becomes empty). Container ids that point at the assignment are
// forgotten with it, so the state stays consistent.
func (s *State) DeleteAssignment(podUID, name string) {
	s.deleteEntry(podUID, name)
	ref := ContainerRef{PodUID: podUID, Name: name}
	s.ownMaps()
	maps.DeleteFunc(s.Containers, func(_ string, r ContainerRef) bool { return r == ref })
}

// deleteEntry removes one assignment, copying the pod's entry map first
// (copy on write: see Clone) and dropping it when it becomes empty.
func (s *State) deleteEntry(podUID, name string) {
	containers, ok := s.Entries[podUID]
	if _, has := containers[name]; !ok || !has {
		return
	}
	if len(containers) == 1 {
		delete(s.Entries, podUID)
		return
	}
	containers = maps.Clone(containers)
	delete(containers, name)
	s.Entries[podUID] = containers
}

// DeletePod forgets everything about a pod: its containers' assignments,
// the container ids that point at them, and its pod-level resources.
func (s *State) DeletePod(podUID string) {
	delete(s.Entries, podUID)
	s.ownMaps()
	delete(s.Pods, podUID)
	maps.DeleteFunc(s.Containers, func(_ string, r ContainerRef) bool { return r.PodUID == podUID })
}

// ExclusiveCPUs returns the union of every assigned set.
func (s *State) ExclusiveCPUs() cpuset.CPUSet {
	var cpus []int
	for _, containers := range s.Entries {
		for _, a := range containers {
			cpus = append(cpus, a.Assigned().UnsortedList()...)
		}
	}
	return cpuset.New(cpus...)
}

// ContainersOfPod returns the names of a pod's containers that hold an
// assignment, sorted.
func (s *State) ContainersOfPod(podUID string) []string {
	return slices.Sorted(maps.Keys(s.Entries[podUID]))
}

// ForEach calls fn for every assignment, ordered by pod UID and then by
// container name.
func (s *State) ForEach(fn func(ref ContainerRef, a Assignment)) {
	for _, podUID := range slices.Sorted(maps.Keys(s.Entries)) {
		containers := s.Entries[podUID]
		for _, name := range slices.Sorted(maps.Keys(containers)) {
			fn(ContainerRef{PodUID: podUID, Name: name}, containers[name])
		}
	}
}

// SetContainer records that the runtime container id owns the entry ref.
func (s *State) SetContainer(id string, ref ContainerRef) {
	if old, ok := s.Containers[id]; ok && old == ref {
		return // nothing to change: keep sharing
	}
	s.ownMaps()
	if s.Containers == nil {
		s.Containers = map[string]ContainerRef{}
	}
	s.Containers[id] = ref
}

// Container returns the entry a runtime container id owns.
func (s *State) Container(id string) (ContainerRef, bool) {
	ref, ok := s.Containers[id]
	return ref, ok
}

// DeleteContainer forgets a runtime container id; the entry it owned stays.
func (s *State) DeleteContainer(id string) {
	if _, ok := s.Containers[id]; !ok {
		return
	}
	s.ownMaps()
	delete(s.Containers, id)
}

// DeleteContainers forgets every runtime container id; the entries stay.
func (s *State) DeleteContainers() {
	if len(s.Containers) == 0 {
		return
	}
	s.ownMaps()
	clear(s.Containers)
}

// ContainerIDOf returns the runtime container id that owns the entry ref.
// Should several ids point at it (a state Validate refuses), the smallest
// one is returned.
func (s *State) ContainerIDOf(ref ContainerRef) (string, bool) {
	found, ok := "", false
	for id, r := range s.Containers {
		if r == ref && (!ok || id < found) {
			found, ok = id, true
		}
	}
	return found, ok
}

// SetPodResources records the pod-level resources last delivered by
// UpdatePodSandbox.
func (s *State) SetPodResources(podUID string, r PodResources) {
	if old, ok := s.Pods[podUID]; ok && old == r {
		return // nothing to change: keep sharing
	}
	s.ownMaps()
	if s.Pods == nil {
		s.Pods = map[string]PodResources{}
	}
	s.Pods[podUID] = r
}

// DeletePodResources forgets the pod-level resources of a pod.
func (s *State) DeletePodResources(podUID string) {
	if _, ok := s.Pods[podUID]; !ok {
		return
	}
	s.ownMaps()
	delete(s.Pods, podUID)
}

// PodResources returns the pod-level resources last recorded for a pod.
func (s *State) PodResources(podUID string) (PodResources, bool) {
	r, ok := s.Pods[podUID]
	return r, ok
}
