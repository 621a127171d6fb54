package state

import (
	"errors"
	"fmt"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"maps"
	"slices"

	"k8s.io/utils/cpuset"
)

// Validate runs the consistency checks that Load runs on a checkpoint:
// every cpuset names CPUs 0 to 65535 only (what Load reads) and lies inside
// online; every original set is non-empty; every
// resized set is empty or a superset of its original; no CPU is assigned to
// two containers or to a container and the shared pool; every container id
// points at an existing entry and no two ids point at the same one; no pod
// UID, container name or container id is empty. It returns the first
// problem found, in a deterministic order, with the values involved.
func (s *State) Validate(online cpuset.CPUSet) error {
	return s.validate(&online)
}

// validate runs the checks of Validate; with a nil online it skips the
// checks against the machine's CPUs (Marshal does not know them), but not
// the range of CPU ids: what Save and Marshal write, Load must read back.
func (s *State) validate(online *cpuset.CPUSet) error {
	if err := inRange("defaultCpuSet", s.defaultCPUSet); err != nil {
		return err
	}
	if online != nil {
		if err := insideOnline("defaultCpuSet", s.defaultCPUSet, *online); err != nil {
			return err
		}
	}
	if err := s.validateEntries(online); err != nil {
		return err
	}
	return s.validateContainers()
}

// validateForSave runs the checks of validate(nil) on the request path:
// the quick pass of claimsOf, in any order and without sorting, and only
// if it finds a problem (or cannot tell), validate, which names the first
// one in a deterministic order.
func (s *State) validateForSave() error {
	if s.looksConsistent() {
		return nil
	}
	return s.validate(nil)
}

// looksConsistent is the quick pass of claimsOf.
func (s *State) looksConsistent() bool {
	_, ok := claimsOf(s)
	return ok
}

// validateEntries checks each assignment on its own and against the others.
func (s *State) validateEntries(online *cpuset.CPUSet) error {
	total := 0
	for _, containers := range s.entries {
		for _, a := range containers {
			total += a.Assigned().Size()
		}
	}
	owner := make(map[int]ContainerRef, total)
	for _, podUID := range slices.Sorted(maps.Keys(s.entries)) {
		if podUID == "" {
			return errors.New("an entry has an empty pod UID")
		}
		containers := s.entries[podUID]
		for _, name := range slices.Sorted(maps.Keys(containers)) {
			ref := ContainerRef{PodUID: podUID, Name: name}
			a := containers[name]
			if err := validateAssignment(ref, a, online); err != nil {
				return err
			}
			assigned := a.Assigned()
			for _, cpu := range assigned.List() {
				if s.defaultCPUSet.Contains(cpu) {
					return fmt.Errorf("%s (CPUs %q) overlaps defaultCpuSet %q on CPUs %q",
						ref, assigned, s.defaultCPUSet, assigned.Intersection(s.defaultCPUSet))
				}
				if other, taken := owner[cpu]; taken {
					otherSet := s.entries[other.PodUID][other.Name].Assigned()
					return fmt.Errorf("%s (CPUs %q) and %s (CPUs %q) overlap on CPUs %q",
						other, otherSet, ref, assigned, otherSet.Intersection(assigned))
				}
				owner[cpu] = ref
			}
		}
	}
	return nil
}

// validateAssignment checks one assignment on its own.
func validateAssignment(ref ContainerRef, a Assignment, online *cpuset.CPUSet) error {
	if ref.Name == "" {
		return fmt.Errorf("pod %q has an entry with an empty container name", ref.PodUID)
	}
	if a.Original.IsEmpty() {
		return fmt.Errorf("%s: empty original cpuset", ref)
	}
	if err := inRange(ref.String()+": original", a.Original); err != nil {
		return err
	}
	if err := inRange(ref.String()+": resized", a.Resized); err != nil {
		return err
	}
	if online != nil {
		if err := insideOnline(ref.String()+": original", a.Original, *online); err != nil {
			return err
		}
		if err := insideOnline(ref.String()+": resized", a.Resized, *online); err != nil {
			return err
		}
	}
	if !a.Resized.IsEmpty() && !a.Original.IsSubsetOf(a.Resized) {
		return fmt.Errorf("%s: resized %q does not contain original %q (missing CPUs %q)",
			ref, a.Resized, a.Original, a.Original.Difference(a.Resized))
	}
	return nil
}

// validateContainers checks the container id → entry mapping.
func (s *State) validateContainers() error {
	ownerID := map[ContainerRef]string{}
	for _, id := range slices.Sorted(maps.Keys(s.containers)) {
		ref := s.containers[id]
		if id == "" {
			return fmt.Errorf("containers has an empty container id (pointing at %s)", ref)
		}
		if _, ok := s.Assignment(ref.PodUID, ref.Name); !ok {
			return fmt.Errorf("containers[%q] points at %s, which has no entry", id, ref)
		}
		if other, taken := ownerID[ref]; taken {
			return fmt.Errorf("containers[%q] and containers[%q] both point at %s", other, id, ref)
		}
		ownerID[ref] = id
	}
	return nil
}

// inRange reports the CPUs of set that are no CPU id a checkpoint can
// name: negative, or above cpumask.MaxID.
func inRange(what string, set cpuset.CPUSet) error {
	var outside []int
	for _, cpu := range set.UnsortedList() {
		if cpu < 0 || cpu > cpumask.MaxID {
			outside = append(outside, cpu)
		}
	}
	if len(outside) > 0 {
		return fmt.Errorf("%s names CPUs %v, outside the CPU ids 0-%d a checkpoint can hold", what, cpuset.New(outside...).List(), cpumask.MaxID)
	}
	return nil
}

// insideOnline reports the CPUs of set that are not online.
func insideOnline(what string, set, online cpuset.CPUSet) error {
	if outside := set.Difference(online); !outside.IsEmpty() {
		return fmt.Errorf("%s %q lies outside the online CPUs %q (CPUs %q)", what, set, online, outside)
	}
	return nil
}

// String names the container the way error messages do.
func (r ContainerRef) String() string {
	return fmt.Sprintf("pod %q container %q", r.PodUID, r.Name)
}
