package state

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"github.com/nri-cpumanager/nri-cpumanager/pmap"
)

// Validate runs the consistency checks that Load runs on a checkpoint:
// every cpuset names CPUs 0 to 65535 only (what Load reads) and lies inside
// online; every baseline set is non-empty; every resized set is empty or a
// superset of its baseline; every delayed set is disjoint from its
// container's assigned set and non-empty exactly when its release time is
// set; a container's CPUs (Held: assigned and delayed) are in no other
// pod's container, not in the shared pool, and in no other container of
// its pod unless one of the two is an init container; every hold is
// non-empty and no CPU is held and also a container's, shared or held for
// another pod; every container id points at an existing entry and no two
// ids point at the same one; no pod UID, container name or container id
// is empty, and every name is valid UTF-8; every time is within the years
// an RFC 3339 time can name; the configuration record's reserved CPUs lie
// inside online. It returns the first problem found, in a deterministic
// order, with the values involved.
func (s *State) Validate(online cpuset.CPUSet) error {
	return s.validate(&online)
}

// validate runs the checks of Validate; with a nil online it skips the
// checks against the machine's CPUs (Marshal does not know them), but not
// the range of CPU ids: what Save and Marshal write, Load must read back.
//
// It runs on every Save, so it walks bitmaps, first in map order, and
// builds an error message only once it has found a problem; it then walks
// again in sorted order so that the problem it names is always the same.
func (s *State) validate(online *cpuset.CPUSet) error {
	err := s.check(online, false)
	if err == nil {
		return nil
	}
	if first := s.check(online, true); first != nil {
		return first
	}
	return err
}

// check runs the checks of validate, walking the maps in sorted order if
// sorted, else in map order.
func (s *State) check(online *cpuset.CPUSet, sorted bool) error {
	var onlineMask cpumask.Mask
	if online != nil {
		onlineMask, _ = cpumask.Of(*online)
	}
	if err := s.validateText(sorted); err != nil {
		return err
	}
	shared := s.shared
	if !s.sharedOutside.IsEmpty() || online != nil && !shared.AndNot(onlineMask).IsEmpty() {
		return setError("defaultCpuSet", s.DefaultCPUSet(), online)
	}
	claimed, err := s.validateEntries(shared, onlineMask, online, sorted)
	if err != nil {
		return err
	}
	if err := s.validateHolds(shared, claimed, onlineMask, online, sorted); err != nil {
		return err
	}
	if err := s.validateContainers(sorted); err != nil {
		return err
	}
	if s.config != nil {
		if _, ok := maskWithin(s.config.ReservedCPUs, onlineMask, online != nil); !ok {
			return setError("config reservedCpuSet", s.config.ReservedCPUs, online)
		}
	}
	return nil
}

// validateText checks that every name the state holds is valid UTF-8: the
// encoding writes an invalid byte as \ufffd, which decodes to another
// string, so the file would fail its checksum when it is read back.
func (s *State) validateText(sorted bool) error {
	check := func(what, text string) error {
		if !utf8.ValidString(text) {
			return fmt.Errorf("%s %q is not valid UTF-8", what, text)
		}
		return nil
	}
	for _, podUID := range keys(s.entries, sorted) {
		if err := check("pod UID", podUID); err != nil {
			return err
		}
		for _, name := range keys(s.entries[podUID], sorted) {
			if err := check("container name", name); err != nil {
				return err
			}
		}
	}
	for id, ref := range refs(&s.containers, sorted) {
		for _, err := range []error{check("container id", id), check("pod UID", ref.PodUID), check("container name", ref.Name)} {
			if err != nil {
				return err
			}
		}
	}
	for _, podUID := range keys(s.pods, sorted) {
		if err := check("pod UID", podUID); err != nil {
			return err
		}
	}
	for _, podUID := range keys(s.holds, sorted) {
		if err := check("pod UID", podUID); err != nil {
			return err
		}
	}
	if s.config != nil {
		for _, key := range keys(s.config.Keys, sorted) {
			if err := check("configuration key", key); err != nil {
				return err
			}
			if err := check("configuration value", s.config.Keys[key]); err != nil {
				return err
			}
		}
	}
	return nil
}

