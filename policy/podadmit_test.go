package policy_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// node returns a policy on 8 CPUs: 8 single-threaded cores, or 4 cores of
// 2 threads when smt (with full-pcpus-only), reserving reserved.
func node(t *testing.T, smt bool, reserved cpuset.CPUSet, inPlaceResize bool) *policy.Policy {
	t.Helper()
	var cpus []cpuallocator.CPUInfo
	for i := 0; i < 8; i++ {
		core := i
		if smt {
			core = i / 2
		}
		cpus = append(cpus, cpuallocator.CPUInfo{ID: i, Core: core})
	}
	topo, err := cpuallocator.NewTopology(cpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := cpuallocator.NewAllocator(topo, cpuallocator.StaticPolicyOptions{FullPCPUsOnly: smt}, cpuallocator.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(alloc, policy.Options{Reserved: reserved, InPlaceResize: inPlaceResize})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// gu is the kubelet's resources of a Guaranteed container or pod: milli
// CPU as request and limit, memory in GiB.
func gu(milli int64, gib int64) policy.Resources {
	return scenario.KubeletResources("guaranteed", milli, milli, gib<<30)
}

// podUpdate is one UpdatePodSandbox of a test: the pod's new resources and
// the refusal expected ("" for accepted).
type podUpdate struct {
	res  policy.Resources
	want string
}

// TestUpdatePodSandboxAdmission checks each refusal reason of a pod-level
// CPU change, and the changes the container level could accept that it
// must let through. Every refusal must leave the model as it was (the
// driver checks) and the recorded pod resources unchanged; every accepted
// update is recorded.
func TestUpdatePodSandboxAdmission(t *testing.T) {
	type ctr struct {
		pod, name string
		res       policy.Resources
		resize    int64 // milli-CPU to resize to after creation (0: none)
	}
	noReserved := cpuset.New()
	for _, tc := range []struct {
		name          string
		smt           bool
		reserved      *cpuset.CPUSet // default: CPU 0
		noResize      bool
		podResources  policy.Resources // the sandbox's creation values for pod "p"
		containers    []ctr
		updates       []podUpdate
		thenContainer *ctr // a container resize after the updates, and its expected refusal in want
		want          string
	}{
		{
			name:       "growth that fits, the kubelet's two calls",
			containers: []ctr{{pod: "p", name: "app", res: gu(2000, 1)}},
			updates: []podUpdate{
				// The new limit first (shares still the old ones), then the shares.
				{res: policy.Resources{CPUShares: 2048, CPUQuota: 400000, CPUPeriod: 100000, MemoryLimit: 1 << 30}},
				{res: gu(4000, 1)},
			},
			thenContainer: &ctr{pod: "p", name: "app", resize: 4000},
		},
		{
			name: "growth beyond the free CPUs: refused like the container",
			containers: []ctr{
				{pod: "big", name: "app", res: gu(4000, 1)},
				{pod: "p", name: "app", res: gu(2000, 1)},
			},
			updates: []podUpdate{{res: gu(4000, 1),
				want: "Infeasible: resizeAllocateCPUsError: cannot grow container default/p/app from 2 to 4 exclusive CPUs keeping 5-6 (free: 7): "}},
			thenContainer: &ctr{pod: "p", name: "app", resize: 4000},
			want:          "Infeasible: resizeAllocateCPUsError: cannot grow container default/p/app from 2 to 4 exclusive CPUs keeping 5-6 (free: 7): ",
		},
		{
			name:       "growth that never fits: Infeasible",
			containers: []ctr{{pod: "p", name: "app", res: gu(2000, 1)}},
			updates:    []podUpdate{{res: gu(8000, 1), want: "Infeasible: resizeAllocateCPUsError: cannot grow container default/p/app from 2 to 8"}},
		},
		{
			name:       "the shared pool keeps its last CPU",
			reserved:   &noReserved,
			containers: []ctr{{pod: "big", name: "app", res: gu(5000, 1)}, {pod: "p", name: "app", res: gu(2000, 1)}},
			updates:    []podUpdate{{res: gu(3000, 1), want: "Infeasible: resizeAllocateCPUsError: cannot grow container default/p/app from 2 to 3"}},
		},
		{
			name:       "below the baseline CPUs",
			containers: []ctr{{pod: "p", name: "app", res: gu(2000, 1)}},
			updates: []podUpdate{{res: gu(1000, 1),
				want: "Infeasible: prohibitedCPUAllocationError: container default/p/app cannot shrink to 1 CPUs: its baseline exclusive CPUs 1-2 (2 CPUs) must be kept; it keeps 1-2"}},
		},
		{
			name:       "grown and back to the baseline CPUs",
			containers: []ctr{{pod: "p", name: "app", res: gu(2000, 1), resize: 3000}},
			// The current totals are the containers' (3 CPUs): 1 is refused, 2 allowed.
			updates: []podUpdate{{res: gu(1000, 1), want: "Infeasible: prohibitedCPUAllocationError"}, {res: gu(2000, 1)}},
		},
		{
			name:       "in-place resize disabled",
			noResize:   true,
			containers: []ctr{{pod: "p", name: "app", res: gu(2000, 1)}},
			updates: []podUpdate{
				{res: gu(3000, 1), want: "Infeasible: featureDisabledError: in-place resize of exclusive CPUs is disabled (inPlaceResize: false): container default/p/app keeps its 2 CPUs 1-2, requested 3"},
				{res: gu(2000, 2)}, // memory only
			},
		},
		{
			name:       "a fractional limit would move the container to the shared pool",
			containers: []ctr{{pod: "p", name: "app", res: gu(2000, 1)}},
			updates: []podUpdate{{res: gu(2500, 1),
				want: "Infeasible: inconsistentCPUAllocationError: container default/p/app would move from its exclusive CPUs 1-2 to the shared pool because its CPU limit 2500m is not a whole number of CPUs"}},
		},
		{
			name:       "full-pcpus-only and an odd count",
			smt:        true,
			containers: []ctr{{pod: "p", name: "app", res: gu(2000, 1)}},
			updates:    []podUpdate{{res: gu(3000, 1), want: "Infeasible: SMTAlignmentError: container default/p/app requests 3 CPUs"}, {res: gu(4000, 1)}},
		},
		{
			name:       "memory only, no CPU free",
			containers: []ctr{{pod: "big", name: "app", res: gu(5000, 1)}, {pod: "p", name: "app", res: gu(2000, 1)}},
			updates:    []podUpdate{{res: gu(2000, 4)}},
		},
		{
			name:       "several exclusive containers: the count of free CPUs",
			containers: []ctr{{pod: "p", name: "a", res: gu(2000, 1)}, {pod: "p", name: "b", res: gu(1000, 1)}},
			// 4 CPUs free: 3 → 7 fits, 3 → 8 never does.
			updates: []podUpdate{
				{res: gu(8000, 2), want: "Infeasible: resizeAllocateCPUsError: cannot grow the exclusive CPUs of pod default/p from 3 to 8 keeping 1-3: its containers (a, b) need 5 more CPUs, 4 free (free: 4-7)"},
				{res: gu(7000, 2)},
			},
		},
		{
			name: "several exclusive containers: refused while another pod holds the CPUs",
			containers: []ctr{
				{pod: "big", name: "app", res: gu(3000, 1)},
				{pod: "p", name: "a", res: gu(2000, 1)}, {pod: "p", name: "b", res: gu(1000, 1)},
			},
			updates: []podUpdate{{res: gu(5000, 2), want: "Infeasible: resizeAllocateCPUsError: cannot grow the exclusive CPUs of pod default/p from 3 to 5"}, {res: gu(4000, 2)}},
		},
		{
			name:       "several exclusive containers: below their baseline CPUs",
			containers: []ctr{{pod: "p", name: "a", res: gu(2000, 1), resize: 3000}, {pod: "p", name: "b", res: gu(1000, 1)}},
			updates: []podUpdate{
				{res: gu(2000, 1), want: "Infeasible: prohibitedCPUAllocationError: pod default/p cannot shrink to 2 CPUs: its containers' baseline exclusive CPUs 1-2,4 (3 CPUs) must be kept; they keep 1-4"},
				{res: gu(3000, 1)},
			},
		},
		{
			name:       "several exclusive containers: fractional, unaligned",
			smt:        true,
			containers: []ctr{{pod: "p", name: "a", res: gu(2000, 1)}, {pod: "p", name: "b", res: gu(2000, 1)}},
			updates: []podUpdate{
				{res: gu(4500, 1), want: "Infeasible: inconsistentCPUAllocationError: pod default/p would get a CPU limit of 4500m, not a whole number of CPUs, so one of its exclusive containers (a, b) would move to the shared pool"},
				{res: gu(5000, 1), want: "Infeasible: SMTAlignmentError: pod default/p requests 5 CPUs, not a multiple of the 2 threads per core"},
			},
		},
		{
			name:       "several exclusive containers, in-place resize disabled",
			noResize:   true,
			containers: []ctr{{pod: "p", name: "a", res: gu(2000, 1)}, {pod: "p", name: "b", res: gu(1000, 1)}},
			updates: []podUpdate{{res: gu(4000, 1),
				want: "Infeasible: featureDisabledError: in-place resize of exclusive CPUs is disabled (inPlaceResize: false): the containers of pod default/p keep their 3 CPUs 1-3, requested 4"}},
		},
		{
			name: "a shared container may take any growth",
			containers: []ctr{
				{pod: "big", name: "app", res: gu(5000, 1)},
				{pod: "p", name: "app", res: gu(2000, 1)}, {pod: "p", name: "side", res: gu(500, 1)},
			},
			// No CPU is free, but the growth may be the fractional
			// container's; the app's own growth is refused by the container level.
			updates:       []podUpdate{{res: gu(4500, 1)}},
			thenContainer: &ctr{pod: "p", name: "app", resize: 4000},
			want:          "Infeasible: resizeAllocateCPUsError",
		},
		{
			name:       "a shared container keeps some CPU",
			containers: []ctr{{pod: "p", name: "app", res: gu(2000, 1)}, {pod: "p", name: "side", res: gu(500, 1)}},
			updates: []podUpdate{
				{res: gu(2000, 1), want: "Infeasible: prohibitedCPUAllocationError: pod default/p cannot shrink to a CPU limit of 2000m: its exclusive containers' baseline CPUs 1-2 (2 CPUs) must be kept and its 1 other containers need some CPU"},
				// The side container shrinking to 100m is fine.
				{res: gu(2100, 1)},
			},
		},
		{
			name:         "totals its containers do not explain are not checked",
			podResources: gu(4000, 1), // pod-level resources or an init container larger than the app
			containers:   []ctr{{pod: "big", name: "app", res: gu(5000, 1)}, {pod: "p", name: "app", res: gu(2000, 1)}},
			updates:      []podUpdate{{res: gu(6000, 1)}},
		},
		{
			name:         "creation totals that match the containers are checked",
			podResources: gu(2000, 1),
			containers:   []ctr{{pod: "big", name: "app", res: gu(5000, 1)}, {pod: "p", name: "app", res: gu(2000, 1)}},
			updates:      []podUpdate{{res: gu(2000, 2)}, {res: gu(3000, 2), want: "Infeasible: resizeAllocateCPUsError"}},
		},
		{
			name:       "a pod without exclusive CPUs",
			containers: []ctr{{pod: "big", name: "app", res: gu(6000, 1)}, {pod: "p", name: "app", res: gu(500, 1)}},
			updates:    []podUpdate{{res: gu(8000, 1)}, {res: gu(100, 1)}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reserved := cpuset.New(0)
			if tc.reserved != nil {
				reserved = *tc.reserved
			}
			pol := node(t, tc.smt, reserved, !tc.noResize)
			d := scenario.NewPolicyDriver(pol)
			pods := map[string]policy.Pod{}
			podOf := func(name string) policy.Pod {
				if p, ok := pods[name]; ok {
					return p
				}
				p, err := scenario.KubeletPod(name, "guaranteed")
				if err != nil {
					t.Fatal(err)
				}
				if name == "p" {
					p.Resources = tc.podResources
				}
				pods[name] = p
				return p
			}
			for _, c := range tc.containers {
				if err := d.CreateContainer(podOf(c.pod), c.name, c.res); err != nil {
					t.Fatalf("create %s/%s: %v", c.pod, c.name, err)
				}
				if c.resize != 0 {
					if err := d.UpdateContainer(podOf(c.pod), c.name, gu(c.resize, c.res.MemoryLimit>>30)); err != nil {
						t.Fatalf("resize %s/%s: %v", c.pod, c.name, err)
					}
				}
			}
			p := podOf("p")
			for i, u := range tc.updates {
				before, hadBefore := d.Model.State.PodResources(p.UID)
				err := d.UpdatePod(p, policy.PodResources{Resources: u.res})
				switch {
				case u.want == "" && err != nil:
					t.Fatalf("update %d (%+v) refused: %v", i+1, u.res, err)
				case u.want != "" && (err == nil || !strings.HasPrefix(err.Error(), u.want)):
					t.Fatalf("update %d (%+v): got %v, want a refusal starting %q", i+1, u.res, err, u.want)
				}
				got, has := d.Model.State.PodResources(p.UID)
				if err != nil {
					if _, ok := policy.AsRefusal(err); !ok {
						t.Errorf("update %d: %v is not a refusal", i+1, err)
					}
					if strings.Contains(err.Error(), "\n") {
						t.Errorf("update %d: the refusal is not one line: %q", i+1, err)
					}
					if has != hadBefore || got != before {
						t.Errorf("update %d refused, but the pod resources changed from %+v to %+v", i+1, before, got)
					}
				} else if !has || got.Resources != state.ResourceRecord(u.res) {
					t.Errorf("update %d accepted, but the pod resources are %+v (present %v)", i+1, got, has)
				}
			}
			if c := tc.thenContainer; c != nil {
				err := d.UpdateContainer(podOf(c.pod), c.name, gu(c.resize, 1))
				if (err == nil) != (tc.want == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.want)) {
					t.Errorf("the container's own resize: %v, want %q", err, tc.want)
				}
			}
		})
	}
}

// TestPodRefusalIsTheContainers: for a pod whose only container is
// exclusive, the pod-level refusal is the container level's, word for
// word, for the same request.
func TestPodRefusalIsTheContainers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noResize bool
		smt      bool
		milli    int64
	}{
		{name: "growth", milli: 7000},
		{name: "shrink", milli: 1000},
		{name: "fractional", milli: 2500},
		{name: "disabled", noResize: true, milli: 3000},
		{name: "unaligned", smt: true, milli: 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := node(t, tc.smt, cpuset.New(0), !tc.noResize)
			d := scenario.NewPolicyDriver(pol)
			other, _ := scenario.KubeletPod("other", "guaranteed")
			p, _ := scenario.KubeletPod("p", "guaranteed")
			for _, c := range []struct {
				pod   policy.Pod
				milli int64
			}{{other, 2000}, {p, 2000}} {
				if err := d.CreateContainer(c.pod, "app", gu(c.milli, 1)); err != nil {
					t.Fatal(err)
				}
			}
			_, podErr := pol.UpdatePodSandbox(d.Model, p, policy.PodResources{Resources: gu(tc.milli, 1)})
			ctrErr := d.UpdateContainer(p, "app", gu(tc.milli, 1))
			if podErr == nil || ctrErr == nil || podErr.Error() != ctrErr.Error() {
				t.Errorf("pod level: %v\ncontainer level: %v", podErr, ctrErr)
			}
		})
	}
}

