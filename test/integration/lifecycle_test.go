package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// node is a fixture machine with a configuration.
type node struct {
	cfg  *config.Config
	topo *cpuallocator.Topology
	pol  *policy.Policy
}

// newNode writes spec as a sysfs tree and builds the policy of cfgYAML.
func newNode(t testing.TB, spec fakesysfs.Spec, cfgYAML string) *node {
	t.Helper()
	// The sysfs tree stays in memory: writing thousands of files to disk
	// would only slow the suite (and disturb the benchmark's fdatasyncs).
	fsys, err := fakesysfs.GenerateFS(spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	topo, err := cpuallocator.DiscoverFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := assemble.Policy(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return &node{cfg: cfg, topo: topo, pol: pol}
}

func guaranteed(cpus int64) policy.Resources {
	return scenario.KubeletResources("guaranteed", cpus*1000, cpus*1000, 1<<30)
}

func burstable(milli int64) policy.Resources {
	return scenario.KubeletResources("burstable", milli, 0, 0)
}

func pod(t testing.TB, rt *fakeruntime.Runtime, name, qos string) *api.PodSandbox {
	t.Helper()
	sb, err := rt.RunPod(policyPod(t, name, qos))
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func mustCreate(t testing.TB, rt *fakeruntime.Runtime, sb *api.PodSandbox, name string, r policy.Resources) *api.Container {
	t.Helper()
	c, err := rt.CreateContainer(sb, name, r)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return c
}

func wantCPUs(t testing.TB, rt *fakeruntime.Runtime, c *api.Container, want string) {
	t.Helper()
	got, _ := rt.CPUs(c.Id)
	if got.String() != want {
		t.Errorf("%s runs on %q, want %q", c.Name, got, want)
	}
}

// TestShrinkDefersSharedGrowth checks the ordering of a shrink: the reply
// carries only the target's smaller cpuset, and the shared containers grow
// into the released CPUs only afterwards, through an unsolicited update.
func TestShrinkDefersSharedGrowth(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPlugin(t, rt, n.pol, t.TempDir())

	shared := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	if err := rt.UpdateContainer(g, guaranteed(4)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, g, "1-4")
	wantCPUs(t, rt, shared, "0,5-7")

	mark := len(rt.Log())
	if err := rt.UpdateContainer(g, guaranteed(2)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, g, "1-2")
	wantCPUs(t, rt, shared, "0,3-7")

	got := rt.Log()[mark:]
	want := []fakeruntime.Update{{Origin: "target", Container: "app", CPUs: "1-2"}, {Origin: "unsolicited", Container: "nginx", CPUs: "0,3-7"}}
	if !slices.Equal(got, want) {
		t.Errorf("updates applied for the shrink: %v, want %v", got, want)
	}
	noViolations(t, rt)
}

// TestGrowthShrinksSharedFirst checks the ordering of a growth: the shared
// containers' shrink comes in the same reply, before the target.
func TestGrowthShrinksSharedFirst(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	startPlugin(t, rt, n.pol, t.TempDir())
	mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	mark := len(rt.Log())
	if err := rt.UpdateContainer(g, guaranteed(3)); err != nil {
		t.Fatal(err)
	}
	got := rt.Log()[mark:]
	want := []fakeruntime.Update{{Origin: "pre-update", Container: "nginx", CPUs: "0,4-7"}, {Origin: "target", Container: "app", CPUs: "1-3"}}
	if !slices.Equal(got, want) {
		t.Errorf("updates applied for the growth: %v, want %v", got, want)
	}
	noViolations(t, rt)
}

// TestPluginRestartKeepsCPUs stops the plugin, lets the node change while
// it is down (a new shared container gets every CPU, pinned containers are
// resized without the plugin), starts a new plugin on the same checkpoint,
// and checks that Synchronize keeps every exclusive CPU, catches up the
// growth it missed, keeps the CPUs a shrink below the original would take,
// and puts the shared containers back on the shared pool.
func TestPluginRestartKeepsCPUs(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 4, ThreadsPerCore: 2}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPlugin(t, rt, n.pol, stateDir)

	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	gu := pod(t, rt, "gu", "guaranteed")
	g1 := mustCreate(t, rt, gu, "c1", guaranteed(2))
	g2 := mustCreate(t, rt, gu, "c2", guaranteed(2))
	if err := rt.UpdateContainer(g2, guaranteed(4)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	before := rt.Applied()

	rp.Stop()
	rt.SetChecking(false)
	late := mustCreate(t, rt, pod(t, rt, "late", "besteffort"), "job", policy.Resources{CPUShares: 2})
	wantCPUs(t, rt, late, n.topo.CPUs().String())
	// Resizes go through without the plugin: below g1's baseline CPUs,
	// and a growth of g2 (the kubelet will not retry either).
	if err := rt.UpdateContainer(g1, guaranteed(1)); err != nil {
		t.Fatalf("a resize without the plugin goes through: %v", err)
	}
	if err := rt.UpdateContainer(g2, guaranteed(6)); err != nil {
		t.Fatalf("a resize without the plugin goes through: %v", err)
	}

	rp = startPlugin(t, rt, n.pol, stateDir)
	rt.SetChecking(true)
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	if got, _ := rt.CPUs(g1.Id); !got.Equals(before[g1.Id]) {
		t.Errorf("g1 runs on %s after the restart, was %s: a shrink below the baseline CPUs must not be caught up", got, before[g1.Id])
	}
	grown, _ := rt.CPUs(g2.Id)
	if grown.Size() != 6 || !before[g2.Id].IsSubsetOf(grown) {
		t.Errorf("g2 runs on %s after the restart; want 6 CPUs keeping %s", grown, before[g2.Id])
	}
	after := checkpointState(t, stateDir, n.topo.CPUs())
	wantCPUs(t, rt, web, after.DefaultCPUSet().String())
	wantCPUs(t, rt, late, after.DefaultCPUSet().String())
	if a, _ := after.Assignment("gu-uid", "c2"); !a.Assigned().Equals(grown) || a.Baseline.String() != "4-5" {
		t.Errorf("checkpoint of c2 after the restart: %+v", a)
	}
	if a, b := after.Assignment("gu-uid", "c1"); !b || !a.Assigned().Equals(before[g1.Id]) {
		t.Errorf("checkpoint of c1 after the restart: %+v", a)
	}
	noViolations(t, rt)
}

// TestCorruptCheckpointRebuilds corrupts the checkpoint while the plugin is
// down: the new plugin moves the file aside and rebuilds the assignments
// from the runtime's view (the current cpusets become the original ones).
func TestCorruptCheckpointRebuilds(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPlugin(t, rt, n.pol, stateDir)
	gu := pod(t, rt, "gu", "guaranteed")
	g1 := mustCreate(t, rt, gu, "c1", guaranteed(2))
	g2 := mustCreate(t, rt, gu, "c2", guaranteed(1))
	if err := rt.UpdateContainer(g2, guaranteed(3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	before := rt.Applied()
	rp.Stop()

	path := filepath.Join(stateDir, state.CheckpointFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x20
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	rp = startPlugin(t, rt, n.pol, stateDir)
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	aside, _ := filepath.Glob(path + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("corrupt checkpoint not moved aside: %v", aside)
	}
	st := checkpointState(t, stateDir, n.topo.CPUs())
	for _, c := range []*api.Container{g1, g2} {
		a, ok := st.Assignment("gu-uid", c.Name)
		if !ok || !a.Baseline.Equals(before[c.Id]) {
			t.Errorf("%s: rebuilt assignment %+v, want original %s", c.Name, a, before[c.Id])
		}
		if got, _ := rt.CPUs(c.Id); !got.Equals(before[c.Id]) {
			t.Errorf("%s moved to %s", c.Name, got)
		}
	}
	if v := metricValue(t, rp, "nri_cpumanager_checkpoint_corrupt_total", nil); v != 1 {
		t.Errorf("checkpoint_corrupt_total = %v, want 1", v)
	}
	// The adopted CPUs are now what the container is promised.
	err = rt.UpdateContainer(g2, guaranteed(2))
	if err == nil || !strings.Contains(err.Error(), "Infeasible: prohibitedCPUAllocationError") {
		t.Errorf("shrink below the adopted CPUs: %v", err)
	}
	noViolations(t, rt)
}

// TestConfigReload applies configuration changes to a running plugin:
// inPlaceResize at once; reserved CPUs at once when no pinned container
// holds them, and otherwise once the pinned containers holding them are
// gone (the configuration waits, config_pending says so, the live keys
// of the same change apply at once).
func TestConfigReload(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPlugin(t, rt, n.pol, t.TempDir())
	r := assemble.NewReloader(testLogger(t), rp.Plugin, n.topo, n.cfg)
	next := func(change func(*config.Config)) *config.Config {
		c := *r.Applied()
		change(&c)
		return &c
	}

	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(2))
	r.Apply(next(func(c *config.Config) { c.InPlaceResize = false }))
	err := rt.UpdateContainer(g, guaranteed(3))
	if err == nil || !strings.Contains(err.Error(), "Infeasible: featureDisabledError") {
		t.Fatalf("resize with inPlaceResize off: %v", err)
	}

	// A reservation no pinned container is in the way of applies at once.
	if err := r.Apply(next(func(c *config.Config) { c.ReservedSystemCPUs = cpuset.New(0, 7) })); err != nil {
		t.Fatal(err)
	}
	if rp.ConfigPending() || metricValue(t, rp, "nri_cpumanager_config_pending", nil) != 0 {
		t.Errorf("a reservation of CPUs no pinned container holds waits")
	}
	if c := checkpointState(t, rp.stateDir, n.topo.CPUs()); !c.DefaultCPUSet().Equals(cpuset.New(0, 3, 4, 5, 6, 7)) {
		t.Errorf("shared pool %s after reserving 0,7, want 0,3-7 (strict-cpu-reservation off)", c.DefaultCPUSet())
	}
	// One that reserves g's CPU 1 waits; its live key does not.
	r.Apply(next(func(c *config.Config) { c.InPlaceResize = true; c.ReservedSystemCPUs = cpuset.New(0, 1) }))
	if !rp.ConfigPending() || metricValue(t, rp, "nri_cpumanager_config_pending", nil) != 1 {
		t.Errorf("a reservation of a pinned CPU: pending %v, config_pending %v; want it waiting",
			rp.ConfigPending(), metricValue(t, rp, "nri_cpumanager_config_pending", nil))
	}
	if err := rt.UpdateContainer(g, guaranteed(3)); err != nil {
		t.Fatalf("resize after inPlaceResize is back on: %v", err)
	}
	wantCPUs(t, rt, g, "1-3")
	if err := rt.RemovePod(rt.PodOf(g)); err != nil {
		t.Fatal(err)
	}
	if rp.ConfigPending() {
		t.Fatalf("the configuration still waits after the pinned pod left")
	}
	h := mustCreate(t, rt, pod(t, rt, "next", "guaranteed"), "app", guaranteed(1))
	wantCPUs(t, rt, h, "2")
	if rec, ok := checkpointState(t, rp.stateDir, n.topo.CPUs()).ConfigRecord(); !ok || !rec.ReservedCPUs.Equals(cpuset.New(0, 1)) {
		t.Errorf("the checkpoint records reserved CPUs %v (present %v), want 0-1", rec.ReservedCPUs, ok)
	}
	noViolations(t, rt)
}

// TestMalformedPayloads sends events with missing fields and unknown ids:
// the plugin answers without crashing and stays connected.
func TestMalformedPayloads(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 4}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPlugin(t, rt, n.pol, t.TempDir())
	bare := &api.PodSandbox{Id: "bare"}
	bad := &api.Container{Id: "bad", PodSandboxId: "bare", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "9-x"}}}}
	for _, tc := range []struct {
		name string
		send func(ctx context.Context, nri *adaptation.Adaptation) error
	}{
		{"CreateContainer without Linux", func(ctx context.Context, nri *adaptation.Adaptation) error {
			_, err := nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: bare, Container: &api.Container{Id: "x", PodSandboxId: "bare"}})
			return err
		}},
		{"UpdateContainer of an unknown container without resources", func(ctx context.Context, nri *adaptation.Adaptation) error {
			_, err := nri.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: bare, Container: &api.Container{Id: "unknown"}})
			return err
		}},
		{"StopContainer of an unknown container", func(ctx context.Context, nri *adaptation.Adaptation) error {
			_, err := nri.StopContainer(ctx, &api.StopContainerRequest{Pod: bare, Container: &api.Container{Id: "unknown"}})
			return err
		}},
		{"RemoveContainer of an unknown container", func(ctx context.Context, nri *adaptation.Adaptation) error {
			return nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: bare, Container: &api.Container{Id: "unknown"}})
		}},
		{"CreateContainer with an invalid cpuset", func(ctx context.Context, nri *adaptation.Adaptation) error {
			_, err := nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: bare, Container: bad})
			return err
		}},
		{"StopPodSandbox of a pod without fields", func(ctx context.Context, nri *adaptation.Adaptation) error {
			return nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: bare})
		}},
		{"RemovePodSandbox of a pod without fields", func(ctx context.Context, nri *adaptation.Adaptation) error {
			return nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: bare})
		}},
	} {
		if err := rt.Send(tc.send); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if !rp.Ready() {
		t.Errorf("plugin disconnected")
	}
	g := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(1))
	wantCPUs(t, rt, g, "1")
}

