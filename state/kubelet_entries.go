package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// kubeletImport collects what a kubelet checkpoint says while it is
// checked.
type kubeletImport struct {
	online     cpuset.CPUSet
	warnings   []string
	containers map[ContainerRef]Assignment
	source     map[ContainerRef]string // the entry a container came from
}

// addEntries reads "entries" in whichever layout each entry has.
func (imp *kubeletImport) addEntries(entries map[string]json.RawMessage, resolve func(string) (ContainerRef, bool)) error {
	for _, key := range slices.Sorted(maps.Keys(entries)) {
		raw := bytes.TrimSpace(entries[key])
		switch {
		case len(raw) > 0 && raw[0] == '"': // v1: container id → cpuset
			var cpus string
			if err := json.Unmarshal(raw, &cpus); err != nil {
				return fmt.Errorf("entries[%q]: %w", key, err)
			}
			ref, ok := ContainerRef{}, false
			if resolve != nil {
				ref, ok = resolve(key)
			}
			if !ok {
				imp.warn("container id %q (CPUs %q): cannot tell its pod and name; not imported", key, cpus)
				continue
			}
			if err := imp.add(ref, fmt.Sprintf("entries[%q]", key), cpus, ""); err != nil {
				return err
			}
		case len(raw) > 0 && raw[0] == '{': // v2 or KEP-5554 v3: pod → container → …
			if err := imp.addPod(key, raw); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entries[%q] is %s: neither a cpuset string (v1) nor a map of containers", key, raw)
		}
	}
	return nil
}