// TestPodGrowthCountsReleasingCPUs: CPUs an unconfirmed shrink releases,
// and CPUs on loan, are free by the time the containers are resized, so
// the pod-level check counts them.
func TestPodGrowthCountsReleasingCPUs(t *testing.T) {
	pol := node(t, false, cpuset.New(0), true)
	d := scenario.NewPolicyDriver(pol)
	big, _ := scenario.KubeletPod("big", "guaranteed")
	p, _ := scenario.KubeletPod("p", "guaranteed")
	for _, c := range []struct {
		pod   policy.Pod
		milli int64
	}{{big, 2000}, {p, 2000}} {
		if err := d.CreateContainer(c.pod, "app", gu(c.milli, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.UpdateContainer(big, "app", gu(4000, 1)); err != nil {
		t.Fatal(err)
	}
	// big shrinks 4 → 2 without the runtime's confirmation yet.
	bigApp := d.Model.SortedContainerIDs()[0]
	dec, err := pol.UpdateContainer(d.Model, policy.Container{ID: bigApp, Name: "app", Pod: big, Resources: gu(4000, 1)}, gu(2000, 1))
	if err != nil {
		t.Fatalf("shrink: %v", err)
	}
	if len(dec.Model.Releasing) != 1 {
		t.Fatalf("releasing %v", dec.Model.Releasing)
	}
	m := dec.Model.Lend(cpuset.New(7))
	if _, err := pol.UpdatePodSandbox(m, p, policy.PodResources{Resources: gu(5000, 1)}); err != nil {
		t.Errorf("growth into released and lent CPUs refused: %v", err)
	}
	if _, err := pol.UpdatePodSandbox(m, p, policy.PodResources{Resources: gu(6000, 1)}); err == nil || !strings.HasPrefix(err.Error(), "Infeasible: resizeAllocateCPUsError") {
		t.Errorf("growth beyond them: %v", err)
	}
}

// TestRecordedPodResourcesAreTheCurrentTotals: the last accepted pod
// resources are the totals the next update is compared with: a memory-only
// update after an accepted growth whose container resize never came (the
// kubelet writes the pod cgroup in between) is accepted.
func TestRecordedPodResourcesAreTheCurrentTotals(t *testing.T) {
	pol := node(t, false, cpuset.New(0), true)
	d := scenario.NewPolicyDriver(pol)
	p, _ := scenario.KubeletPod("p", "guaranteed")
	if err := d.CreateContainer(p, "app", gu(2000, 1)); err != nil {
		t.Fatal(err)
	}
	grown := policy.PodResources{Resources: gu(3000, 1)}
	if err := d.UpdatePod(p, grown); err != nil {
		t.Fatal(err)
	}
	other, _ := scenario.KubeletPod("other", "guaranteed")
	if err := d.CreateContainer(other, "app", gu(5000, 1)); err != nil { // takes the rest
		t.Fatal(err)
	}
	if err := d.UpdatePod(p, policy.PodResources{Resources: gu(3000, 2)}); err != nil {
		t.Errorf("memory-only update after a growth the container never got: %v", err)
	}
	if got, _ := d.Model.State.PodResources(p.UID); got.Resources != state.ResourceRecord(gu(3000, 2)) {
		t.Errorf("recorded %+v", got)
	}
	if got, ok := d.Model.PodResources(p); !ok || got != gu(3000, 2) {
		t.Errorf("current pod resources %+v %v", got, ok)
	}
}

// TestPodAdmissionIsNecessary checks on random machines, configurations
// and pods that the pod-level check never refuses what the container level
// accepts: whenever every container resize of a pod is accepted in the
// kubelet's order (decreases first, each confirmed, then increases), the
// pod's UpdatePodSandbox calls are accepted too, before the container
// resizes (the new limit with the old shares, then the new shares) and
// after them. For a pod of one exclusive container the pod-level answer is
// the container level's, refusal text included.
func TestPodAdmissionIsNecessary(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 40
	}
	refusedBoth, acceptedBoth := 0, 0
	for seed := 1; seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 1287))
		pol, desc := randomMachine(t, rng)
		smt := int64(pol.Allocator().Topology().ThreadsPerCore())
		d := scenario.NewPolicyDriver(pol)
		wholeCPUs := func() int64 {
			n := int64(1 + rng.IntN(3))
			if rng.IntN(2) == 0 {
				n *= smt
			}
			return n * 1000
		}
		fractional := func() int64 { return int64(1+rng.IntN(19))*100 + 50 }
		// Other pods take some CPUs.
		for i := 0; i < rng.IntN(4); i++ {
			other, _ := scenario.KubeletPod(fmt.Sprintf("other%d", i), "guaranteed")
			_ = d.CreateContainer(other, "app", gu(wholeCPUs(), 1)) // may not fit
		}
		// The pod: exclusive and shared containers, some grown since.
		p, _ := scenario.KubeletPod("p", "guaranteed")
		limits := map[string]int64{}
		for i := 0; i < 1+rng.IntN(3); i++ {
			name := fmt.Sprintf("c%d", i)
			milli := wholeCPUs()
			if rng.IntN(3) == 0 {
				milli = fractional()
			}
			if d.CreateContainer(p, name, gu(milli, 1)) != nil {
				continue
			}
			limits[name] = milli
			if milli%1000 == 0 && rng.IntN(3) == 0 && d.UpdateContainer(p, name, gu(milli+1000*smt, 1)) == nil {
				limits[name] = milli + 1000*smt
			}
		}
		if len(limits) == 0 {
			continue
		}
		// The resize: new limits for some containers.
		want := map[string]int64{}
		var oldSum, newSum int64
		for name, milli := range limits {
			want[name] = milli
			switch k := rng.IntN(4); {
			case k == 0:
			case milli%1000 == 0:
				want[name] = int64(1+rng.IntN(6)) * 1000
				if rng.IntN(8) == 0 {
					want[name] += 500 // refused by the container level
				}
			default:
				want[name] = fractional()
			}
			oldSum += milli
			newSum += want[name]
		}
		if newSum == oldSum {
			continue // the kubelet sends no pod-level CPU change
		}
		// The container level, in the kubelet's order, on the model as it is.
		m, ctrErr := d.Model, error(nil)
		for _, decrease := range []bool{true, false} {
			for _, name := range sortedKeys(want) {
				if ctrErr != nil || want[name] == limits[name] || (want[name] < limits[name]) != decrease {
					continue
				}
				id := idOf(t, m, p.UID, name)
				dec, err := pol.UpdateContainer(m, policy.Container{ID: id, Name: name, Pod: p, Resources: gu(limits[name], 1)}, gu(want[name], 1))
				if err != nil {
					ctrErr = err
					break
				}
				m = pol.Confirm(dec.Model, id).Model
			}
		}
		// The pod level, before the containers: the new limit with the
		// old shares, then the new shares.
		limitFirst := gu(newSum, 1)
		limitFirst.CPUShares = gu(oldSum, 1).CPUShares
		dec, podErr := pol.UpdatePodSandbox(d.Model, p, policy.PodResources{Resources: limitFirst})
		if podErr == nil {
			_, podErr = pol.UpdatePodSandbox(dec.Model, p, policy.PodResources{Resources: gu(newSum, 1)})
		}
		what := fmt.Sprintf("seed %d (%s): pod %v → %v", seed, desc, limits, want)
		if podErr != nil {
			if _, ok := policy.AsRefusal(podErr); !ok {
				t.Fatalf("%s: pod level failed with %v, not a refusal", what, podErr)
			}
		}
		if ctrErr == nil {
			if podErr != nil {
				t.Fatalf("%s: the container level accepts every resize, the pod level refused: %v", what, podErr)
			}
			if _, err := pol.UpdatePodSandbox(m, p, policy.PodResources{Resources: gu(newSum, 1)}); err != nil {
				t.Fatalf("%s: after the container resizes, the pod level refused: %v", what, err)
			}
		}
		if _, exclusive := d.Model.State.Assignment(p.UID, "c0"); len(limits) == 1 && exclusive {
			if (podErr == nil) != (ctrErr == nil) || (podErr != nil && podErr.Error() != ctrErr.Error()) {
				t.Fatalf("%s: one exclusive container: pod level %v, container level %v", what, podErr, ctrErr)
			}
		}
		switch {
		case podErr != nil && ctrErr != nil:
			refusedBoth++
		case podErr == nil && ctrErr == nil:
			acceptedBoth++
		}
	}
	t.Logf("%d resizes refused at both levels, %d accepted at both", refusedBoth, acceptedBoth)
	if refusedBoth == 0 || acceptedBoth == 0 {
		t.Errorf("the random pods never exercised both outcomes (%d refused, %d accepted)", refusedBoth, acceptedBoth)
	}
}

