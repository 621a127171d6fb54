package state

import (
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/cpuset"
)

// cpus parses a CPU list or fails the test.
func cpus(t testing.TB, list string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(list)
	if err != nil {
		t.Fatalf("bad CPU list %q in test: %v", list, err)
	}
	return set
}

func nodes(t testing.TB, list string) NodeSet {
	t.Helper()
	set, err := ParseNodeSet(list)
	if err != nil {
		t.Fatalf("bad node list %q in test: %v", list, err)
	}
	return set
}

func TestAssignmentAssigned(t *testing.T) {
	tests := []struct {
		name     string
		a        Assignment
		expected string
	}{
		{"never resized", Assignment{Baseline: cpuset.New(1, 2)}, "1-2"},
		{"grown", Assignment{Baseline: cpuset.New(1, 2), Resized: cpuset.New(1, 2, 3, 4)}, "1-4"},
		{"shrunk back to baseline", Assignment{Baseline: cpuset.New(1, 2), Resized: cpuset.New(1, 2)}, "1-2"},
		{"empty", Assignment{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Assigned().String(); got != tc.expected {
				t.Errorf("Assigned() = %q, want %q", got, tc.expected)
			}
		})
	}
}

// sampleState is a consistent state of two pods on CPUs 0-15.
func sampleState(t testing.TB) *State {
	s := New(cpus(t, "0,8-15"))
	s.SetAssignment("pod-a", "app", Assignment{Baseline: cpus(t, "1-2"), Resized: cpus(t, "1-4")})
	s.SetAssignment("pod-a", "sidecar", Assignment{Baseline: cpus(t, "5")})
	s.SetAssignment("pod-b", "db", Assignment{Baseline: cpus(t, "6-7")})
	s.SetContainer("c-app", ContainerRef{PodUID: "pod-a", Name: "app"})
	s.SetContainer("c-sidecar", ContainerRef{PodUID: "pod-a", Name: "sidecar"})
	s.SetContainer("c-db", ContainerRef{PodUID: "pod-b", Name: "db"})
	s.SetPodResources("pod-a", PodRecord{
		Resources: ResourceRecord{CPUShares: 5120, CPUQuota: 500000, CPUPeriod: 100000, MemoryLimit: 1 << 30},
		Overhead:  ResourceRecord{CPUShares: 102},
	})
	return s
}

// sampleStateFull is sampleState with every other part of a state
// (testdata/checkpoint-v4.json): an init container whose CPUs pod-a's app
// reuses, CPUs 9-10 pod-b's db keeps until their delayed release, the
// NUMA nodes of app's and db's devices, CPU 8 held for pod-b, and a
// configuration record.
func sampleStateFull(t testing.TB) *State {
	s := sampleState(t)
	app, _ := s.Assignment("pod-a", "app")
	app.DeviceNodes = nodes(t, "0")
	s.SetAssignment("pod-a", "app", app)
	s.SetAssignment("pod-a", "setup", Assignment{Baseline: cpus(t, "1-2"), Init: true})
	s.SetAssignment("pod-b", "db", Assignment{Baseline: cpus(t, "6-7"), Resized: cpus(t, "6-7"),
		Delayed: cpus(t, "9-10"), ReleaseAt: time.Date(2026, 11, 25, 12, 0, 30, 250000000, time.UTC),
		DeviceNodes: nodes(t, "0-1")})
	s.SetDefaultCPUSet(cpus(t, "0,11-15"))
	s.SetHold("pod-b", Hold{CPUs: cpus(t, "8"), Since: time.Date(2026, 11, 25, 12, 0, 0, 500000000, time.UTC)})
	s.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "0"), Keys: map[string]string{
		"cpuManagerPolicyOptions.full-pcpus-only": "true",
		"reservedSystemCPUs":                      "0",
		"topologyManagerPolicy":                   "none",
	}})
	return s
}

// sampleStateV3 is sampleStateFull without device nodes, which format 3
// cannot hold (testdata/checkpoint-v3.json).
func sampleStateV3(t testing.TB) *State {
	s := sampleStateFull(t)
	for ref, a := range s.Assignments() {
		a.DeviceNodes = 0
		s.SetAssignment(ref.PodUID, ref.Name, a)
	}
	return s
}

