package integration

import (
	"maps"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestRestartKeepsCPUs plays a crash as containerd and the kubelet do it
// (StopContainer on the exit; CreateContainer of a new container under the
// same name; RemoveContainer of the exited one by the kubelet's garbage
// collection), with a pod created meanwhile: the pod keeps the CPUs of its
// exited container, the re-created container gets exactly them with its
// baseline CPUs unchanged, and the removal of the exited one releases
// nothing.
func TestRestartKeepsCPUs(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPlugin(t, rt, n.pol, stateDir)
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	gu := pod(t, rt, "gu", "guaranteed")
	first := mustCreate(t, rt, gu, "app", guaranteed(1))
	wantCPUs(t, rt, first, "1")
	if err := rt.UpdateContainer(first, guaranteed(2)); err != nil {
		t.Fatal(err)
	}
	wantCPUs(t, rt, first, "1-2")

	if err := rt.StopContainer(first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, web, "0,3-7")
	other := mustCreate(t, rt, pod(t, rt, "other", "guaranteed"), "app", guaranteed(2))
	wantCPUs(t, rt, other, "3-4")

	again := mustCreate(t, rt, gu, "app", guaranteed(2))
	wantCPUs(t, rt, again, "1-2")
	if err := rt.RemoveContainer(first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, again, "1-2")
	wantCPUs(t, rt, web, "0,5-7")
	a, ok := checkpointState(t, stateDir, n.topo.CPUs()).Assignment("gu-uid", "app")
	if !ok || a.Baseline.String() != "1" || a.Resized.String() != "1-2" {
		t.Errorf("checkpoint entry of gu/app after the restart: %+v (present %v), want original 1, resized 1-2", a, ok)
	}
	if err := rt.UpdateContainer(again, guaranteed(1)); err != nil {
		t.Errorf("shrink back to the original CPU after the restart: %v", err)
	}
	wantCPUs(t, rt, again, "1")
	noViolations(t, rt)
}

// TestRefusedCreationChangesNothing refuses a creation on every path a
// creation can be refused, each after containerd's undo of the failed
// creation (StopContainer and RemoveContainer of the refused container,
// under its own pod), and checks that the checkpoint and every container's
// cpuset are as before.
func TestRefusedCreationChangesNothing(t *testing.T) {
	type setup struct {
		rt *fakeruntime.Runtime
		gu *api.PodSandbox
		// running is a pinned container that runs; stopped one that
		// exited and is re-created by the case.
		running, stopped *api.Container
	}
	tests := []struct {
		name   string
		config string
		create func(s setup) error
		want   string
	}{
		{"a running container's id, another pod", "", func(s setup) error {
			_, err := s.rt.CreateContainerWithID(pod(t, s.rt, "dup", "guaranteed"), s.running.Id, "app", guaranteed(1))
			return err
		}, "Infeasible: invalidContainerIDError: container id"},
		{"no container id", "", func(s setup) error {
			_, err := s.rt.CreateContainerWithID(pod(t, s.rt, "noid", "guaranteed"), "", "app", guaranteed(1))
			return err
		}, "Infeasible: invalidContainerIDError"},
		{"not enough free CPUs", "", func(s setup) error {
			_, err := s.rt.CreateContainer(pod(t, s.rt, "big", "guaranteed"), "app", guaranteed(5))
			return err
		}, "Deferred: allocateCPUsError"},
		{"not on one NUMA node", "topologyManagerPolicy: single-numa-node\n", func(s setup) error {
			_, err := s.rt.CreateContainer(pod(t, s.rt, "wide", "guaranteed"), "app", guaranteed(3))
			return err
		}, "Infeasible: TopologyAffinityError"},
		{"not whole cores", "cpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n", func(s setup) error {
			_, err := s.rt.CreateContainer(pod(t, s.rt, "odd", "guaranteed"), "app", guaranteed(1))
			return err
		}, "Infeasible: SMTAlignmentError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// 4 cores × 2 threads, NUMA nodes of 2 cores; CPU 0 reserved.
			n := newNode(t, fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2},
				"reservedSystemCPUs: \"0\"\n"+tc.config)
			rt := fakeruntime.New(t, n.topo.CPUs())
			stateDir := t.TempDir()
			rp := startPlugin(t, rt, n.pol, stateDir)
			mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
			running := mustCreate(t, rt, pod(t, rt, "pinned", "guaranteed"), "app", guaranteed(2))
			gu := pod(t, rt, "gu", "guaranteed")
			stopped := mustCreate(t, rt, gu, "app", guaranteed(2))
			if err := rt.StopContainer(stopped); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "settled", func() bool { return settled(rp, rt) })
			before, applied := checkpointState(t, stateDir, n.topo.CPUs()), rt.Applied()

			err := tc.create(setup{rt: rt, gu: gu, running: running, stopped: stopped})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("creation: %v, want refused with %q", err, tc.want)
			}
			waitFor(t, "settled", func() bool { return settled(rp, rt) })
			if after := checkpointState(t, stateDir, n.topo.CPUs()); !after.Equal(before) {
				t.Errorf("the refusal changed the checkpoint:\nbefore %s\nafter  %s", marshal(t, before), marshal(t, after))
			}
			if now := rt.Applied(); !maps.EqualFunc(now, applied, cpuset.CPUSet.Equals) {
				t.Errorf("the refusal changed cpusets: before %v, after %v", applied, now)
			}
			noViolations(t, rt)
		})
	}
}

