package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// The reference encoder: a state converted to the on-disk types and
// encoded by encoding/json, which is what Load re-encodes to verify the
// checksum. The tests also use it to write files that Save would refuse
// to write.

// encodeDisk converts a state into its on-disk form, checksum unset.
func encodeDisk(s *State) diskCheckpoint {
	cp := diskCheckpoint{
		PolicyName:    PolicyName,
		FormatVersion: FormatVersion,
		DefaultCPUSet: cpumask.Format(s.DefaultCPUSet()),
		Entries:       make(map[string]map[string]diskEntry, len(s.entries)),
		Containers:    make(map[string]diskContainerRef, s.containers.Len()),
		Pods:          make(map[string]diskPod, len(s.pods)),
		Holds:         make(map[string]diskHold, len(s.holds)),
	}
	for podUID, containers := range s.entries {
		if len(containers) == 0 {
			continue
		}
		entries := make(map[string]diskEntry, len(containers))
		for name, a := range containers {
			e := diskEntry{Baseline: cpumask.Format(a.Baseline), Resized: cpumask.Format(a.Resized), Init: a.Init,
				DeviceNodes: cpuset.New(a.DeviceNodes.Nodes()...).String()}
			if !a.Delayed.IsEmpty() || !a.ReleaseAt.IsZero() {
				e.Delayed = &diskDelayed{CPUs: cpumask.Format(a.Delayed), ReleaseAt: a.ReleaseAt.UTC().Format(time.RFC3339Nano)}
			}
			entries[name] = e
		}
		cp.Entries[podUID] = entries
	}
	for id, ref := range s.containers.All() {
		cp.Containers[id] = diskContainerRef(ref)
	}
	for podUID, r := range s.pods {
		cp.Pods[podUID] = diskPod{Resources: diskResources(r.Resources), Overhead: diskResources(r.Overhead)}
	}
	if s.config != nil {
		cp.Config = &diskConfig{ReservedCPUSet: cpumask.Format(s.config.ReservedCPUs), Keys: s.config.Keys}
	}
	for podUID, h := range s.holds {
		cp.Holds[podUID] = diskHold{CPUs: cpumask.Format(h.CPUs), Since: h.Since.UTC().Format(time.RFC3339Nano)}
	}
	return cp
}

// seal encodes cp, a checkpoint (or a look-alike of another version) whose
// checksum field is 0, with encoding/json and its checksum.
func seal(cp any) ([]byte, error) {
	canonical, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	if !bytes.HasSuffix(canonical, []byte(zeroChecksumSuffix)) {
		return nil, fmt.Errorf("encode checkpoint: canonical encoding does not end in %s", zeroChecksumSuffix)
	}
	return sealCanonical(canonical), nil
}

// referenceEncoding is what encoding/json writes for s.
func referenceEncoding(t testing.TB, s *State) []byte {
	t.Helper()
	data, err := seal(encodeDisk(s))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestEncoderMatchesEncodingJSON(t *testing.T) {
	escaping := New(cpus(t, "0"))
	escaping.SetAssignment("p\"<&>\\\u00e9\u2028\u2029\x7f", "c\n\t\b\f\r\x01", Assignment{Baseline: cpus(t, "1")})
	escaping.SetContainer("id \xff\xfe é", ContainerRef{PodUID: "p\"<&>\\\u00e9\u2028\u2029\x7f", Name: "c\n\t\b\f\r\x01"})
	escaping.SetPodResources("\xed\xa0\x80", PodRecord{Resources: ResourceRecord{CPUQuota: -1, MemoryLimit: -5}})
	podsOnly := New(cpuset.New())
	podsOnly.SetPodResources("p", PodRecord{Overhead: ResourceRecord{CPUPeriod: 1}})
	emptyPod := sampleState(t)
	emptyPod.entries["ghost"] = map[string]Assignment{}
	releases := New(cpus(t, "0"))
	releases.SetAssignment("p", "whole-second", Assignment{Baseline: cpus(t, "1"), Delayed: cpus(t, "2-3,5"),
		ReleaseAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -7*3600))})
	releases.SetAssignment("p", "nanoseconds", Assignment{Baseline: cpus(t, "6"), Resized: cpus(t, "6-7"), Init: true,
		Delayed: cpus(t, "8"), ReleaseAt: time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC)})
	devices := New(cpus(t, "0"))
	for i, list := range []string{"0", "63", "0-63", "1,3,5", "0-1,62-63"} {
		devices.SetAssignment("p", fmt.Sprint("c", i), Assignment{Baseline: cpuset.New(i + 1), DeviceNodes: nodes(t, list)})
	}
	devices.SetAssignment("p", "init", Assignment{Baseline: cpus(t, "8"), Init: true, DeviceNodes: nodes(t, "2"),
		Delayed: cpus(t, "9"), ReleaseAt: time.Unix(5, 0)})
	states := map[string]*State{
		"device nodes":             devices,
		"empty":                    New(cpuset.New()),
		"zero value":               {},
		"sample":                   sampleState(t),
		"every part of a state":    sampleStateFull(t),
		"init and delayed entries": releases,
		"names that need escaping": escaping,
		"pod resources only":       podsOnly,
		"a pod with an empty map":  emptyPod,
		commitNodes[0].String():    commitNodes[0].state(),
		commitNodes[1].String():    commitNodes[1].state(),
	}
	for name, s := range states {
		t.Run(name, func(t *testing.T) {
			got, want := marshalCurrent(s), referenceEncoding(t, s)
			if !bytes.Equal(got, want) {
				t.Errorf("encoder writes\n%s\nencoding/json writes\n%s", got, want)
			}
		})
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	var inputs []string
	for b := range 256 {
		inputs = append(inputs, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"z")
	}
	for r := rune(0); r < 0x3000; r += 7 {
		inputs = append(inputs, string(r))
	}
	inputs = append(inputs, "\u2028\u2029", "\xe2\x80", strings.Repeat("é", 5)+"\xff", string(utf8.MaxRune), "\U0010ffff")
	for _, s := range inputs {
		checkJSONString(t, s)
	}
}

