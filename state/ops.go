package state

import (
	"cmp"
	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
	"reflect"
	"slices"

	"k8s.io/utils/cpuset"
)

// opKind is the kind of one journal operation. The values are written to
// the journal (README.md, "Journal"): never renumber them.
type opKind byte

const (
	opSetDefault opKind = 1 + iota
	opSetAssignment
	opDeleteAssignment
	opSetContainer
	opDeleteContainer
	opSetPod
	opDeletePod
)

// op is one absolute change to a State: it names one key and gives its new
// value, or says the key is gone. It never depends on the value it
// replaces and never touches another key, so applying an op to a state
// that already holds it changes nothing, and replaying a run of ops gives
// the same result however much of the run the state already holds.
type op struct {
	kind opKind
	// key is the pod UID (assignment and pod ops) or the runtime container
	// id (container ops).
	key string
	// name is the container name (assignment ops).
	name string
	// cpus is the shared pool (opSetDefault).
	cpus cpuset.CPUSet
	// assignment is the new value of opSetAssignment.
	assignment Assignment
	// ref is the new value of opSetContainer.
	ref ContainerRef
	// pod is the new value of opSetPod.
	pod PodResources
}

// diff returns the ops that turn from into to, sorted by kind and key so
// that the same change always encodes to the same bytes. Its cost is one
// pass over to's maps, and one over from's only for a map that lost keys;
// nothing is encoded.
func diff(from, to *State) []op {
	var ops []op
	if !cpumask.Equal(from.defaultCPUSet, to.defaultCPUSet) {
		ops = append(ops, op{kind: opSetDefault, cpus: to.defaultCPUSet})
	}

	kept, fromEntries := 0, 0
	for podUID, containers := range to.entries {
		old := from.entries[podUID]
		if sameMap(old, containers) {
			// Clones share a pod's map until it changes (copy on write):
			// the same map holds the same assignments.
			kept += len(containers)
			continue
		}
		for name, a := range containers {
			b, ok := old[name]
			if ok {
				kept++
			}
			if !ok || !sameAssignment(a, b) {
				ops = append(ops, op{kind: opSetAssignment, key: podUID, name: name, assignment: a})
			}
		}
	}
	for _, containers := range from.entries {
		fromEntries += len(containers)
	}
	if kept < fromEntries {
		for podUID, containers := range from.entries {
			now := to.entries[podUID]
			for name := range containers {
				if _, ok := now[name]; !ok {
					ops = append(ops, op{kind: opDeleteAssignment, key: podUID, name: name})
				}
			}
		}
	}

	ops = diffContainers(ops, from, to)
	ops = diffPods(ops, from, to)
	slices.SortFunc(ops, func(a, b op) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.key, b.key), cmp.Compare(a.name, b.name))
	})
	return ops
}

// diffContainers appends the changes of the container ids.
func diffContainers(ops []op, from, to *State) []op {
	if sameMap(from.containers, to.containers) {
		return ops // shared by clones until changed (copy on write)
	}
	kept := 0
	for id, ref := range to.containers {
		old, ok := from.containers[id]
		if ok {
			kept++
		}
		if !ok || old != ref {
			ops = append(ops, op{kind: opSetContainer, key: id, ref: ref})
		}
	}
	if kept < len(from.containers) {
		for id := range from.containers {
			if _, ok := to.containers[id]; !ok {
				ops = append(ops, op{kind: opDeleteContainer, key: id})
			}
		}
	}
	return ops
}

// diffPods appends the changes of the pod-level resources.
func diffPods(ops []op, from, to *State) []op {
	if sameMap(from.pods, to.pods) {
		return ops // shared by clones until changed (copy on write)
	}
	kept := 0
	for podUID, r := range to.pods {
		old, ok := from.pods[podUID]
		if ok {
			kept++
		}
		if !ok || old != r {
			ops = append(ops, op{kind: opSetPod, key: podUID, pod: r})
		}
	}
	if kept < len(from.pods) {
		for podUID := range from.pods {
			if _, ok := to.pods[podUID]; !ok {
				ops = append(ops, op{kind: opDeletePod, key: podUID})
			}
		}
	}
	return ops
}

// sameAssignment compares two assignments by content.
func sameAssignment(a, b Assignment) bool {
	return cpumask.Equal(a.Original, b.Original) && cpumask.Equal(a.Resized, b.Resized)
}

// apply performs one op on s. Unlike State.DeleteAssignment, deleting an
// assignment does not cascade to the container ids that point at it: a
// record lists those deletions itself, and an op touches one key only.
func (o op) apply(s *State) {
	switch o.kind {
	case opSetDefault:
		s.defaultCPUSet = o.cpus
	case opSetAssignment:
		s.SetAssignment(o.key, o.name, o.assignment)
	case opDeleteAssignment:
		s.deleteEntry(o.key, o.name)
	case opSetContainer:
		s.SetContainer(o.key, o.ref)
	case opDeleteContainer:
		s.DeleteContainer(o.key)
	case opSetPod:
		s.SetPodResources(o.key, o.pod)
	case opDeletePod:
		s.DeletePodResources(o.key)
	}
}

// sameMap reports whether a and b are the same (non-nil) map, not merely
// equal ones.
func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
