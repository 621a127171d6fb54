package fakeruntime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// kubeletPod returns a pod as the kubelet runs it: its cgroup parent says
// its QoS class.
func kubeletPod(name, qos string) policy.Pod {
	parent := map[string]string{
		"guaranteed": "/kubepods/pod" + name + "-uid",
		"burstable":  "/kubepods/burstable/pod" + name + "-uid",
		"besteffort": "/kubepods/besteffort/pod" + name + "-uid",
	}[qos]
	return policy.Pod{UID: name + "-uid", Namespace: "default", Name: name, CgroupParent: parent}
}

// guaranteed returns the kubelet's resources of a container with cpus
// whole CPUs as request and limit.
func guaranteed(cpus int64) policy.Resources {
	return policy.Resources{CPUShares: uint64(cpus * 1024), CPUQuota: cpus * 100000, CPUPeriod: 100000, MemoryLimit: 1 << 30}
}

// burstable returns the kubelet's resources of a container with a request
// of milli millicores and no limit.
func burstable(milli int64) policy.Resources {
	return policy.Resources{CPUShares: uint64(milli * 1024 / 1000)}
}

func runPod(t testing.TB, rt *Runtime, name, qos string) *api.PodSandbox {
	t.Helper()
	sb, err := rt.RunPod(kubeletPod(name, qos))
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func create(t testing.TB, rt *Runtime, sb *api.PodSandbox, name string, r policy.Resources) *api.Container {
	t.Helper()
	c, err := rt.CreateContainer(sb, name, r)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return c
}

// ids returns the ids of containers.
func ids(ctrs []*api.Container) []string {
	var out []string
	for _, c := range ctrs {
		out = append(out, c.Id)
	}
	return out
}

// TestCheckFindsOverlaps checks the checker: without a plugin every
// container gets every CPU, so a second pinned container overlaps the first
// and a shared one both; stopping them clears the counts.
func TestCheckFindsOverlaps(t *testing.T) {
	rt := New(t, cpuset.New(0, 1, 2, 3))
	g1 := create(t, rt, runPod(t, rt, "g1", "guaranteed"), "app", guaranteed(1))
	if v := rt.Violations(); len(v) != 0 {
		t.Fatalf("one container: %v", v)
	}
	create(t, rt, runPod(t, rt, "g2", "guaranteed"), "app", guaranteed(1))
	v := rt.Violations()
	if len(v) != 1 || !strings.Contains(v[0], "is applied to exclusive containers") {
		t.Fatalf("two pinned containers on every CPU: %v", v)
	}
	web := create(t, rt, runPod(t, rt, "web", "burstable"), "nginx", burstable(100))
	if v := rt.Violations(); len(v) != 2 || !strings.Contains(v[1], "and to a shared container") {
		t.Fatalf("and a shared one: %v", v)
	}
	for _, c := range []*api.Container{g1, web} {
		if err := rt.StopContainer(c); err != nil {
			t.Fatal(err)
		}
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.overlaps.bad != 0 {
		t.Errorf("%d CPUs still counted overlapping with one container left", rt.overlaps.bad)
	}
}

// TestSandboxesOfOnePod runs two sandboxes of a pod (the kubelet runs a
// new one when a pod's sandbox died): each has an id and containers of its
// own, and stopping or removing the first sends the NRI events of the
// first only, each once, while the second's container runs on.
func TestSandboxesOfOnePod(t *testing.T) {
	stopped := []string{
		"StopContainer a-app-1 in sandbox-a-uid-1, exit code 137",
		"StopPodSandbox sandbox-a-uid-1",
	}
	removed := append(slices.Clone(stopped),
		"RemoveContainer a-app-1 in sandbox-a-uid-1",
		"RemovePodSandbox sandbox-a-uid-1",
	)
	for _, tc := range []struct {
		name    string
		steps   func(rt *Runtime, first *api.PodSandbox, c *api.Container) error
		want    []string
		removed bool
	}{
		{"stopped", func(rt *Runtime, first *api.PodSandbox, _ *api.Container) error {
			return rt.StopPod(first)
		}, stopped, false},
		{"stopped twice", func(rt *Runtime, first *api.PodSandbox, _ *api.Container) error {
			return errors.Join(rt.StopPod(first), rt.StopPod(first))
		}, stopped, false},
		{"removed", func(rt *Runtime, first *api.PodSandbox, _ *api.Container) error {
			return rt.RemovePod(first)
		}, removed, true},
		{"stopped, then removed", func(rt *Runtime, first *api.PodSandbox, _ *api.Container) error {
			return errors.Join(rt.StopPod(first), rt.RemovePod(first))
		}, removed, true},
		{"its container removed, then the sandbox", func(rt *Runtime, first *api.PodSandbox, c *api.Container) error {
			return errors.Join(rt.StopContainer(c), rt.RemoveContainer(c), rt.RemovePod(first))
		}, []string{
			"StopContainer a-app-1 in sandbox-a-uid-1, exit code 137",
			"RemoveContainer a-app-1 in sandbox-a-uid-1",
			"StopPodSandbox sandbox-a-uid-1",
			"RemovePodSandbox sandbox-a-uid-1",
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(t, cpuset.New(0, 1, 2, 3))
			rec := startRecorder(t, rt)
			first := runPod(t, rt, "a", "guaranteed")
			c1 := create(t, rt, first, "app", guaranteed(1))
			second := runPod(t, rt, "a", "guaranteed")
			if second.Id == first.Id {
				t.Fatalf("a pod's second sandbox has the first's id %s", first.Id)
			}
			c2 := create(t, rt, second, "app", guaranteed(1))

			mark := rec.Mark()
			if err := tc.steps(rt, first, c1); err != nil {
				t.Fatal(err)
			}
			if got := rec.Events(mark); !slices.Equal(got, tc.want) {
				t.Errorf("NRI events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if rt.Ready(first) {
				t.Errorf("the first sandbox is ready")
			}
			if _, err := rt.CreateContainer(first, "late", guaranteed(1)); err == nil {
				t.Errorf("a container was created in the stopped sandbox")
			}
			if got := slices.ContainsFunc(rt.Pods(), func(p *api.PodSandbox) bool { return p.Id == first.Id }); got == tc.removed {
				t.Errorf("the runtime has the first sandbox: %v, want %v", got, !tc.removed)
			}
			if !rt.Ready(second) {
				t.Errorf("the second sandbox is not ready")
			}
			if running := ids(rt.Running()); !slices.Equal(running, []string{c2.Id}) {
				t.Errorf("running containers %v, want only %s", running, c2.Id)
			}
		})
	}
}

// TestExitCodes stops containers the ways a kubelet's pod sees them stop:
// a process that exits by itself reaches the plugin as StopContainer with
// its exit code and the time it finished, as containerd's task-exit
// handler sends it; the kubelet's StopContainer kills the process.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(rt *Runtime, c *api.Container) error
		want string
	}{
		{"an init container completes", func(rt *Runtime, c *api.Container) error { return rt.ExitContainer(c, 0) },
			"StopContainer a-app-1 in sandbox-a-uid-1, exit code 0"},
		{"a crash", func(rt *Runtime, c *api.Container) error { return rt.ExitContainer(c, 2) },
			"StopContainer a-app-1 in sandbox-a-uid-1, exit code 2"},
		{"the kubelet stops it", func(rt *Runtime, c *api.Container) error { return rt.StopContainer(c) },
			"StopContainer a-app-1 in sandbox-a-uid-1, exit code 137"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(t, cpuset.New(0, 1, 2, 3))
			rec := startRecorder(t, rt)
			c := create(t, rt, runPod(t, rt, "a", "guaranteed"), "app", guaranteed(1))
			mark := rec.Mark()
			if err := tc.stop(rt, c); err != nil {
				t.Fatal(err)
			}
			if got := rec.Events(mark); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("NRI events %q, want %q", got, tc.want)
			}
			if cpus, running := rt.CPUs(c.Id); running {
				t.Errorf("the stopped container runs on %s", cpus)
			}
		})
	}
}