func TestAssignmentHeld(t *testing.T) {
	for _, tc := range []struct {
		a    Assignment
		want string
	}{
		{Assignment{Baseline: cpuset.New(1, 2)}, "1-2"},
		{Assignment{Baseline: cpuset.New(1), Resized: cpuset.New(1, 2)}, "1-2"},
		{Assignment{Baseline: cpuset.New(1), Resized: cpuset.New(1, 2), Delayed: cpuset.New(5, 6)}, "1-2,5-6"},
	} {
		if got := tc.a.Held().String(); got != tc.want {
			t.Errorf("%+v.Held() = %q, want %q", tc.a, got, tc.want)
		}
	}
}

func TestStateQueries(t *testing.T) {
	s := sampleState(t)

	if a, ok := s.Assignment("pod-a", "app"); !ok || a.Assigned().String() != "1-4" || a.Baseline.String() != "1-2" {
		t.Errorf("Assignment(pod-a, app) = %v, %v; want baseline 1-2 assigned 1-4", a, ok)
	}
	if _, ok := s.Assignment("pod-a", "missing"); ok {
		t.Error("Assignment of an unknown container reported ok")
	}
	if _, ok := s.Assignment("no-pod", "app"); ok {
		t.Error("Assignment of an unknown pod reported ok")
	}
	if got := s.ExclusiveCPUs().String(); got != "1-7" {
		t.Errorf("ExclusiveCPUs() = %q, want 1-7", got)
	}
	if got := sampleStateFull(t).ExclusiveCPUs().String(); got != "1-7,9-10" {
		t.Errorf("ExclusiveCPUs() with an init container and delayed CPUs = %q, want 1-7,9-10", got)
	}
	if got := s.ContainersOfPod("pod-a"); !slices.Equal(got, []string{"app", "sidecar"}) {
		t.Errorf("ContainersOfPod(pod-a) = %v", got)
	}
	if got := s.ContainersOfPod("no-pod"); len(got) != 0 {
		t.Errorf("ContainersOfPod(no-pod) = %v, want none", got)
	}
	if ref, ok := s.Container("c-db"); !ok || ref != (ContainerRef{PodUID: "pod-b", Name: "db"}) {
		t.Errorf("Container(c-db) = %v, %v", ref, ok)
	}
	if id, ok := s.ContainerIDOf(ContainerRef{PodUID: "pod-a", Name: "sidecar"}); !ok || id != "c-sidecar" {
		t.Errorf("ContainerIDOf(pod-a/sidecar) = %q, %v", id, ok)
	}
	if _, ok := s.ContainerIDOf(ContainerRef{PodUID: "pod-a", Name: "nope"}); ok {
		t.Error("ContainerIDOf of an unknown entry reported ok")
	}
	if r, ok := s.PodResources("pod-a"); !ok || r.Resources.CPUQuota != 500000 || r.Overhead.CPUShares != 102 {
		t.Errorf("PodResources(pod-a) = %+v, %v", r, ok)
	}

	var visited []string
	s.ForEach(func(ref ContainerRef, a Assignment) {
		visited = append(visited, ref.PodUID+"/"+ref.Name+"="+a.Assigned().String())
	})
	want := []string{"pod-a/app=1-4", "pod-a/sidecar=5", "pod-b/db=6-7"}
	if !slices.Equal(visited, want) {
		t.Errorf("ForEach visited %v, want %v", visited, want)
	}
}

func TestContainerIDOfPicksSmallestOfDuplicates(t *testing.T) {
	s := New(cpuset.New())
	ref := ContainerRef{PodUID: "p", Name: "c"}
	s.SetContainer("zz", ref)
	s.SetContainer("aa", ref)
	s.SetContainer("mm", ref)
	if id, _ := s.ContainerIDOf(ref); id != "aa" {
		t.Errorf("ContainerIDOf = %q, want aa", id)
	}
}

func TestDeleteAssignment(t *testing.T) {
	s := sampleState(t)

	s.DeleteAssignment("pod-a", "app")
	if _, ok := s.Assignment("pod-a", "app"); ok {
		t.Error("assignment still there after DeleteAssignment")
	}
	if _, ok := s.Container("c-app"); ok {
		t.Error("container id of a deleted assignment still there")
	}
	if _, ok := s.Container("c-sidecar"); !ok {
		t.Error("DeleteAssignment removed another container's id")
	}
	if _, ok := s.entries["pod-a"]; !ok {
		t.Error("pod entry map removed while it still has a container")
	}

	s.DeleteAssignment("pod-a", "sidecar")
	if _, ok := s.entries["pod-a"]; ok {
		t.Error("empty pod entry map kept")
	}
	if _, ok := s.PodResources("pod-a"); !ok {
		t.Error("DeleteAssignment removed the pod's resources")
	}
	s.DeleteAssignment("no-pod", "x") // no panic, no change
	if err := s.Validate(cpus(t, "0-15")); err != nil {
		t.Errorf("state after deletions is inconsistent: %v", err)
	}
}