// TestRandomThroughNRI applies random sequences of creations, resizes and
// removals through NRI on 64- and 256-CPU machines; the runtime checks the
// invariant after every single applied update.
func TestRandomThroughNRI(t *testing.T) {
	for _, tc := range []struct {
		spec fakesysfs.Spec
		cfg  string
	}{
		{fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 8, ThreadsPerCore: 2, L3PerNUMA: 2, Numbering: fakesysfs.SiblingsOffset},
			"reservedCPUCount: 2\ntopologyManagerPolicy: single-numa-node\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}"},
		{fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 16, ThreadsPerCore: 2, L3PerNUMA: 2},
			"reservedCPUCount: 4\ntopologyManagerPolicy: best-effort\ncpuManagerPolicyOptions: {strict-cpu-reservation: \"true\"}"},
	} {
		t.Run(fmt.Sprint(tc.spec.NumCPUs()), func(t *testing.T) {
			n := newNode(t, tc.spec, tc.cfg)
			d := newNRIDriver(t, n.pol)
			smt := n.topo.ThreadsPerCore()
			type live struct {
				pod  policy.Pod
				name string
				qos  string
			}
			var ctrs []live
			created, resized := 0, 0
			// Scrapes run throughout: the CPU gauges read the committed
			// model without the plugin's lock (the race detector checks
			// that no committed model is changed in place).
			stopScraping, scraped := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(scraped)
				for {
					select {
					case <-stopScraping:
						return
					default:
					}
					if _, err := d.rp.registry.Gather(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			seed := uint64(tc.spec.NumCPUs())
			for step := 0; step < 150; step++ {
				seed = seed*6364136223846793005 + 1442695040888963407
				k := int(seed>>33) % 10
				switch {
				case k < 4 || len(ctrs) == 0:
					qos := []string{"guaranteed", "guaranteed", "burstable"}[int(seed>>40)%3]
					p, _ := scenario.KubeletPod(fmt.Sprintf("p%d", step), qos)
					cpus := int64(smt * (1 + int(seed>>45)%4))
					if err := d.CreateContainer(p, "c", scenario.KubeletResources(qos, cpus*1000, cpus*1000, 1<<30)); err == nil {
						ctrs = append(ctrs, live{p, "c", qos})
						created++
					}
				case k < 8:
					c := ctrs[int(seed>>40)%len(ctrs)]
					cpus := int64(smt * (1 + int(seed>>45)%6))
					if err := d.UpdateContainer(c.pod, c.name, scenario.KubeletResources(c.qos, cpus*1000, cpus*1000, 1<<30)); err == nil {
						resized++ // refusals are expected too; the invariants are checked either way
					}
				default:
					i := int(seed>>40) % len(ctrs)
					if err := d.RemovePod(ctrs[i].pod); err != nil {
						t.Fatal(err)
					}
					ctrs = append(ctrs[:i], ctrs[i+1:]...)
				}
			}
			close(stopScraping)
			<-scraped
			noViolations(t, d.rt)
			saved := d.State()
			if err := n.pol.CheckInvariants(policy.NewModel(saved)); err != nil {
				t.Errorf("checkpoint on disk: %v", err)
			}
			d.settle()
			exclusive, owners := 0, 0
			for _, a := range saved.Assignments() {
				exclusive, owners = exclusive+a.Assigned().Size(), owners+1
			}
			for name, want := range map[string]int{
				"nri_cpumanager_exclusive_cpus":       exclusive,
				"nri_cpumanager_exclusive_containers": owners,
				"nri_cpumanager_shared_cpus":          saved.DefaultCPUSet().Size(),
			} {
				if got := metricValue(t, d.rp, name, nil); got != float64(want) {
					t.Errorf("%s = %v, the checkpoint says %d", name, got, want)
				}
			}
			// The walk must exercise the plugin, not only its refusals.
			if created < 20 || resized < 20 {
				t.Errorf("only %d creations and %d resizes succeeded", created, resized)
			}
		})
	}
}

// TestFailedCreationKeepsThePodsCPUs: when the creation of a pinned
// container fails after the plugin allocated its CPUs, containerd stops
// and removes the container that never ran. The pod keeps the CPUs while
// its sandbox exists, as the kubelet keeps a pod's entries: the kubelet
// creates the container again, and it gets them. The pod's removal gives
// them back to the shared pool, through an unsolicited update (a
// RemovePodSandbox reply carries none).
func TestFailedCreationKeepsThePodsCPUs(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	stateDir := t.TempDir()
	rp := startPlugin(t, rt, n.pol, stateDir)
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	gu := pod(t, rt, "gu", "guaranteed")
	if err := rt.CreateContainerFailing(gu, "app", guaranteed(3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, web, "0,4-7")
	if st := checkpointState(t, stateDir, n.topo.CPUs()); st.NumAssignments() != 1 || st.DefaultCPUSet().String() != "0,4-7" {
		t.Errorf("checkpoint after the failed creation: entries %d, shared pool %s", st.NumAssignments(), st.DefaultCPUSet())
	}
	again := mustCreate(t, rt, gu, "app", guaranteed(3))
	wantCPUs(t, rt, again, "1-3")
	if err := rt.RemovePod(gu); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, web, "0-7")
	if st := checkpointState(t, stateDir, n.topo.CPUs()); st.NumAssignments() != 0 || st.DefaultCPUSet().String() != "0-7" {
		t.Errorf("checkpoint after the pod's removal: entries %d, shared pool %s", st.NumAssignments(), st.DefaultCPUSet())
	}
	got := rt.Log()
	want := []fakeruntime.Update{{Origin: "pre-create", Container: "nginx", CPUs: "0,4-7"}, {Origin: "unsolicited", Container: "nginx", CPUs: "0-7"}}
	if !slices.Equal(got, want) {
		t.Errorf("updates applied: %v, want %v", got, want)
	}
	noViolations(t, rt)
}

// TestKubeletCheckpointImported moves a node from the kubelet's static
// policy to the plugin: the kubelet had pinned and then resized a pod
// (KEP-5554 entry: original 5-6, resized 4-7). On its first start the
// plugin imports that checkpoint, so the container keeps 4-7, may shrink
// back to 5-6 and not below; adopting its current cpuset instead would
// have promised it all of 4-7.
func TestKubeletCheckpointImported(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rt.SetChecking(false) // no plugin yet: containers get every CPU
	web := mustCreate(t, rt, pod(t, rt, "web", "burstable"), "nginx", burstable(500))
	app := mustCreate(t, rt, pod(t, rt, "gu", "guaranteed"), "app", guaranteed(4))
	rt.Locked(func() { app.Linux.Resources.Cpu.Cpus = "4-7" }) // where the kubelet's static policy put it
	kubelet := filepath.Join(t.TempDir(), "cpu_manager_state")
	text := `{"policyName":"static","defaultCpuSet":"0-3","entries":{"gu-uid":{"app":{"original":"5-6","resized":"4-7"}}},"checksum":1}`
	if err := os.WriteFile(kubelet, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	stateDir := t.TempDir()
	rp := startPluginWith(t, rt, n.pol, stateDir, func(o *plugin.Options) { o.KubeletCheckpoint = kubelet })
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	rt.SetChecking(true)
	wantCPUs(t, rt, app, "4-7")
	wantCPUs(t, rt, web, "0-3")
	if a, _ := checkpointState(t, stateDir, n.topo.CPUs()).Assignment("gu-uid", "app"); a.Baseline.String() != "5-6" || a.Resized.String() != "4-7" {
		t.Errorf("imported assignment %+v, want original 5-6 resized 4-7", a)
	}
	if err := rt.UpdateContainer(app, guaranteed(2)); err != nil {
		t.Fatalf("shrink back to the kubelet's baseline CPUs: %v", err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, app, "5-6")
	if err := rt.UpdateContainer(app, guaranteed(1)); err == nil || !strings.Contains(err.Error(), "Infeasible: prohibitedCPUAllocationError") {
		t.Errorf("shrink below the kubelet's baseline CPUs: %v", err)
	}
	noViolations(t, rt)
}

// TestPodUpdateReconcilesThePodsContainers: a pod resize (CRI
// UpdatePodSandboxResources) has the plugin read its containers' cgroups
// again and put back a cpuset that differs from the state, although the
// plugin sent them nothing since it last read them.
func TestPodUpdateReconcilesThePodsContainers(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rt.SetCgroupRoot(t.TempDir(), false)
	// No periodic pass: only the pod update may find the difference.
	var passes atomic.Int64
	rp := startPluginWith(t, rt, n.pol, t.TempDir(), func(o *plugin.Options) {
		o.VerifyInterval = 0
		o.OnVerified = func() { passes.Add(1) }
	})
	sb := pod(t, rt, "gu", "guaranteed")
	before := passes.Load()
	g := mustCreate(t, rt, sb, "app", guaranteed(2))
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	// The read that follows the creation happens first, so that only the
	// pod update can find what follows.
	waitFor(t, "the verification after the creation", func() bool { return passes.Load() > before })
	file := filepath.Join(rt.CgroupDir(g), "cpuset.cpus")
	quiet := passes.Load()
	if err := os.WriteFile(file, []byte("0-7\n"), 0o644); err != nil { // changed behind the plugin's back
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(file); strings.TrimSpace(string(data)) != "0-7" || passes.Load() != quiet {
		t.Fatalf("a verification ran (%d passes) or the cgroup was put back (%q) before the pod update: the test cannot tell what the update does",
			passes.Load()-quiet, data)
	}
	if err := rt.UpdatePod(sb, policy.PodResources{Resources: policy.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod's container put back on its CPUs", func() bool {
		data, err := os.ReadFile(file)
		return err == nil && strings.TrimSpace(string(data)) == "1-2"
	})
	if v := metricValue(t, rp, "nri_cpumanager_cpuset_drift_total", nil); v != 1 {
		t.Errorf("cpuset_drift_total = %v, want 1", v)
	}
}
