package state

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// TestSaveAndMarshalRefuseCPUIDsLoadRefuses checks that what Save and
// Marshal accept, Load reads back: CPU ids outside 0-65535 are refused
// with an error naming them, and nothing is written.
func TestSaveAndMarshalRefuseCPUIDsLoadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state func() *State
		want  string
	}{
		{"a negative baseline CPU", func() *State {
			s := New(cpuset.New(0))
			s.SetAssignment("p", "c", Assignment{Baseline: cpuset.New(-1, 1)})
			s.SetContainer("id", ContainerRef{PodUID: "p", Name: "c"})
			return s
		}, `pod "p" container "c": baseline names CPUs [-1], outside the CPU ids 0-65535`},
		{"a resized CPU above the largest", func() *State {
			s := New(cpuset.New(0))
			s.SetAssignment("p", "c", Assignment{Baseline: cpuset.New(1), Resized: cpuset.New(1, cpumask.MaxID+1)})
			return s
		}, `pod "p" container "c": resized names CPUs [65536], outside the CPU ids 0-65535`},
		{"a delayed CPU above the largest", func() *State {
			s := New(cpuset.New(0))
			s.SetAssignment("p", "c", Assignment{Baseline: cpuset.New(1), Delayed: cpuset.New(cpumask.MaxID + 1), ReleaseAt: time.Unix(1, 0)})
			return s
		}, `pod "p" container "c": delayed names CPUs [65536], outside the CPU ids 0-65535`},
		{"a shared pool CPU above the largest", func() *State {
			return New(cpuset.New(0, 70000))
		}, `defaultCpuSet names CPUs [70000], outside the CPU ids 0-65535`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Marshal(tc.state()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Marshal: got error %v, want one containing %q", err, tc.want)
			}
			st := newTestStore(t)
			if err := st.Save(tc.state()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Save: got error %v, want one containing %q", err, tc.want)
			}
			if files, err := stateFiles(osFS{}, st.dir); err != nil || len(files) != 0 {
				t.Errorf("Save wrote %v (err %v) for a state it refused", files, err)
			}
		})
	}
}

// TestValidateCPUsSharedWithinAPod: the containers of a pod may share CPUs
// only with an init container, as the kubelet lets the containers started
// after an ordinary init container reuse its CPUs; no container shares
// with another pod, the shared pool or a hold, delayed CPUs included.
func TestValidateCPUsSharedWithinAPod(t *testing.T) {
	type entry struct {
		pod, name, cpus, delayed string
		init                     bool
	}
	releaseAt := time.Date(2026, 11, 25, 12, 0, 30, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		entries []entry
		holds   map[string]string
		want    string // "" when valid
	}{
		{name: "the kubelet's reuse: init1 {1,2}, a sidecar on 1, init2 {2,3}, the app on {2,3}", entries: []entry{
			{pod: "p", name: "init1", cpus: "1-2", init: true}, {pod: "p", name: "sidecar", cpus: "1"},
			{pod: "p", name: "init2", cpus: "2-3", init: true}, {pod: "p", name: "app", cpus: "2-3"},
		}},
		{name: "delayed CPUs an init container of the pod has", entries: []entry{
			{pod: "p", name: "init", cpus: "1-2", init: true}, {pod: "p", name: "app", cpus: "3", delayed: "2"},
		}},
		{name: "two containers of a pod", entries: []entry{{pod: "p", name: "app", cpus: "1-2"}, {pod: "p", name: "side", cpus: "2"}},
			want: `pod "p" container "app" (CPUs "1-2") and pod "p" container "side" (CPUs "2") overlap on CPUs "2", and neither is an init container`},
		{name: "a sidecar and the app after an init container", entries: []entry{
			{pod: "p", name: "init1", cpus: "1-2", init: true}, {pod: "p", name: "sidecar", cpus: "1"}, {pod: "p", name: "app", cpus: "1-2"},
		}, want: `pod "p" container "app" (CPUs "1-2") and pod "p" container "sidecar" (CPUs "1") overlap on CPUs "1", and neither is an init container`},
		{name: "delayed CPUs another container of the pod has", entries: []entry{
			{pod: "p", name: "app", cpus: "1", delayed: "2"}, {pod: "p", name: "side", cpus: "2"},
		}, want: `pod "p" container "app" (CPUs "1-2") and pod "p" container "side" (CPUs "2") overlap on CPUs "2", and neither is an init container`},
		{name: "an init container's CPUs in another pod", entries: []entry{
			{pod: "p1", name: "init", cpus: "1-2", init: true}, {pod: "p2", name: "app", cpus: "2"},
		}, want: `pod "p1" container "init" (CPUs "1-2") and pod "p2" container "app" (CPUs "2") overlap on CPUs "2"`},
		{name: "two init containers of different pods", entries: []entry{
			{pod: "p1", name: "init", cpus: "1-2", init: true}, {pod: "p2", name: "init", cpus: "2", init: true},
		}, want: `pod "p1" container "init" (CPUs "1-2") and pod "p2" container "init" (CPUs "2") overlap on CPUs "2"`},
		{name: "delayed CPUs in another pod", entries: []entry{
			{pod: "p1", name: "app", cpus: "1", delayed: "3"}, {pod: "p2", name: "app", cpus: "2-3"},
		}, want: `pod "p1" container "app" (CPUs "1,3") and pod "p2" container "app" (CPUs "2-3") overlap on CPUs "3"`},
		{name: "an init container's CPUs in the shared pool", entries: []entry{{pod: "p", name: "init", cpus: "0-1", init: true}},
			want: `pod "p" container "init" (CPUs "0-1") overlaps defaultCpuSet "0,6-7" on CPUs "0"`},
		{name: "an init container's CPUs held for its pod", entries: []entry{{pod: "p", name: "init", cpus: "1-2", init: true}},
			holds: map[string]string{"p": "2"}, want: `hold of pod "p" (CPUs "2") and pod "p" container "init" (CPUs "1-2") overlap on CPUs "2"`},
		{name: "delayed CPUs held for another pod", entries: []entry{{pod: "p", name: "app", cpus: "1", delayed: "4-5"}},
			holds: map[string]string{"q": "5"}, want: `hold of pod "q" (CPUs "5") and pod "p" container "app" (CPUs "1,4-5") overlap on CPUs "5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(cpus(t, "0,6-7"))
			for _, e := range tc.entries {
				a := Assignment{Baseline: cpus(t, e.cpus), Init: e.init}
				if e.delayed != "" {
					a.Delayed, a.ReleaseAt = cpus(t, e.delayed), releaseAt
				}
				s.SetAssignment(e.pod, e.name, a)
			}
			for pod, held := range tc.holds {
				s.SetHold(pod, Hold{CPUs: cpus(t, held), Since: releaseAt})
			}
			err := s.Validate(cpus(t, "0-7"))
			if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
				t.Errorf("Validate: %v\nwant %s", err, cmp.Or(tc.want, "nil"))
			}
		})
	}
}
