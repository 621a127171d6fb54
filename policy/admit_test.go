package policy_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// specPod returns the pod of l named name with its spec: containers as
// "role:name=cpus" (role init, sidecar or app; cpus whole, 0 for a
// fractional one).
func specPod(l *life, name string, containers ...string) policy.Pod {
	l.t.Helper()
	var spec []policy.SpecContainer
	roles := map[string]policy.Role{}
	need, sidecars, apps := 0, 0, 0
	for _, c := range containers {
		role, rest, _ := strings.Cut(c, ":")
		cname, n, _ := strings.Cut(rest, "=")
		cpus := int(n[0] - '0')
		r := map[string]policy.Role{"init": policy.RoleInit, "sidecar": policy.RoleSidecar, "app": policy.RoleApp}[role]
		spec = append(spec, policy.SpecContainer{Name: cname, Role: r, CPUs: cpus})
		roles[cname] = r
		switch r {
		case policy.RoleInit:
			need = max(need, sidecars+cpus)
		case policy.RoleSidecar:
			sidecars += cpus
		default:
			apps += cpus
		}
	}
	total := max(need, sidecars+apps)
	pod := l.pod(name, int64(total)*1000)
	pod.Roles, pod.Containers, pod.GuaranteedCPUs = roles, spec, total
	return pod
}

// entries returns a pod's entries as "name=cpus" sorted by name.
func entries(m *policy.Model, podUID string) string {
	var out []string
	for _, name := range m.State.ContainersOfPod(podUID) {
		a, _ := m.State.Assignment(podUID, name)
		out = append(out, name+"="+a.Assigned().String())
	}
	return strings.Join(out, " ")
}

// TestAdmitPodAsTheKubelet: a pod whose spec is known is admitted whole
// at its sandbox: every container's entry is decided in the kubelet's
// order, an init container's CPUs reused first by the containers after
// it, the shared containers shrink (Others), and a second admission
// changes nothing.
func TestAdmitPodAsTheKubelet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		topology   cpuallocator.TopologyPolicy
		scope      cpuallocator.TopologyScope
		nodes      int
		containers []string
		entries    string // after admission
		pool       string
	}{
		{"init reused by the app", "", "", 1, []string{"init:i=2", "app:a=3"}, "a=1-3 i=1-2", "0,4-7"},
		{"sidecar keeps its CPUs", "", "", 1, []string{"sidecar:s=1", "init:i=2", "app:a=2"}, "a=2-3 i=2-3 s=1", "0,4-7"},
		{"fractional containers have no entry", "", "", 1, []string{"init:i=0", "app:a=2", "app:b=0"}, "a=1-2", "0,3-7"},
		{"single-numa-node per container", cpuallocator.TopologySingleNUMANode, "", 2, []string{"app:a=2", "app:b=4"}, "a=1-2 b=4-7", "0,3"},
		{"single-numa-node pod scope", cpuallocator.TopologySingleNUMANode, cpuallocator.ScopePod, 2, []string{"app:a=1", "app:b=3"}, "a=4 b=5-7", "0-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLife(t, eightCoresWith(t, tc.nodes, policy.Options{InPlaceResize: true, TopologyPolicy: tc.topology, TopologyScope: tc.scope}))
			shared := l.create(l.sandbox(l.pod("burst", 0)), "shared", 500)
			pod := l.sandbox(specPod(l, "gu", tc.containers...))
			d, err := l.pol.AdmitPod(l.m, pod)
			if err != nil {
				t.Fatalf("AdmitPod: %v", err)
			}
			l.step("admit", d)
			if got := entries(l.m, pod.UID); got != tc.entries {
				t.Errorf("entries %q, want %q", got, tc.entries)
			}
			if got := l.pool(); got != tc.pool {
				t.Errorf("shared pool %q, want %q", got, tc.pool)
			}
			if len(d.Updates()) != 1 || d.Updates()[0].ContainerID != shared || d.Updates()[0].CPUSet().String() != tc.pool {
				t.Errorf("updates %+v, want the shared container on %s", d.Updates(), tc.pool)
			}
			again, err := l.pol.AdmitPod(l.m, pod)
			if err != nil || again.Model != l.m || len(again.Updates()) > 0 {
				t.Errorf("admitted again: %v, model changed %v, updates %v", err, again.Model != l.m, again.Updates())
			}
		})
	}
}