func TestDeletePod(t *testing.T) {
	s := sampleState(t)
	s.DeletePod("pod-a")
	if len(s.ContainersOfPod("pod-a")) != 0 {
		t.Error("pod-a still has assignments")
	}
	if _, ok := s.PodResources("pod-a"); ok {
		t.Error("pod-a still has pod resources")
	}
	for id, ref := range s.containers.All() {
		if ref.PodUID == "pod-a" {
			t.Errorf("container id %q of pod-a still there", id)
		}
	}
	if _, ok := s.Assignment("pod-b", "db"); !ok {
		t.Error("DeletePod removed another pod")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	if full := sampleStateFull(t); !full.Clone().Equal(full) {
		t.Fatal("the clone of a state with init and delayed entries differs from it")
	}
	s := sampleState(t)
	c := s.Clone()
	if !c.Equal(s) {
		t.Fatal("clone differs from original")
	}
	c.SetAssignment("pod-a", "app", Assignment{Baseline: cpus(t, "1-2")})
	c.SetAssignment("pod-c", "new", Assignment{Baseline: cpus(t, "8")})
	c.DeleteContainer("c-db")
	c.SetPodResources("pod-a", PodRecord{})
	c.SetDefaultCPUSet(cpus(t, "0"))

	if a, _ := s.Assignment("pod-a", "app"); a.Assigned().String() != "1-4" {
		t.Errorf("changing the clone changed the original's assignment to %v", a.Assigned())
	}
	if _, ok := s.Assignment("pod-c", "new"); ok {
		t.Error("adding to the clone added to the original")
	}
	if _, ok := s.Container("c-db"); !ok {
		t.Error("deleting from the clone's containers deleted from the original")
	}
	if r, _ := s.PodResources("pod-a"); r.Resources.CPUQuota != 500000 {
		t.Error("changing the clone's pod resources changed the original")
	}
	if s.DefaultCPUSet().String() != "0,8-15" {
		t.Error("changing the clone's default set changed the original")
	}
}

// TestSharedPoolTakesAndReturns checks TakeShared and ReturnShared on the
// pool's bitmap: the CPUs they move, and that a clone sharing the bitmap
// keeps its own pool (copy on write).
func TestSharedPoolTakesAndReturns(t *testing.T) {
	tests := []struct {
		name, take, give, want string
	}{
		{"take some", "8-9", "", "0,10-15"},
		{"take none of the pool", "1-2", "", "0,8-15"},
		{"take and give back", "8-15", "8", "0,8"},
		{"give beyond the first word", "", "64,127", "0,8-15,64,127"},
		{"take all", "0,8-15", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sampleState(t)
			c := s.Clone()
			c.TakeShared(cpus(t, tc.take))
			c.ReturnShared(cpus(t, tc.give))
			if got := c.DefaultCPUSet().String(); got != tc.want {
				t.Errorf("pool %q, want %q", got, tc.want)
			}
			if got := c.SharedMask().String(); got != tc.want {
				t.Errorf("pool's bitmap %q, want %q", got, tc.want)
			}
			if got := s.DefaultCPUSet().String(); got != "0,8-15" {
				t.Errorf("the original's pool became %q", got)
			}
		})
	}
}

// sinceOf returns when the hold of podUID began.
func sinceOf(s *State, podUID string) time.Time {
	h, _ := s.Hold(podUID)
	return h.Since
}

