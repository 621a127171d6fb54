package state

import (
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// claims is a bitmap of the CPUs a state holds: its shared pool and every
// assignment, one bit per CPU id. A consistent state claims no CPU twice.
type claims []uint64

// claimsOf returns the claims of s when s passes validate(nil) as far as
// a quick pass in any order, without sorting, can tell. It is never more
// lenient than validate: false means s does not pass, or that the pass
// cannot tell (a CPU id it does not track).
func claimsOf(s *State) (claims, bool) {
	var c claims
	if !c.take(s.defaultCPUSet) {
		return nil, false
	}
	for podUID, containers := range s.entries {
		if podUID == "" {
			return nil, false
		}
		for name, a := range containers {
			if !wellFormed(name, a) || !c.take(a.Assigned()) {
				return nil, false
			}
		}
	}
	pointedAt := make(map[ContainerRef]struct{}, len(s.containers))
	for id, ref := range s.containers {
		if _, ok := s.entries[ref.PodUID][ref.Name]; !ok || id == "" {
			return nil, false
		}
		if _, taken := pointedAt[ref]; taken {
			return nil, false
		}
		pointedAt[ref] = struct{}{}
	}
	return c, true
}

// wellFormed tells whether an assignment passes the checks made on it
// alone: a name, a non-empty original set inside the resized one, if any.
func wellFormed(name string, a Assignment) bool {
	return name != "" && !a.Original.IsEmpty() && (a.Resized.IsEmpty() || a.Original.IsSubsetOf(a.Resized))
}

// take adds cpus to c; false if one of them is claimed already or is not
// a CPU id c tracks.
func (c *claims) take(cpus cpuset.CPUSet) bool {
	m := (*cpumask.Mask)(c)
	for _, cpu := range cpus.UnsortedList() {
		if cpu < 0 || cpu > cpumask.MaxID || m.Has(cpu) {
			return false
		}
		m.Add(cpu)
	}
	return true
}

// give removes cpus from c; false if one of them was not claimed.
func (c claims) give(cpus cpuset.CPUSet) bool {
	m := cpumask.Mask(c)
	for _, cpu := range cpus.UnsortedList() {
		if !m.Has(cpu) {
			return false
		}
		m.Remove(cpu)
	}
	return true
}

// after returns the claims of to, given that these are the claims of the
// consistent state from and ops = diff(from, to), checking only what ops
// change: the result is what claimsOf(to) would return. The CPUs it walks
// are those of the changed keys; an op that sets or deletes a container
// id's entry also scans to's container ids. It returns false whenever
// claimsOf(to) would, and may also when it cannot tell.
func (c claims) after(from, to *State, ops []op) (claims, bool) {
	next := slices.Clone(c)
	// Release what the changed keys held, then claim what they hold now,
	// so that CPUs moving between keys are not seen twice.
	for _, o := range ops {
		switch o.kind {
		case opSetDefault:
			if !next.give(from.defaultCPUSet) {
				return nil, false
			}
		case opSetAssignment, opDeleteAssignment:
			if a, ok := from.entries[o.key][o.name]; ok && !next.give(a.Assigned()) {
				return nil, false
			}
		}
	}
	for _, o := range ops {
		switch o.kind {
		case opSetDefault:
			if !next.take(o.cpus) {
				return nil, false
			}
		case opSetAssignment:
			if o.key == "" || !wellFormed(o.name, o.assignment) || !next.take(o.assignment.Assigned()) {
				return nil, false
			}
		case opDeleteAssignment:
			// No container may still point at the entry.
			if _, pointed := to.ContainerIDOf(ContainerRef{PodUID: o.key, Name: o.name}); pointed {
				return nil, false
			}
		case opSetContainer:
			if _, ok := to.entries[o.ref.PodUID][o.ref.Name]; !ok || o.key == "" {
				return nil, false
			}
			// No other container may point at the same entry.
			for id, ref := range to.containers {
				if ref == o.ref && id != o.key {
					return nil, false
				}
			}
		}
	}
	return next, true
}