// TestPodNotAdmittedTakesNothing: the busy NUMA-aligned node.
// Pod a (an init container on the shared pool, an app container of 4) is
// admitted at its sandbox, its app container's CPUs on node 1 before it
// runs; pod b (4 CPUs), whose sandbox comes while a's init container
// runs, fits no node: its admission and each of its containers'
// creations, shared ones included, are refused with the kubelet's reason
// and change nothing; a's app container gets its admitted CPUs. Once a is
// gone, b's next creation admits it. (The kubelet v1.36.3 admits and
// refuses these pods so: test/scenarios/pod-admission-single-numa-node.yaml.)
func TestPodNotAdmittedTakesNothing(t *testing.T) {
	l := newLife(t, eightCoresWith(t, 2, policy.Options{InPlaceResize: true, TopologyPolicy: cpuallocator.TopologySingleNUMANode}))
	a := l.sandbox(specPod(l, "a", "init:init=0", "app:app=4"))
	d, err := l.pol.AdmitPod(l.m, a)
	if err != nil {
		t.Fatal(err)
	}
	l.step("admit a", d)
	init := l.create(a, "init", 500) // a fraction: the shared pool
	b := l.sandbox(specPod(l, "b", "init:prep=0", "app:app=4"))
	before := l.m
	if _, err := l.pol.AdmitPod(l.m, b); err == nil || !strings.HasPrefix(err.Error(), "Deferred: TopologyAffinityError: pod default/b is not admitted") {
		t.Fatalf("admitting b: %v", err)
	}
	for _, name := range []string{"prep", "app"} {
		milli := int64(4000)
		if name == "prep" {
			milli = 500
		}
		_, err := l.tryCreate(b, name, milli)
		if err == nil || !strings.Contains(err.Error(), "TopologyAffinityError: pod default/b is not admitted") {
			t.Errorf("creating b/%s: %v, want the pod's admission refused", name, err)
		}
	}
	if l.m != before || entries(l.m, b.UID) != "" {
		t.Fatalf("a refused pod changed the model: entries %q", entries(l.m, b.UID))
	}
	l.exit(init, 0)
	app := l.create(a, "app", 4000)
	l.want("a's app", app, "4-7", "0-3")
	l.removeSandbox(a)
	if _, err := l.tryCreate(b, "app", 4000); err != nil {
		t.Fatalf("b once a is gone: %v", err)
	}
	if got := entries(l.m, b.UID); got != "app=4-7" {
		t.Errorf("b's entries %q, want app=4-7", got)
	}
}

// TestAppContainerAdmittedWhereItsInitCPUsAre: under single-numa-node
// the kubelet admits an app container only on a NUMA affinity that holds
// every CPU its pod's init containers lend it (generateCPUTopologyHints
// disregards the others): an app container of 3 CPUs after an init
// container of 1 reuses it on node 0, and one of 4, which node 0 cannot
// hold with it, refuses the pod, although node 1 has 4 free CPUs (the
// kubelet v1.36.3 refuses it: test/kubernetes).
func TestAppContainerAdmittedWhereItsInitCPUsAre(t *testing.T) {
	for _, tc := range []struct {
		app     string
		refused bool
		entries string
	}{
		{"app:app=3", false, "app=1-3 init=1"},
		{"app:app=4", true, ""},
	} {
		t.Run(tc.app, func(t *testing.T) {
			l := newLife(t, eightCoresWith(t, 2, policy.Options{InPlaceResize: true, TopologyPolicy: cpuallocator.TopologySingleNUMANode}))
			a := l.sandbox(specPod(l, "a", "init:init=1", tc.app))
			d, err := l.pol.AdmitPod(l.m, a)
			if refused := err != nil; refused != tc.refused {
				t.Fatalf("admission: %v, want refused %v", err, tc.refused)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "TopologyAffinityError") {
					t.Errorf("refusal %q, want the kubelet's TopologyAffinityError", err)
				}
				return
			}
			l.step("admit", d)
			if got := entries(l.m, a.UID); got != tc.entries {
				t.Errorf("entries %q, want %q", got, tc.entries)
			}
		})
	}
}