func TestEqual(t *testing.T) {
	base := sampleState(t)
	base.SetDefaultCPUSet(cpus(t, "0,10-15"))
	base.SetHold("pod-a", Hold{CPUs: cpus(t, "8"), Since: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)})
	releaseAt := time.Date(2026, 11, 25, 12, 0, 30, 0, time.UTC)
	db := Assignment{Baseline: cpus(t, "6-7"), Resized: cpus(t, "6-7"), Delayed: cpus(t, "9"), ReleaseAt: releaseAt}
	base.SetAssignment("pod-b", "db", db)
	base.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "0")})
	withDB := func(change func(a *Assignment)) func(s *State) {
		return func(s *State) {
			a := db
			change(&a)
			s.SetAssignment("pod-b", "db", a)
		}
	}
	tests := []struct {
		name   string
		change func(s *State)
		equal  bool
	}{
		{"unchanged", func(*State) {}, true},
		{"empty pod map is no pod", func(s *State) { s.entries["ghost"] = map[string]Assignment{} }, true},
		{"nil maps are empty maps", nil, true},
		{"default set", func(s *State) { s.SetDefaultCPUSet(cpus(t, "0,8-14")) }, false},
		{"baseline", func(s *State) { s.SetAssignment("pod-b", "db", Assignment{Baseline: cpus(t, "6")}) }, false},
		{"resized", func(s *State) {
			s.SetAssignment("pod-a", "app", Assignment{Baseline: cpus(t, "1-2"), Resized: cpus(t, "1-3")})
		}, false},
		{"resized equal to baseline is not unset", withDB(func(a *Assignment) { a.Resized = cpuset.New() }), false},
		{"an init container", withDB(func(a *Assignment) { a.Init = true }), false},
		{"device nodes", withDB(func(a *Assignment) { a.DeviceNodes = nodes(t, "1") }), false},
		{"delayed CPUs", withDB(func(a *Assignment) { a.Delayed = cpus(t, "8-9") }), false},
		{"no delayed CPUs", withDB(func(a *Assignment) { a.Delayed, a.ReleaseAt = cpuset.New(), time.Time{} }), false},
		{"the release time", withDB(func(a *Assignment) { a.ReleaseAt = releaseAt.Add(time.Nanosecond) }), false},
		{"the same release time in another zone", withDB(func(a *Assignment) { a.ReleaseAt = releaseAt.In(time.FixedZone("X", 3600)) }), true},
		{"extra assignment", func(s *State) { s.SetAssignment("pod-c", "x", Assignment{Baseline: cpus(t, "8")}) }, false},
		{"missing assignment", func(s *State) { s.DeleteAssignment("pod-b", "db") }, false},
		{"container id", func(s *State) { s.SetContainer("c-db", ContainerRef{PodUID: "pod-b", Name: "other"}) }, false},
		{"pod resources", func(s *State) { s.SetPodResources("pod-b", PodRecord{}) }, false},
		{"a hold", func(s *State) { s.SetHold("pod-b", Hold{CPUs: cpus(t, "8")}) }, false},
		{"a held CPU", func(s *State) { s.SetHold("pod-a", Hold{CPUs: cpus(t, "9"), Since: sinceOf(s, "pod-a")}) }, false},
		{"when a hold began", func(s *State) { s.SetHold("pod-a", Hold{CPUs: cpus(t, "8"), Since: time.Unix(1, 0)}) }, false},
		{"the same instant in another zone", func(s *State) {
			s.SetHold("pod-a", Hold{CPUs: cpus(t, "8"), Since: sinceOf(s, "pod-a").In(time.FixedZone("X", 3600))})
		}, true},
		{"no configuration record", func(s *State) { s.config = nil }, false},
		{"reserved CPUs", func(s *State) {
			s.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "0-1"), Keys: map[string]string{"k": "v"}})
		}, false},
		{"a configuration key", func(s *State) {
			s.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "0"), Keys: map[string]string{"k": "w"}})
		}, false},
		{"no keys is empty keys", func(s *State) { s.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "0"), Keys: map[string]string{}}) }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base.Clone(), base.Clone()
			if tc.change == nil {
				a, b = New(cpuset.New()), &State{}
			} else {
				tc.change(b)
			}
			if got := a.Equal(b); got != tc.equal {
				t.Errorf("a.Equal(b) = %v, want %v", got, tc.equal)
			}
			if got := b.Equal(a); got != tc.equal {
				t.Errorf("b.Equal(a) = %v, want %v", got, tc.equal)
			}
		})
	}
}

func TestZeroStateMutators(t *testing.T) {
	var s State
	s.SetAssignment("p", "c", Assignment{Baseline: cpuset.New(1)})
	s.SetContainer("id", ContainerRef{PodUID: "p", Name: "c"})
	s.SetPodResources("p", PodRecord{})
	if err := s.Validate(cpuset.New(0, 1)); err != nil {
		t.Errorf("state built from the zero value is inconsistent: %v", err)
	}
}