// checkJSONString fails the test if appendJSONString and encoding/json
// write s differently.
func checkJSONString(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
		t.Errorf("appendJSONString(%q) = %s, encoding/json writes %s", s, got, want)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("pod-a")
	f.Add("\u2028<\xff")
	f.Fuzz(checkJSONString)
}

// TestCachingEncoderFollowsEveryChange encodes a sequence of states with
// one caching encoder, as a Store does, each state a change of the one
// before (commits: resizes, a pod removed, one re-created under the same
// UID, entries and container ids added and removed, a state loaded from
// disk, which shares no map with the others), and checks each against
// encoding/json: a pod's text, or the container ids', is reused only when
// it encodes the same map.
func TestCachingEncoderFollowsEveryChange(t *testing.T) {
	node := commitNodes[0]
	base := node.state()
	loaded, err := Unmarshal(referenceEncoding(t, base), cpuset.New(makeRange(0, node.cpus-1)...))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		change func(s *State) *State
	}{
		{"resize", func(s *State) *State { return node.resize(s, 3) }},
		{"resize back", func(s *State) *State { return node.resize(s, 3) }},
		{"unchanged", func(s *State) *State { return s.Clone() }},
		{"pod removed", func(s *State) *State { c := s.Clone(); c.DeletePod(node.podUID(5)); return c }},
		{"pod back under its UID", func(s *State) *State {
			c := s.Clone()
			c.SetAssignment(node.podUID(5), "app", Assignment{Baseline: cpus(t, "10")})
			return c
		}},
		{"a second container", func(s *State) *State {
			c := s.Clone()
			c.SetAssignment(node.podUID(5), "sidecar", Assignment{Baseline: cpus(t, "11")})
			return c
		}},
		{"the second container's id", func(s *State) *State {
			c := s.Clone()
			c.SetContainer("ctr-sidecar", ContainerRef{PodUID: node.podUID(5), Name: "sidecar"})
			return c
		}},
		{"the id removed", func(s *State) *State { c := s.Clone(); c.DeleteContainer("ctr-sidecar"); return c }},
		{"the second container removed", func(s *State) *State {
			c := s.Clone()
			c.DeleteAssignment(node.podUID(5), "sidecar")
			return c
		}},
		{"every pod removed", func(s *State) *State {
			c := s.Clone()
			for _, pod := range c.PodUIDs() {
				c.DeletePod(pod)
			}
			return c
		}},
		{"every id forgotten", func(s *State) *State { c := s.Clone(); c.DeleteContainers(); return c }},
		{"the state loaded from disk", func(*State) *State { return loaded }},
		{"a resize of it", func(s *State) *State { return node.resize(s, 7) }},
	}
	e := newCachingEncoder()
	s := base
	if got, want := sealCanonical(e.canonical(s)), referenceEncoding(t, s); !bytes.Equal(got, want) {
		t.Fatal("the first encoding differs from encoding/json's")
	}
	for _, step := range steps {
		s = step.change(s)
		if got, want := sealCanonical(e.canonical(s)), referenceEncoding(t, s); !bytes.Equal(got, want) {
			t.Fatalf("after %s: the caching encoder writes\n%.300s\nencoding/json writes\n%.300s", step.name, got, want)
		}
		if len(e.pods) != len(s.PodUIDs()) {
			t.Fatalf("after %s: %d pods' text kept for %d pods", step.name, len(e.pods), len(s.PodUIDs()))
		}
	}
}