// TestFirstCreationKeepsTheAdmittedBaseline: a container whose spec grew
// while its pod's init container ran is created with the new count: it
// grows from the CPUs its admission gave it, which stay its baseline (the
// kubelet's baseline is the admitted count), and a shrink below them is
// refused.
func TestFirstCreationKeepsTheAdmittedBaseline(t *testing.T) {
	l := newLife(t, eightCPUs(t))
	pod := l.sandbox(specPod(l, "gu", "init:init=1", "app:app=2"))
	d, err := l.pol.AdmitPod(l.m, pod)
	if err != nil {
		t.Fatal(err)
	}
	l.step("admit", d)
	admitted, _ := l.m.State.Assignment(pod.UID, "app")
	l.exit(l.create(pod, "init", 1000), 0)
	app := l.create(pod, "app", 3000)
	a, _ := l.m.State.Assignment(pod.UID, "app")
	if !a.Baseline.Equals(admitted.Baseline) || a.Assigned().Size() != 3 || !admitted.Baseline.IsSubsetOf(l.cpus(app)) {
		t.Errorf("created with 3 CPUs: baseline %s, assigned %s, runs on %s; want the admitted %s kept as baseline", a.Baseline, a.Assigned(), l.cpus(app), admitted.Baseline)
	}
	if err := l.resize(app, 1000); err == nil || !strings.HasPrefix(err.Error(), "Infeasible: prohibitedCPUAllocationError") {
		t.Errorf("shrink below the admitted baseline: %v", err)
	}
}

// TestAdmissionAtTheFirstCreation: when the spec comes after the sandbox
// (the API's view was late), the first creation admits the pod whole and
// its reply shrinks the shared containers from where they ran.
func TestAdmissionAtTheFirstCreation(t *testing.T) {
	l := newLife(t, eightCPUs(t))
	shared := l.create(l.sandbox(l.pod("burst", 0)), "shared", 500)
	spec := specPod(l, "gu", "init:init=2", "app:app=1", "app:other=2")
	pod := spec
	pod.Containers, pod.Roles, pod.GuaranteedCPUs = nil, nil, 0
	pod = l.sandbox(pod)
	if entries(l.m, pod.UID) != "" {
		t.Fatalf("admitted without a spec: %s", entries(l.m, pod.UID))
	}
	spec.SandboxID = pod.SandboxID
	d, err := l.pol.CreateContainer(l.m, policy.Container{ID: "gu-init", Name: "init", Pod: spec,
		Resources: scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)})
	if err != nil {
		t.Fatal(err)
	}
	l.step("create init", d)
	if got := entries(l.m, pod.UID); got != "app=1 init=1-2 other=2-3" {
		t.Errorf("entries %q, want the whole pod admitted", got)
	}
	if len(d.Updates()) != 1 || d.Updates()[0].ContainerID != shared || !d.Updates()[0].CPUSet().Equals(cpuset.New(0, 4, 5, 6, 7)) {
		t.Errorf("updates %+v, want %s on 0,4-7", d.Updates(), shared)
	}
}

// TestRecreationReportsWhatItCouldNotApply: a container re-created with a
// count the free CPUs cannot hold (the kubelet sent nothing while it was
// down) restarts on its CPUs, and the decision says what was not applied,
// which the plugin reports on the pod.
func TestRecreationReportsWhatItCouldNotApply(t *testing.T) {
	l := newLife(t, eightCPUs(t))
	pod := l.sandbox(l.pod("gu", 2000))
	id := l.create(pod, "app", 2000)
	l.create(l.sandbox(l.pod("other", 4000)), "c", 4000)
	l.exit(id, 1)
	d, err := l.pol.CreateContainer(l.m, policy.Container{ID: "again", Name: "app", Pod: pod, Resources: scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Unapplied == nil || !strings.HasPrefix(d.Unapplied.Error(), "Infeasible: resizeAllocateCPUsError: container default/gu/app was re-created with 4 CPUs and restarts on its CPUs 1-2") {
		t.Errorf("unapplied: %v", d.Unapplied)
	}
	if got := d.Target.CPUSet().String(); got != "1-2" {
		t.Errorf("re-created on %s, want its CPUs 1-2", got)
	}
}