// TestCloneIsDeep: writes to a pod's assignments in either copy never show
// in the other.
func TestCloneIsDeep(t *testing.T) {
	s := New(cpuset.New(0))
	s.SetAssignment("pod", "a", Assignment{Baseline: cpuset.New(1)})
	s.SetAssignment("pod", "b", Assignment{Baseline: cpuset.New(2)})
	c := s.Clone()
	c.SetAssignment("pod", "a", Assignment{Baseline: cpuset.New(1), Resized: cpuset.New(1, 3)})
	c.DeleteAssignment("pod", "b")
	c.SetAssignment("other", "x", Assignment{Baseline: cpuset.New(4)})
	if a, _ := s.Assignment("pod", "a"); a.Resized.Size() != 0 {
		t.Errorf("a write to the clone changed the original: %+v", a)
	}
	if _, ok := s.Assignment("pod", "b"); !ok {
		t.Errorf("a deletion in the clone changed the original")
	}
	if _, ok := s.Assignment("other", "x"); ok {
		t.Errorf("a new pod in the clone shows in the original")
	}
	s.DeleteAssignment("pod", "a")
	if a, ok := c.Assignment("pod", "a"); !ok || a.Resized.String() != "1,3" {
		t.Errorf("a deletion in the original changed the clone: %+v %v", a, ok)
	}
}

func TestHoldsAndConfigRecord(t *testing.T) {
	s := sampleStateFull(t)
	since := time.Date(2026, 11, 25, 12, 0, 0, 500000000, time.UTC)
	if h, ok := s.Hold("pod-b"); !ok || h.CPUs.String() != "8" || !h.Since.Equal(since) {
		t.Errorf("Hold(pod-b) = %+v, %v", h, ok)
	}
	if _, ok := s.Hold("pod-a"); ok {
		t.Error("Hold of a pod without one reported ok")
	}
	s.SetHold("pod-a", Hold{CPUs: cpus(t, "9"), Since: since})
	got := map[string]string{}
	for pod, h := range s.Holds() {
		got[pod] = h.CPUs.String()
	}
	if want := map[string]string{"pod-a": "9", "pod-b": "8"}; !maps.Equal(got, want) {
		t.Errorf("Holds() = %v, want %v", got, want)
	}
	s.DeleteHold("pod-a")
	if _, ok := s.Hold("pod-a"); ok {
		t.Error("DeleteHold left the hold")
	}
	s.DeletePod("pod-b")
	if _, ok := s.Hold("pod-b"); ok {
		t.Error("DeletePod left the pod's hold")
	}

	c, ok := s.ConfigRecord()
	if !ok || c.ReservedCPUs.String() != "0" || c.Keys["topologyManagerPolicy"] != "none" {
		t.Errorf("ConfigRecord() = %+v, %v", c, ok)
	}
	c.Keys["topologyManagerPolicy"] = "restricted" // a copy: the state keeps its own
	if again, _ := s.ConfigRecord(); again.Keys["topologyManagerPolicy"] != "none" {
		t.Error("changing the returned record changed the state's")
	}
	keys := map[string]string{"k": "v"}
	s.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "0-1"), Keys: keys})
	keys["k"] = "changed"
	if again, _ := s.ConfigRecord(); again.Keys["k"] != "v" || again.ReservedCPUs.String() != "0-1" {
		t.Errorf("SetConfigRecord kept the caller's map or lost the record: %+v", again)
	}
	if _, ok := New(cpuset.New()).ConfigRecord(); ok {
		t.Error("a new state has a configuration record")
	}
}

func TestCloneCopiesHoldsAndConfigRecord(t *testing.T) {
	s := sampleStateFull(t)
	c := s.Clone()
	c.SetHold("pod-b", Hold{CPUs: cpus(t, "8-9")})
	c.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "1")})
	if h, _ := s.Hold("pod-b"); h.CPUs.String() != "8" {
		t.Error("changing the clone's hold changed the original")
	}
	if r, _ := s.ConfigRecord(); r.ReservedCPUs.String() != "0" || len(r.Keys) != 3 {
		t.Error("changing the clone's configuration record changed the original")
	}
}