// addPod reads one pod's containers, each a cpuset string (v2) or an
// {original, resized} object (KEP-5554).
func (imp *kubeletImport) addPod(podUID string, raw json.RawMessage) error {
	var containers map[string]json.RawMessage
	if err := json.Unmarshal(raw, &containers); err != nil {
		return fmt.Errorf("entries[%q]: %w", podUID, err)
	}
	for _, name := range slices.Sorted(maps.Keys(containers)) {
		ref := ContainerRef{PodUID: podUID, Name: name}
		where := fmt.Sprintf("entries[%q][%q]", podUID, name)
		value := bytes.TrimSpace(containers[name])
		var err error
		switch {
		case len(value) > 0 && value[0] == '"':
			var cpus string
			if err = json.Unmarshal(value, &cpus); err == nil {
				err = imp.add(ref, where, cpus, "")
			}
		case len(value) > 0 && value[0] == '{':
			var e kubeletContainerCPUs
			if err = json.Unmarshal(value, &e); err == nil {
				err = imp.add(ref, where, e.Original, e.Resized)
			}
		default:
			err = fmt.Errorf("%s is %s: neither a cpuset string nor {original, resized}", where, value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// add checks and records one container's kubelet assignment.
func (imp *kubeletImport) add(ref ContainerRef, where, originalText, resizedText string) error {
	if ref.PodUID == "" || ref.Name == "" {
		return fmt.Errorf("%s names %s: empty pod UID or container name", where, ref)
	}
	if prev, dup := imp.source[ref]; dup {
		return fmt.Errorf("%s and %s both assign CPUs to %s", prev, where, ref)
	}
	original, err := cpumask.Parse(originalText, cpumask.MaxID)
	if err != nil {
		return fmt.Errorf("%s: cpuset %q does not parse: %w", where, originalText, err)
	}
	resized, err := cpumask.Parse(resizedText, cpumask.MaxID)
	if err != nil {
		return fmt.Errorf("%s: resized %q does not parse: %w", where, resizedText, err)
	}
	if original.IsEmpty() {
		imp.warn("%s: %s has an empty cpuset; not imported", where, ref)
		return nil
	}
	a := Assignment{Baseline: original, Resized: resized}
	if err := validateAssignment(ref, a, &imp.online); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	imp.containers[ref] = a
	imp.source[ref] = where
	return nil
}

// applyBaselines gives the containers the baselines V4's data recorded
// (baselines, or originals in the KEP's earlier drafts): a container's
// entry holds its current CPUs, which become its resized set when they
// differ from its baseline and must contain it.
func (imp *kubeletImport) applyBaselines(baselines, originals map[string]map[string]kubeletBaseline) error {
	key := "baselines"
	switch {
	case len(baselines) > 0 && len(originals) > 0:
		return fmt.Errorf("data holds both baselines and originals: it is not a layout the kubelet writes")
	case len(originals) > 0:
		baselines, key = originals, "originals"
	}
	for _, podUID := range slices.Sorted(maps.Keys(baselines)) {
		for _, name := range slices.Sorted(maps.Keys(baselines[podUID])) {
			ref := ContainerRef{PodUID: podUID, Name: name}
			where := fmt.Sprintf("%s[%q][%q]", key, podUID, name)
			b := baselines[podUID][name]
			text := b.Baseline
			if text == nil {
				text = b.Original
			}
			if text == nil {
				return fmt.Errorf("%s has neither %q nor %q", where, "baseline", "original")
			}
			baseline, err := cpumask.Parse(*text, cpumask.MaxID)
			if err != nil {
				return fmt.Errorf("%s: baseline %q does not parse: %w", where, *text, err)
			}
			a, ok := imp.containers[ref]
			switch {
			case !ok:
				imp.warn("%s: %s has a baseline (CPUs %q) but no entry; not imported", where, ref, *text)
				continue
			case baseline.IsEmpty():
				imp.warn("%s: %s has an empty baseline; its current CPUs are imported as its baseline", where, ref)
				continue
			}
			current := a.Assigned()
			if !baseline.IsSubsetOf(current) {
				return fmt.Errorf("%s: %s runs on CPUs %q (%s), which do not contain its baseline %q (missing CPUs %q): "+
					"a resize never takes baseline CPUs away", where, ref, current, imp.source[ref], baseline, baseline.Difference(current))
			}
			a = Assignment{Baseline: baseline}
			if !current.Equals(baseline) {
				a.Resized = current
			}
			if err := validateAssignment(ref, a, &imp.online); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			imp.containers[ref] = a
		}
	}
	return nil
}

// parsePodEntries parses "podEntries" (pod UID → the pod's whole
// allocation under the pod scope).
func (imp *kubeletImport) parsePodEntries(podEntries map[string]kubeletPodEntry) (map[string]cpuset.CPUSet, error) {
	sets := make(map[string]cpuset.CPUSet, len(podEntries))
	for _, podUID := range slices.Sorted(maps.Keys(podEntries)) {
		text := podEntries[podUID].CPUSet
		set, err := cpumask.Parse(text, cpumask.MaxID)
		if err != nil {
			return nil, fmt.Errorf("podEntries[%q]: cpuSet %q does not parse: %w", podUID, text, err)
		}
		if err := insideOnline(fmt.Sprintf("podEntries[%q]: cpuSet", podUID), set, imp.online); err != nil {
			return nil, err
		}
		sets[podUID] = set
	}
	return sets, nil
}

// dropReusedCPUs keeps, where containers of one pod overlap, the container
// with more CPUs (then the first by name) and warns about the others: the
// kubelet records an init container's CPUs and lets the app containers
// that follow reuse them, which this plugin's state cannot express.
func (imp *kubeletImport) dropReusedCPUs() {
	byPod := map[string][]ContainerRef{}
	for ref := range imp.containers {
		byPod[ref.PodUID] = append(byPod[ref.PodUID], ref)
	}
	for _, refs := range byPod {
		slices.SortFunc(refs, func(a, b ContainerRef) int {
			if d := imp.containers[b].Assigned().Size() - imp.containers[a].Assigned().Size(); d != 0 {
				return d
			}
			return strings.Compare(a.Name, b.Name)
		})
		var kept []ContainerRef
		for _, ref := range refs {
			cpus := imp.containers[ref].Assigned()
			if keeper, overlaps := firstOverlap(imp.containers, kept, cpus); overlaps {
				imp.warn("%s (CPUs %q) shares CPUs %q with container %q of the same pod (kubelet init-container CPU reuse); kept %q, not imported",
					ref, cpus, cpus.Intersection(imp.containers[keeper].Assigned()), keeper.Name, keeper.Name)
				delete(imp.containers, ref)
				continue
			}
			kept = append(kept, ref)
		}
	}
}

// firstOverlap returns the first of refs whose assigned CPUs meet cpus.
func firstOverlap(containers map[ContainerRef]Assignment, refs []ContainerRef, cpus cpuset.CPUSet) (ContainerRef, bool) {
	for _, ref := range refs {
		if !containers[ref].Assigned().Intersection(cpus).IsEmpty() {
			return ref, true
		}
	}
	return ContainerRef{}, false
}

// checkPodsDisjoint checks that no CPU is held by two pods or by a pod and
// the shared pool, counting a pod's pod-level CPUs and its containers'
// CPUs, and warns about pod-level CPUs no container holds.
func (imp *kubeletImport) checkPodsDisjoint(podSets map[string]cpuset.CPUSet, defaultSet cpuset.CPUSet) error {
	footprint := map[string]cpuset.CPUSet{}
	for podUID, set := range podSets {
		footprint[podUID] = set
	}
	held := map[string]cpuset.CPUSet{}
	for ref, a := range imp.containers {
		held[ref.PodUID] = held[ref.PodUID].Union(a.Assigned())
		footprint[ref.PodUID] = footprint[ref.PodUID].Union(a.Assigned())
	}
	owner := map[int]string{}
	for _, podUID := range slices.Sorted(maps.Keys(footprint)) {
		cpus := footprint[podUID]
		if shared := cpus.Intersection(defaultSet); !shared.IsEmpty() {
			return fmt.Errorf("pod %q holds CPUs %q that are also in defaultCpuSet %q", podUID, shared, defaultSet)
		}
		for _, cpu := range cpus.List() {
			if other, taken := owner[cpu]; taken {
				return fmt.Errorf("pods %q (CPUs %q) and %q (CPUs %q) overlap on CPUs %q",
					other, footprint[other], podUID, cpus, footprint[other].Intersection(cpus))
			}
			owner[cpu] = podUID
		}
		if left := podSets[podUID].Difference(held[podUID]); !left.IsEmpty() {
			imp.warn("pod %q: pod-level CPUs %q are held by no container exclusively (the pod's shared pool); not imported",
				podUID, left)
		}
	}
	return nil
}

func (imp *kubeletImport) warn(format string, args ...any) {
	imp.warnings = append(imp.warnings, fmt.Sprintf(format, args...))
}