// idOf returns the id of a pod's running container.
func idOf(t *testing.T, m *policy.Model, podUID, name string) string {
	t.Helper()
	for _, id := range m.SortedContainerIDs() {
		if c := m.Containers.Get(id); c.PodUID == podUID && c.Name == name && !c.Stopped {
			return id
		}
	}
	t.Fatalf("no container %s in pod %s", name, podUID)
	return ""
}

func sortedKeys(m map[string]int64) []string {
	return slices.Sorted(maps.Keys(m))
}

// randomMachine returns a policy on a random machine of 1 or 2 NUMA nodes
// of 2 to 6 cores, with or without SMT, under a random configuration.
func randomMachine(t *testing.T, rng *rand.Rand) (*policy.Policy, string) {
	t.Helper()
	nodes, cores, threads := 1+rng.IntN(2), 2+rng.IntN(5), 1+rng.IntN(2)
	var cpus []cpuallocator.CPUInfo
	for n := 0; n < nodes; n++ {
		for c := 0; c < cores; c++ {
			core := n*cores + c
			for th := 0; th < threads; th++ {
				cpus = append(cpus, cpuallocator.CPUInfo{ID: core*threads + th, Core: core, NUMANode: n, UncoreCache: n})
			}
		}
	}
	topo, err := cpuallocator.NewTopology(cpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	static := cpuallocator.StaticPolicyOptions{FullPCPUsOnly: threads > 1 && rng.IntN(2) == 0, DistributeCPUsAcrossNUMA: rng.IntN(4) == 0,
		StrictCPUReservation: rng.IntN(2) == 0}
	alloc, err := cpuallocator.NewAllocator(topo, static, cpuallocator.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := policy.Options{
		Reserved: cpuset.New(0),
		TopologyPolicy: []cpuallocator.TopologyPolicy{cpuallocator.TopologyNone, cpuallocator.TopologyBestEffort,
			cpuallocator.TopologyRestricted, cpuallocator.TopologySingleNUMANode}[rng.IntN(4)],
		InPlaceResize: rng.IntN(5) != 0,
	}
	if static.FullPCPUsOnly {
		opts.Reserved = cpuset.New(0, 1)
	}
	pol, err := policy.New(alloc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return pol, fmt.Sprintf("%d NUMA nodes × %d cores × %d threads, %+v, %+v", nodes, cores, threads, static, opts)
}

// TestExclusiveCPUsStayWithinThePodLimit: with pod-level resources a
// container without a CPU limit of its own gets the pod's (and shares to
// match), so it looks exclusive; a pod never gets more exclusive CPUs than
// its CPU limit: the containers that do not fit run on the shared pool,
// stay there through their resizes, and Synchronize adopts the same way.
func TestExclusiveCPUsStayWithinThePodLimit(t *testing.T) {
	type ctr struct {
		name  string
		milli int64
		want  string // its cpuset: exclusive CPUs, or "shared"
	}
	for _, tc := range []struct {
		name     string
		podLimit int64 // the sandbox's CPU limit in milli-CPU (0: none given)
		ctrs     []ctr
	}{
		{"pod-level resources, both inherit the pod's 4 CPUs", 4000,
			[]ctr{{"a", 4000, "1-4"}, {"b", 4000, "shared"}}},
		{"pod-level resources, the second does not fit", 3000,
			[]ctr{{"a", 2000, "1-2"}, {"b", 2000, "shared"}}},
		{"pod-level resources larger than the container", 2000,
			[]ctr{{"a", 4000, "shared"}, {"b", 1000, "1"}}},
		{"the pod's totals are its containers'", 3000,
			[]ctr{{"a", 2000, "1-2"}, {"b", 1000, "3"}}},
		{"no pod resources given", 0,
			[]ctr{{"a", 2000, "1-2"}, {"b", 2000, "3-4"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := node(t, false, cpuset.New(0), true)
			pod, err := scenario.KubeletPod("p", "guaranteed")
			if err != nil {
				t.Fatal(err)
			}
			if tc.podLimit != 0 {
				pod.Resources = gu(tc.podLimit, 1)
			}
			check := func(how string, cpusOf func(name string) cpuset.CPUSet, st *state.State, shared cpuset.CPUSet) {
				t.Helper()
				for _, c := range tc.ctrs {
					got, want := cpusOf(c.name), c.want
					a, pinned := st.Assignment(pod.UID, c.name)
					if want == "shared" {
						if pinned || !got.Equals(shared) {
							t.Errorf("%s: %s on %s (assignment %v), want the shared pool %s", how, c.name, got, pinned, shared)
						}
					} else if !pinned || got.String() != want || a.Baseline.String() != want {
						t.Errorf("%s: %s on %s (assignment %+v, present %v), want %s exclusive", how, c.name, got, a, pinned, want)
					}
				}
			}

			// Created one by one.
			d := scenario.NewPolicyDriver(pol)
			for _, c := range tc.ctrs {
				if err := d.CreateContainer(pod, c.name, gu(c.milli, 1)); err != nil {
					t.Fatalf("create %s: %v", c.name, err)
				}
			}
			cpusOf := func(name string) cpuset.CPUSet { s, _ := d.ContainerCPUs(pod, name); return s }
			check("created", cpusOf, d.Model.State, d.Model.SharedPool())
			// A memory-only resize keeps every container where it is.
			for _, c := range tc.ctrs {
				if err := d.UpdateContainer(pod, c.name, gu(c.milli, 2)); err != nil {
					t.Errorf("memory-only resize of %s refused: %v", c.name, err)
				}
			}
			check("after a memory-only resize", cpusOf, d.Model.State, d.Model.SharedPool())

			// Running before the plugin came: Synchronize adopts the same.
			var running []policy.Container
			for _, c := range tc.ctrs {
				running = append(running, policy.Container{ID: c.name, Name: c.name, Pod: pod, Resources: gu(c.milli, 1), CPUs: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)})
			}
			sync := pol.Synchronize(policy.NewModel(pol.NewState()), []policy.Pod{pod}, running)
			if err := pol.CheckInvariants(sync.Model); err != nil {
				t.Fatal(err)
			}
			check("synchronized", sync.Model.CPUsOf, sync.Model.State, sync.Model.SharedPool())
		})
	}
	// The note says why.
	pol := node(t, false, cpuset.New(0), true)
	pod, _ := scenario.KubeletPod("p", "guaranteed")
	pod.Resources = gu(2000, 1)
	m := policy.NewModel(pol.NewState())
	d, err := pol.CreateContainer(m, policy.Container{ID: "a", Name: "a", Pod: pod, Resources: gu(4000, 1)})
	want := "default/p/a: runs on the shared pool: its 4 CPUs exceed its pod's CPU limit of 2000m"
	if err != nil || len(d.Notes) != 1 || d.Notes[0] != want {
		t.Errorf("notes %q, %v; want %q", d.Notes, err, want)
	}
}

// TestPodResizeCountsStoppedMembers: a pod resize while one of its pinned
// containers is down (crash back-off) is decided over every member, the
// stopped one by its entry. Without the spec, the pod's new total is
// divided among both (the growth fits as one CPU each; put on the
// running container alone it would not); with the spec, the stopped
// container's growth is decided at the pod update, refused when the free
// CPUs cannot hold it, and when admitted set aside on its entry for its
// re-creation, which starts on it.
func TestPodResizeCountsStoppedMembers(t *testing.T) {
	res := func(milli int64) policy.Resources {
		return scenario.KubeletResources("guaranteed", milli, milli, 1<<30)
	}
	setup := func(t *testing.T) (*life, policy.Pod, string, string) {
		l := newLife(t, eightCPUs(t))
		pod := l.sandbox(l.pod("gu", 4000, "a=app", "b=app"))
		a := l.create(pod, "a", 2000)
		b := l.create(pod, "b", 2000)
		l.create(l.sandbox(l.pod("other", 1000)), "c", 1000)
		l.exit(b, 1)
		return l, pod, a, b // free: 6-7
	}
	t.Run("without the spec", func(t *testing.T) {
		l, pod, _, _ := setup(t)
		if _, err := l.pol.UpdatePodSandbox(l.m, pod, policy.PodResources{Resources: res(6000)}); err != nil {
			t.Errorf("pod total 4 → 6 CPUs with 2 free and a member down: %v", err)
		}
		if _, err := l.pol.UpdatePodSandbox(l.m, pod, policy.PodResources{Resources: res(9000)}); err == nil || !strings.HasPrefix(err.Error(), "Infeasible: resizeAllocateCPUsError") {
			t.Errorf("pod total 4 → 9 CPUs with 2 free: %v", err)
		}
	})
	t.Run("with the spec", func(t *testing.T) {
		l, pod, _, b := setup(t)
		spec := policy.PodSpec{"a": res(2000), "b": res(5000)}
		_, err := l.pol.UpdatePodSandboxWithSpec(l.m, pod, policy.PodResources{Resources: res(7000)}, spec)
		if err == nil || !strings.HasPrefix(err.Error(), "Infeasible: resizeAllocateCPUsError") || !strings.Contains(err.Error(), "default/gu/b (not running)") {
			t.Fatalf("stopped b grown by 3 with 2 free: %v", err)
		}
		before, _ := l.m.State.Assignment(pod.UID, "b")
		spec["b"] = res(4000)
		d, err := l.pol.UpdatePodSandboxWithSpec(l.m, pod, policy.PodResources{Resources: res(6000)}, spec)
		if err != nil {
			t.Fatalf("stopped b grown by 2 with 2 free: %v", err)
		}
		l.step("pod update", d)
		after, _ := l.m.State.Assignment(pod.UID, "b")
		if after.Assigned().Size() != 4 || !after.Baseline.Equals(before.Baseline) || l.pool() != "0" {
			t.Errorf("b's entry %s (baseline %s), shared pool %s; want 4 CPUs keeping %s, the pool 0", after.Assigned(), after.Baseline, l.pool(), before.Baseline)
		}
		again := l.create(pod, "b", 4000)
		if got := l.cpus(again); !got.Equals(after.Assigned()) {
			t.Errorf("b re-created on %s, want %s", got, after.Assigned())
		}
		l.remove(b)
	})
}