// TestStateMap plays what containerd's NRI state map decides within one
// containerd's life: a stop is sent once, however many ways a container
// stops, and the removal of a running container is preceded by its stop.
func TestStateMap(t *testing.T) {
	const (
		stop137 = "StopContainer a-app-1 in sandbox-a-uid-1, exit code 137"
		remove  = "RemoveContainer a-app-1 in sandbox-a-uid-1"
	)
	for _, tc := range []struct {
		name  string
		steps func(rt *Runtime, pod *api.PodSandbox, c *api.Container) error
		want  []string
	}{
		{"the kubelet stops a container that exited", func(rt *Runtime, _ *api.PodSandbox, c *api.Container) error {
			return errors.Join(rt.ExitContainer(c, 1), rt.StopContainer(c))
		}, []string{"StopContainer a-app-1 in sandbox-a-uid-1, exit code 1"}},
		{"a running container removed", func(rt *Runtime, _ *api.PodSandbox, c *api.Container) error {
			return rt.RemoveContainer(c)
		}, []string{stop137, remove}},
		{"a container removed twice", func(rt *Runtime, _ *api.PodSandbox, c *api.Container) error {
			return errors.Join(rt.StopContainer(c), rt.RemoveContainer(c), rt.RemoveContainer(c))
		}, []string{stop137, remove}},
		{"a sandbox stopped twice, then removed", func(rt *Runtime, pod *api.PodSandbox, _ *api.Container) error {
			return errors.Join(rt.StopPod(pod), rt.StopPod(pod), rt.RemovePod(pod))
		}, []string{stop137, "StopPodSandbox sandbox-a-uid-1", remove, "RemovePodSandbox sandbox-a-uid-1"}},
		{"a sandbox removed after its container completed", func(rt *Runtime, pod *api.PodSandbox, c *api.Container) error {
			return errors.Join(rt.ExitContainer(c, 0), rt.RemovePod(pod))
		}, []string{"StopContainer a-app-1 in sandbox-a-uid-1, exit code 0", "StopPodSandbox sandbox-a-uid-1", remove, "RemovePodSandbox sandbox-a-uid-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(t, cpuset.New(0, 1, 2, 3))
			rec := startRecorder(t, rt)
			pod := runPod(t, rt, "a", "guaranteed")
			c := create(t, rt, pod, "app", guaranteed(1))
			mark := rec.Mark()
			if err := tc.steps(rt, pod, c); err != nil {
				t.Fatal(err)
			}
			if got := rec.Events(mark); !slices.Equal(got, tc.want) {
				t.Errorf("NRI events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestSynchronize connects a second plugin to a runtime whose pods and
// containers went through a pod's life: its Synchronize carries every
// sandbox, stopped or not, with the pod resources it was run with, and
// the containers that have not stopped, with their current resources, as
// containerd 2.4 lists them.
func TestSynchronize(t *testing.T) {
	rt := New(t, cpuset.New(0, 1, 2, 3, 4, 5, 6, 7))
	startRecorder(t, rt)
	type row struct {
		name   string
		change func(rt *Runtime, pod *api.PodSandbox, c *api.Container) error
		listed bool  // the container is in Synchronize
		quota  int64 // with this CPU quota
	}
	rows := []row{
		{"running", func(*Runtime, *api.PodSandbox, *api.Container) error { return nil }, true, 100000},
		{"resized", func(rt *Runtime, _ *api.PodSandbox, c *api.Container) error {
			return rt.UpdateContainer(c, guaranteed(2))
		}, true, 200000},
		{"completed", func(rt *Runtime, _ *api.PodSandbox, c *api.Container) error { return rt.ExitContainer(c, 0) }, false, 0},
		{"stopped", func(rt *Runtime, _ *api.PodSandbox, c *api.Container) error { return rt.StopContainer(c) }, false, 0},
		{"sandbox stopped", func(rt *Runtime, pod *api.PodSandbox, _ *api.Container) error { return rt.StopPod(pod) }, false, 0},
	}
	byID := map[string]row{}
	for i, r := range rows {
		p := kubeletPod(fmt.Sprintf("p%d", i), "guaranteed")
		p.Resources = guaranteed(3)
		pod, err := rt.RunPod(p)
		if err != nil {
			t.Fatal(err)
		}
		c := create(t, rt, pod, "app", guaranteed(1))
		if err := r.change(rt, pod, c); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		byID[pod.Id], byID[c.Id] = r, r
	}

	pods, ctrs := startRecorder(t, rt).Synced()
	if len(pods) != len(rows) {
		t.Errorf("Synchronize carries %d pods, want %d", len(pods), len(rows))
	}
	for _, p := range pods {
		if q := p.GetLinux().GetPodResources().GetCpu().GetQuota().GetValue(); q != 300000 {
			t.Errorf("%s (%s): pod resources with quota %d, want the 300000 it was run with", p.Id, byID[p.Id].name, q)
		}
	}
	listed := map[string]bool{}
	for _, c := range ctrs {
		r := byID[c.Id]
		listed[r.name] = true
		if c.State != api.ContainerState_CONTAINER_RUNNING {
			t.Errorf("%s: listed in state %s", r.name, c.State)
		}
		if q := c.GetLinux().GetResources().GetCpu().GetQuota().GetValue(); q != r.quota {
			t.Errorf("%s: listed with quota %d, want %d", r.name, q, r.quota)
		}
		if cpus, _ := rt.CPUs(c.Id); c.GetLinux().GetResources().GetCpu().GetCpus() != cpus.String() {
			t.Errorf("%s: listed on CPUs %q, runs on %s", r.name, c.GetLinux().GetResources().GetCpu().GetCpus(), cpus)
		}
	}
	for _, r := range rows {
		if listed[r.name] != r.listed {
			t.Errorf("%s: in Synchronize %v, want %v", r.name, listed[r.name], r.listed)
		}
	}
}

// TestRestartContainerd restarts containerd under a plugin, which
// connects again and gets Synchronize with what runs. containerd's NRI
// state map starts empty: the stops and removals of the sandboxes run
// before the restart no longer reach the plugin, nor the removal of a
// container that exited before it, while those of the containers that ran
// through it do, and everything new is sent as before.
func TestRestartContainerd(t *testing.T) {
	const (
		stopA   = "StopContainer a-app-1 in sandbox-a-uid-1, exit code 137"
		removeA = "RemoveContainer a-app-1 in sandbox-a-uid-1"
	)
	for _, tc := range []struct {
		name  string
		steps func(rt *Runtime, a, b *api.PodSandbox, ca, cb *api.Container) error
		want  []string
	}{
		{"a container from before stopped and removed", func(rt *Runtime, _, _ *api.PodSandbox, ca, _ *api.Container) error {
			return errors.Join(rt.StopContainer(ca), rt.RemoveContainer(ca))
		}, []string{stopA, removeA}},
		{"a sandbox from before removed", func(rt *Runtime, a, _ *api.PodSandbox, _, _ *api.Container) error {
			return rt.RemovePod(a)
		}, []string{stopA, removeA}},
		{"a sandbox whose container exited before removed", func(rt *Runtime, _, b *api.PodSandbox, _, _ *api.Container) error {
			return rt.RemovePod(b)
		}, nil},
		{"a new sandbox run and removed", func(rt *Runtime, _, _ *api.PodSandbox, _, _ *api.Container) error {
			pod := runPod(t, rt, "a", "burstable")
			create(t, rt, pod, "app", burstable(100))
			return rt.RemovePod(pod)
		}, []string{
			"RunPodSandbox sandbox-a-uid-2",
			"CreateContainer a-app-3 in sandbox-a-uid-2",
			"StopContainer a-app-3 in sandbox-a-uid-2, exit code 137",
			"StopPodSandbox sandbox-a-uid-2",
			"RemoveContainer a-app-3 in sandbox-a-uid-2",
			"RemovePodSandbox sandbox-a-uid-2",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(t, cpuset.New(0, 1, 2, 3))
			rec := startRecorder(t, rt)
			a, b := runPod(t, rt, "a", "burstable"), runPod(t, rt, "b", "burstable")
			ca, cb := create(t, rt, a, "app", burstable(100)), create(t, rt, b, "app", burstable(100))
			if err := rt.ExitContainer(cb, 0); err != nil {
				t.Fatal(err)
			}

			syncs, mark := rt.Syncs(), rec.Mark()
			rt.RestartContainerd()
			rt.WaitSynced(syncs + 1)
			want := "Synchronize pods [sandbox-a-uid-1 sandbox-b-uid-1] containers [a-app-1]"
			if got := rec.Events(mark); !slices.Equal(got, []string{want}) {
				t.Fatalf("NRI events of the restart %q, want %q", got, want)
			}
			if !rt.Ready(a) || !rt.Ready(b) {
				t.Errorf("a sandbox is not ready after the restart")
			}

			mark = rec.Mark()
			if err := tc.steps(rt, a, b, ca, cb); err != nil {
				t.Fatal(err)
			}
			if got := rec.Events(mark); !slices.Equal(got, tc.want) {
				t.Errorf("NRI events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestReboot reboots the node under a plugin: every container is stopped
// (exit code 255) and every sandbox not ready without an NRI event, the
// plugin connects again and gets Synchronize with the sandboxes and no
// container. The kubelet's clean-up of the old sandboxes sends nothing,
// its new sandboxes are sent as before, and the invariant check counts
// no CPU of the old containers.
func TestReboot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(rt *Runtime, a, b *api.PodSandbox, ca, cb *api.Container) error
		want  []string
	}{
		{"the old containers stopped and removed", func(rt *Runtime, _, _ *api.PodSandbox, ca, cb *api.Container) error {
			return errors.Join(rt.StopContainer(ca), rt.RemoveContainer(ca), rt.StopContainer(cb), rt.RemoveContainer(cb))
		}, nil},
		{"the old sandboxes stopped and removed", func(rt *Runtime, a, b *api.PodSandbox, _, _ *api.Container) error {
			return errors.Join(rt.StopPod(a), rt.RemovePod(a), rt.RemovePod(b))
		}, nil},
		{"a new sandbox of a pod", func(rt *Runtime, a, _ *api.PodSandbox, _, _ *api.Container) error {
			create(t, rt, runPod(t, rt, "a", "guaranteed"), "app", guaranteed(2))
			return rt.RemovePod(a)
		}, []string{
			"RunPodSandbox sandbox-a-uid-2",
			"CreateContainer a-app-4 in sandbox-a-uid-2",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(t, cpuset.New(0, 1, 2, 3))
			rec := startRecorder(t, rt)
			b := runPod(t, rt, "b", "burstable")
			cb := create(t, rt, b, "app", burstable(100))
			if err := rt.ExitContainer(cb, 0); err != nil {
				t.Fatal(err)
			}
			a := runPod(t, rt, "a", "guaranteed")
			ca := create(t, rt, a, "app", guaranteed(2))

			syncs, mark := rt.Syncs(), rec.Mark()
			rt.Reboot()
			rt.WaitSynced(syncs + 1)
			want := "Synchronize pods [sandbox-a-uid-1 sandbox-b-uid-1] containers []"
			if got := rec.Events(mark); !slices.Equal(got, []string{want}) {
				t.Fatalf("NRI events of the reboot %q, want %q", got, want)
			}
			if running := ids(rt.Running()); len(running) != 0 {
				t.Errorf("containers %v run after the reboot", running)
			}
			rt.Locked(func() {
				for _, c := range []*api.Container{ca, cb} {
					if c.State != api.ContainerState_CONTAINER_STOPPED || c.ExitCode != map[*api.Container]int32{ca: 255, cb: 0}[c] {
						t.Errorf("%s after the reboot: %s, exit code %d", c.Id, c.State, c.ExitCode)
					}
				}
			})
			for _, pod := range []*api.PodSandbox{a, b} {
				if rt.Ready(pod) {
					t.Errorf("%s is ready after the reboot", pod.Id)
				}
			}
			if _, err := rt.CreateContainer(a, "late", guaranteed(1)); err == nil {
				t.Errorf("a container was created in a sandbox from before the reboot")
			}

			mark = rec.Mark()
			if err := tc.steps(rt, a, b, ca, cb); err != nil {
				t.Fatal(err)
			}
			if got := rec.Events(mark); !slices.Equal(got, tc.want) {
				t.Errorf("NRI events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if v := rt.Violations(); len(v) != 0 {
				t.Errorf("invariant violations: %v", v)
			}
		})
	}
}

// TestPodOverhead: a pod's RuntimeClass overhead reaches the plugins as
// containerd passes it on, apart from the pod resources: in the
// sandbox's Linux.PodOverhead at RunPodSandbox, and as UpdatePodSandbox's
// overhead argument.
func TestPodOverhead(t *testing.T) {
	rt := New(t, cpuset.New(0, 1, 2, 3))
	rec := startRecorder(t, rt)
	pod := kubeletPod("a", "guaranteed")
	pod.Resources = guaranteed(2)
	overhead := policy.Resources{CPUShares: 256, CPUQuota: 25000, CPUPeriod: 100000}
	sb, err := rt.RunPodWithOverhead(pod, overhead)
	if err != nil {
		t.Fatal(err)
	}
	got := rec.Sandbox(sb.Id)
	if got == nil {
		t.Fatalf("no RunPodSandbox of %s", sb.Id)
	}
	if o := fromNRIResources(got.GetLinux().GetPodOverhead()); o != overhead {
		t.Errorf("RunPodSandbox's PodOverhead %+v, want %+v", o, overhead)
	}
	if r := fromNRIResources(got.GetLinux().GetPodResources()); r != pod.Resources {
		t.Errorf("RunPodSandbox's PodResources %+v, want %+v", r, pod.Resources)
	}
	plain := runPod(t, rt, "b", "guaranteed")
	if o := rec.Sandbox(plain.Id).GetLinux().GetPodOverhead(); o != nil {
		t.Errorf("a pod without an overhead has PodOverhead %v", o)
	}

	grown := guaranteed(3)
	if err := rt.UpdatePod(sb, policy.PodResources{Resources: grown, Overhead: overhead}); err != nil {
		t.Fatal(err)
	}
	updates := rec.PodUpdates()
	if len(updates) != 1 {
		t.Fatalf("%d UpdatePodSandbox, want 1", len(updates))
	}
	if u := updates[0]; u.pod != sb.Id || fromNRIResources(u.overhead) != overhead || fromNRIResources(u.resources) != grown {
		t.Errorf("UpdatePodSandbox of %s with overhead %+v and resources %+v, want %s, %+v and %+v",
			u.pod, fromNRIResources(u.overhead), fromNRIResources(u.resources), sb.Id, overhead, grown)
	}
}