// TestRestartRunsOnItsCPUs: the kubelet re-creates a container that
// exited with the resources it accepted last, which may be what the
// plugin refused (a shrink below the baseline, another CPU pool, a growth
// the node cannot place, any change with in-place resize off). The
// re-creation is never refused — that would keep the pod down until
// someone puts the spec back — but runs on the CPUs the container held,
// which the checkpoint keeps as they were.
func TestRestartRunsOnItsCPUs(t *testing.T) {
	tests := []struct {
		name   string
		config string
		res    policy.Resources
	}{
		{"below its baseline CPUs", "", guaranteed(1)},
		{"on the shared pool", "", scenario.KubeletResources("guaranteed", 1500, 1500, 1<<30)},
		{"bigger than the node", "", guaranteed(8)},
		{"another count, resize disabled", "inPlaceResize: false\n", guaranteed(4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2},
				"reservedSystemCPUs: \"0\"\n"+tc.config)
			rt := fakeruntime.New(t, n.topo.CPUs())
			stateDir := t.TempDir()
			rp := startPlugin(t, rt, n.pol, stateDir)
			mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
			gu := pod(t, rt, "gu", "guaranteed")
			stopped := mustCreate(t, rt, gu, "app", guaranteed(2))
			held, _ := rt.CPUs(stopped.Id)
			if err := rt.ExitContainer(stopped, 1); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "settled", func() bool { return settled(rp, rt) })
			before := checkpointState(t, stateDir, n.topo.CPUs())
			again, err := rt.CreateContainer(gu, "app", tc.res)
			if err != nil {
				t.Fatalf("re-creation refused: %v", err)
			}
			waitFor(t, "settled", func() bool { return settled(rp, rt) })
			wantCPUs(t, rt, again, held.String())
			after := checkpointState(t, stateDir, n.topo.CPUs())
			// (Only the container id that owns the entry changes.)
			before.DeleteContainers()
			after.DeleteContainers()
			if !after.Equal(before) {
				t.Errorf("the restart changed the assignments:\nbefore %s\nafter  %s", marshal(t, before), marshal(t, after))
			}
			noViolations(t, rt)
		})
	}
}

func marshal(t *testing.T, st *state.State) string {
	t.Helper()
	data, err := state.Marshal(st)
	if err != nil {
		return err.Error()
	}
	return string(data)
}