// keys returns the keys of m, sorted if sorted.
func keys[V any](m map[string]V, sorted bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	if sorted {
		slices.Sort(ks)
	}
	return ks
}

// refs yields the container ids of m and their entries: in sorted order
// if sorted, else in m's order.
func refs(m *pmap.Map[ContainerRef], sorted bool) iter.Seq2[string, ContainerRef] {
	if !sorted {
		return m.All()
	}
	return func(yield func(string, ContainerRef) bool) {
		for _, id := range sortedIDs(m) {
			if !yield(id, m.Get(id)) {
				return
			}
		}
	}
}

// sortedIDs returns the container ids of m, sorted.
func sortedIDs(m *pmap.Map[ContainerRef]) []string {
	ids := make([]string, 0, m.Len())
	for id := range m.Keys() {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// maskWithin returns the mask of set and true when set names only CPU ids
// a checkpoint can hold and, if checkOnline, only CPUs of online.
func maskWithin(set cpuset.CPUSet, online cpumask.Mask, checkOnline bool) (cpumask.Mask, bool) {
	var m cpumask.Mask
	return m, addWithin(&m, set.UnsortedList(), online, checkOnline)
}

// addWithin adds ids to m and returns true when they are all CPU ids a
// checkpoint can hold and, if checkOnline, CPUs of online.
func addWithin(m *cpumask.Mask, ids []int, online cpumask.Mask, checkOnline bool) bool {
	for _, cpu := range ids {
		if cpu < 0 || cpu > cpumask.MaxID || checkOnline && !online.Has(cpu) {
			return false
		}
		m.Add(cpu)
	}
	return true
}

// setError says why set, which maskWithin refused, is refused.
func setError(what string, set cpuset.CPUSet, online *cpuset.CPUSet) error {
	if err := inRange(what, set); err != nil {
		return err
	}
	return insideOnline(what, set, *online)
}

// validateEntries checks each assignment on its own and against the
// others and the shared pool, whose mask is shared. It returns the mask of
// the containers' CPUs.
func (s *State) validateEntries(shared, onlineMask cpumask.Mask, online *cpuset.CPUSet, sorted bool) (cpumask.Mask, error) {
	claimed := cpumask.New(len(shared) * 64) // the CPUs of the pods before this one
	var mine, nonInit cpumask.Mask           // scratch, all zeros between entries and between pods
	var podCPUs []int
	for _, podUID := range keys(s.entries, sorted) {
		if podUID == "" {
			return nil, errors.New("an entry has an empty pod UID")
		}
		containers := s.entries[podUID]
		podCPUs = podCPUs[:0]
		for _, name := range keys(containers, sorted) {
			a := containers[name]
			ref := ContainerRef{PodUID: podUID, Name: name}
			baseline, delayed := a.Baseline.UnsortedList(), a.Delayed.UnsortedList()
			assigned := baseline
			if a.Resized.Size() > 0 {
				assigned = a.Resized.UnsortedList()
			}
			if name == "" || !entryWithin(a, baseline, assigned, delayed, &mine, onlineMask, online != nil) {
				return nil, validateAssignment(ref, a, online)
			}
			clear(mine)
			for _, ids := range [2][]int{assigned, delayed} {
				for _, cpu := range ids {
					if shared.Has(cpu) || claimed.Has(cpu) || !a.Init && nonInit.Has(cpu) {
						return nil, s.overlapError(ref)
					}
				}
				podCPUs = append(podCPUs, ids...)
				if !a.Init {
					for _, cpu := range ids {
						nonInit.Add(cpu)
					}
				}
			}
		}
		for _, cpu := range podCPUs {
			claimed.Add(cpu)
			nonInit.Remove(cpu)
		}
	}
	return claimed, nil
}

// entryWithin reports whether a, whose baseline, assigned and delayed
// CPUs are given, is valid on its own (validateAssignment says why not).
// It uses mine, all zeros, as scratch.
func entryWithin(a Assignment, baseline, assigned, delayed []int, mine *cpumask.Mask, online cpumask.Mask, checkOnline bool) bool {
	if len(baseline) == 0 || !addWithin(mine, baseline, online, checkOnline) {
		return false
	}
	if a.Resized.Size() > 0 { // assigned is Resized: it must hold every baseline CPU
		inBaseline := 0
		for _, cpu := range assigned {
			if mine.Has(cpu) {
				inBaseline++
			}
		}
		if inBaseline != len(baseline) || !addWithin(mine, assigned, online, checkOnline) {
			return false
		}
	}
	if (len(delayed) > 0) == a.ReleaseAt.IsZero() || !a.ReleaseAt.IsZero() && !rfc3339Year(a.ReleaseAt) {
		return false
	}
	for _, cpu := range delayed {
		if mine.Has(cpu) { // assigned
			return false
		}
	}
	return addWithin(mine, delayed, online, checkOnline)
}

// rfc3339Year reports whether t's year (in UTC) is one an RFC 3339 time
// can name.
func rfc3339Year(t time.Time) bool {
	year := t.UTC().Year()
	return year >= 0 && year <= 9999
}

// validateHolds checks each hold on its own and against the shared pool,
// the containers' CPUs (claimed) and the other holds.
func (s *State) validateHolds(shared, claimed, onlineMask cpumask.Mask, online *cpuset.CPUSet, sorted bool) error {
	var held cpumask.Mask
	for _, podUID := range keys(s.holds, sorted) {
		h := s.holds[podUID]
		what := fmt.Sprintf("hold of pod %q", podUID)
		switch {
		case podUID == "":
			return errors.New("a hold has an empty pod UID")
		case h.CPUs.IsEmpty():
			return fmt.Errorf("%s: empty cpuset", what)
		case !rfc3339Year(h.Since):
			return fmt.Errorf("%s: since %s is outside the years 0000-9999 an RFC 3339 time can name", what, h.Since)
		}
		m, ok := maskWithin(h.CPUs, onlineMask, online != nil)
		if !ok {
			return setError(what, h.CPUs, online)
		}
		if m.Intersects(shared) || m.Intersects(claimed) || m.Intersects(held) {
			return s.holdOverlapError(podUID)
		}
		held = held.Or(m)
	}
	return nil
}

// holdOverlapError names what the CPUs held for podUID overlap: the shared
// pool, a container's CPUs (the first in sorted order), or the hold of a
// pod whose UID sorts first.
func (s *State) holdOverlapError(podUID string) error {
	h := s.holds[podUID]
	if common := h.CPUs.Intersection(s.DefaultCPUSet()); !common.IsEmpty() {
		return fmt.Errorf("hold of pod %q (CPUs %q) overlaps defaultCpuSet %q on CPUs %q", podUID, h.CPUs, s.DefaultCPUSet(), common)
	}
	var found error
	s.ForEach(func(ref ContainerRef, a Assignment) {
		if common := h.CPUs.Intersection(a.Held()); found == nil && !common.IsEmpty() {
			found = fmt.Errorf("hold of pod %q (CPUs %q) and %s (CPUs %q) overlap on CPUs %q", podUID, h.CPUs, ref, a.Held(), common)
		}
	})
	if found != nil {
		return found
	}
	for _, other := range slices.Sorted(maps.Keys(s.holds)) {
		if common := h.CPUs.Intersection(s.holds[other].CPUs); other != podUID && !common.IsEmpty() {
			return fmt.Errorf("holds of pods %q (CPUs %q) and %q (CPUs %q) overlap on CPUs %q",
				other, s.holds[other].CPUs, podUID, h.CPUs, common)
		}
	}
	return fmt.Errorf("hold of pod %q (CPUs %q) overlaps other CPUs", podUID, h.CPUs) // not reached
}

// overlapError names what ref's CPUs (Held) overlap: the shared pool, or
// the first container in sorted order whose CPUs it must not share.
func (s *State) overlapError(ref ContainerRef) error {
	a := s.entries[ref.PodUID][ref.Name]
	held := a.Held()
	if common := held.Intersection(s.DefaultCPUSet()); !common.IsEmpty() {
		return fmt.Errorf("%s (CPUs %q) overlaps defaultCpuSet %q on CPUs %q", ref, held, s.DefaultCPUSet(), common)
	}
	var found error
	s.ForEach(func(other ContainerRef, b Assignment) {
		samePod := other.PodUID == ref.PodUID
		if found != nil || other == ref || samePod && (a.Init || b.Init) {
			return
		}
		if common := b.Held().Intersection(held); !common.IsEmpty() {
			neither := ""
			if samePod {
				neither = ", and neither is an init container"
			}
			found = fmt.Errorf("%s (CPUs %q) and %s (CPUs %q) overlap on CPUs %q%s", other, b.Held(), ref, held, common, neither)
		}
	})
	if found == nil {
		found = fmt.Errorf("%s (CPUs %q) overlaps another set", ref, held) // not reached
	}
	return found
}

// validateAssignment says what is wrong with one assignment on its own.
func validateAssignment(ref ContainerRef, a Assignment, online *cpuset.CPUSet) error {
	if ref.Name == "" {
		return fmt.Errorf("pod %q has an entry with an empty container name", ref.PodUID)
	}
	if a.Baseline.IsEmpty() {
		return fmt.Errorf("%s: empty baseline cpuset", ref)
	}
	sets := []struct {
		what string
		set  cpuset.CPUSet
	}{{"baseline", a.Baseline}, {"resized", a.Resized}, {"delayed", a.Delayed}}
	for _, c := range sets {
		if err := inRange(ref.String()+": "+c.what, c.set); err != nil {
			return err
		}
	}
	for _, c := range sets {
		if err := insideOnlineIfKnown(ref.String()+": "+c.what, c.set, online); err != nil {
			return err
		}
	}
	switch {
	case !a.Resized.IsEmpty() && !a.Baseline.IsSubsetOf(a.Resized):
		return fmt.Errorf("%s: resized %q does not contain baseline %q (missing CPUs %q)",
			ref, a.Resized, a.Baseline, a.Baseline.Difference(a.Resized))
	case !a.Delayed.IsEmpty() && a.ReleaseAt.IsZero():
		return fmt.Errorf("%s: delayed CPUs %q have no release time", ref, a.Delayed)
	case a.Delayed.IsEmpty() && !a.ReleaseAt.IsZero():
		return fmt.Errorf("%s: release time %s is set but no CPUs are delayed", ref, a.ReleaseAt.UTC().Format(time.RFC3339Nano))
	case !a.ReleaseAt.IsZero() && !rfc3339Year(a.ReleaseAt):
		return fmt.Errorf("%s: release time %s is outside the years 0000-9999 an RFC 3339 time can name", ref, a.ReleaseAt)
	}
	if common := a.Delayed.Intersection(a.Assigned()); !common.IsEmpty() {
		return fmt.Errorf("%s: delayed %q overlaps its assigned CPUs %q on CPUs %q", ref, a.Delayed, a.Assigned(), common)
	}
	return nil
}

// validateContainers checks the container id → entry mapping.
func (s *State) validateContainers(sorted bool) error {
	ownerID := make(map[ContainerRef]string, s.containers.Len())
	for id, ref := range refs(&s.containers, sorted) {
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

// insideOnlineIfKnown is insideOnline when online is known.
func insideOnlineIfKnown(what string, set cpuset.CPUSet, online *cpuset.CPUSet) error {
	if online == nil {
		return nil
	}
	return insideOnline(what, set, *online)
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
