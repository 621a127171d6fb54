package integration

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// runningPlugin is a plugin connected to a fake runtime.
type runningPlugin struct {
	*plugin.Plugin
	t        testing.TB
	rt       *fakeruntime.Runtime
	registry *prometheus.Registry
	stateDir string
	cancel   context.CancelFunc
	done     chan struct{}
}

// testLogger sends the plugin's logs to the test log when -v is given.
func testLogger(t testing.TB) *logrus.Logger {
	log := logrus.New()
	log.SetOutput(io.Discard)
	if testing.Verbose() {
		log.SetOutput(logWriter{t})
		log.SetLevel(logrus.DebugLevel)
	}
	return log
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// startPlugin starts a plugin on stateDir against rt and waits until it is
// registered and synchronized.
func startPlugin(t testing.TB, rt *fakeruntime.Runtime, pol *policy.Policy, stateDir string) *runningPlugin {
	t.Helper()
	return startPluginWith(t, rt, pol, stateDir, nil)
}

// startPluginWith is startPlugin with options changed by configure.
func startPluginWith(t testing.TB, rt *fakeruntime.Runtime, pol *policy.Policy, stateDir string, configure func(*plugin.Options)) *runningPlugin {
	t.Helper()
	store, err := state.NewStore(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics, err := plugin.NewMetrics(reg, plugin.BuildInfo{Version: "test", Revision: "test", GoVersion: "go"})
	if err != nil {
		t.Fatal(err)
	}
	opts := plugin.Options{
		Socket:         rt.Socket(),
		CgroupfsRoot:   rt.CgroupRoot(),
		VerifyInterval: 50 * time.Millisecond,
		Log:            testLogger(t),
		Metrics:        metrics,
		ReconnectMin:   20 * time.Millisecond,
		DialInterval:   20 * time.Millisecond,
		ReconnectMax:   200 * time.Millisecond,
		// The tests wait for the shared containers' growth after every
		// shrink: a shorter quiet period than the command's keeps them
		// quick (the plugin's command runs with its own in load_test.go).
		SendDelay: 20 * time.Millisecond,
	}
	if configure != nil {
		configure(&opts)
	}
	p, err := plugin.New(pol, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rp := &runningPlugin{Plugin: p, t: t, rt: rt, registry: reg, stateDir: stateDir, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rp.done)
		if err := p.Run(ctx); err != nil {
			t.Errorf("plugin: %v", err)
		}
		if err := store.Close(); err != nil {
			t.Errorf("closing the state store: %v", err)
		}
	}()
	t.Cleanup(rp.Stop)
	waitFor(t, "plugin registered and synchronized", p.Ready)
	// The runtime adds a plugin to those it delivers events to only once
	// its Synchronize returned: wait for the end of that sync, as
	// containerd does before it relays CRI requests.
	rt.BlockPluginSync().Unblock()
	return rp
}

// Stop stops the plugin and waits for it, and for the runtime to notice
// that it is gone (idempotent).
func (rp *runningPlugin) Stop() {
	rp.cancel()
	<-rp.done
	rp.rt.WaitPluginGone()
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// settled reports whether the runtime runs every container on the cpuset
// the plugin wants for it, with no unsolicited update in flight.
func settled(rp *runningPlugin, rt *fakeruntime.Runtime) bool {
	snap := rp.Snapshot()
	if snap.Lending != "" {
		return false
	}
	applied := rt.Applied()
	for id, c := range snap.Containers {
		if c.Stopped {
			continue
		}
		got, ok := applied[id]
		if !ok {
			continue
		}
		want, _ := cpuset.Parse(c.CPUs)
		if !got.Equals(want) {
			return false
		}
	}
	return true
}

// checkpointState reads the durable state on disk (the checkpoint file),
// as another process would.
func checkpointState(t testing.TB, dir string, online cpuset.CPUSet) *state.State {
	t.Helper()
	st, err := state.Inspect(dir, online)
	if err != nil {
		t.Fatalf("checkpoint on disk: %v", err)
	}
	return st
}

// noViolations fails the test if the runtime ever saw an overlap.
func noViolations(t testing.TB, rt *fakeruntime.Runtime) {
	t.Helper()
	for _, v := range rt.Violations() {
		t.Error("invariant violated: " + v)
	}
}

// nriDriver runs scenarios through the fake runtime and the plugin.
type nriDriver struct {
	t    testing.TB
	rt   *fakeruntime.Runtime
	rp   *runningPlugin
	pol  *policy.Policy
	pods map[string]*api.PodSandbox
	ctrs map[string]*api.Container // podUID/name → container
	// specs is what the Kubernetes API says of the pods whose spec the
	// scenario knows, which the plugin reads through it.
	specs *specAPI
}

// specAPI is the Kubernetes API as far as a scenario knows it: the specs
// of the pods it declares (a pod step, or the roles its creations name),
// nothing else (no pod ends through it, no spec for a resize: those go
// by NRI alone).
type specAPI struct {
	mu    sync.Mutex
	infos map[string]policy.PodInfo
}

var _ plugin.API = (*specAPI)(nil)

// set records what a pod's spec says, when the scenario knows it.
func (a *specAPI) set(pod policy.Pod) {
	if pod.Containers == nil && pod.Roles == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.infos[pod.UID] = policy.PodInfo{Roles: pod.Roles, GuaranteedCPUs: pod.GuaranteedCPUs, Containers: pod.Containers}
}

func (a *specAPI) PodInfo(uid string, _ time.Duration) (policy.PodInfo, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	info, ok := a.infos[uid]
	return info, ok
}
func (a *specAPI) PodSpec(string, int64, time.Duration) (policy.PodSpec, bool) { return nil, false }
func (a *specAPI) ContainerSpec(string, string, int64, time.Duration) (policy.PodSpec, bool) {
	return nil, false
}
func (a *specAPI) PodActive(string) bool                                    { return true }
func (a *specAPI) Refused(policy.Pod, string, string, *policy.Refusal)      {}
func (a *specAPI) Resized(policy.Pod, string, cpuset.CPUSet, cpuset.CPUSet) {}
func (a *specAPI) Changed()                                                 {}

func newNRIDriver(t testing.TB, pol *policy.Policy) *nriDriver {
	rt := fakeruntime.New(t, pol.Allocator().Topology().CPUs())
	sysfs := t.TempDir()
	if err := fakesysfs.WriteDevices(sysfs, oneDevicePerNode(pol.Allocator().Topology().NUMANodes())); err != nil {
		t.Fatal(err)
	}
	specs := &specAPI{infos: map[string]policy.PodInfo{}}
	rp := startPluginWith(t, rt, pol, t.TempDir(), func(o *plugin.Options) { o.SysfsRoot = sysfs; o.API = specs })
	return &nriDriver{t: t, rt: rt, rp: rp, pol: pol, specs: specs,
		pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{}}
}

func (d *nriDriver) settle() {
	d.t.Helper()
	waitFor(d.t, "the runtime to apply what the plugin decided", func() bool { return settled(d.rp, d.rt) })
}

func (d *nriDriver) container(pod policy.Pod, name string) (*api.Container, error) {
	c := d.ctrs[pod.UID+"/"+name]
	if c == nil {
		return nil, fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	return c, nil
}

// unchanged runs a step that may be refused and checks that a refusal
// changed no cpuset and not the durable state (the checkpoint file).
func (d *nriDriver) unchanged(step func() error) error {
	online := d.pol.Allocator().Topology().CPUs()
	before, saved := d.rt.Applied(), durableState(d.rp.stateDir, online)
	err := step()
	if err != nil {
		after := d.rt.Applied()
		for id, cpus := range before {
			if !after[id].Equals(cpus) {
				d.t.Errorf("refused request changed %s from %s to %s", id, cpus, after[id])
			}
		}
		if now := durableState(d.rp.stateDir, online); !now.Equal(saved) {
			d.t.Errorf("refused request changed the checkpoint:\nbefore %+v\nafter  %+v", saved, now)
		}
	}
	d.settle()
	return err
}

// durableState reads the state on disk, or nil when there is none yet.
func durableState(dir string, online cpuset.CPUSet) *state.State {
	st, err := state.Inspect(dir, online)
	if err != nil {
		return nil
	}
	return st
}

// RunPod implements scenario.Driver: the runtime's sandbox of the pod.
func (d *nriDriver) RunPod(pod policy.Pod) error {
	d.specs.set(pod)
	sb, err := d.rt.RunPod(pod)
	if err != nil {
		return err
	}
	d.pods[pod.UID] = sb
	d.settle() // (a pod's admission shrinks the shared containers)
	return nil
}

// oneDevicePerNode is a sysfs device tree with one char device per NUMA
// node (/dev/testdevN, 240:N, behind a PCI function on node N), for the
// scenarios' devices.
func oneDevicePerNode(nodes []int) fakesysfs.Devices {
	var d fakesysfs.Devices
	for _, n := range nodes {
		addr := fmt.Sprintf("0000:%02x:00.0", 0x10+n)
		d.PCI = append(d.PCI, fakesysfs.PCIFunction{Addr: addr, Node: n})
		d.Nodes = append(d.Nodes, fakesysfs.DeviceNode{Type: "c", Major: 240, Minor: n, Parent: addr,
			Dir: fmt.Sprintf("testdev/testdev%d", n), DevPath: fmt.Sprintf("/dev/testdev%d", n)})
	}
	return d
}

// CreateContainerWithDevices implements scenario.DeviceDriver: the
// container is given the test device of each NUMA node named, which the
// plugin finds in its sysfs tree.
func (d *nriDriver) CreateContainerWithDevices(pod policy.Pod, name string, r policy.Resources, nodes []int) error {
	var devs []*api.LinuxDevice
	for _, n := range nodes {
		devs = append(devs, &api.LinuxDevice{Path: fmt.Sprintf("/dev/testdev%d", n), Type: "c", Major: 240, Minor: int64(n)})
	}
	return d.create(pod, name, func(sb *api.PodSandbox) (*api.Container, error) {
		return d.rt.CreateContainerWithDevices(sb, name, r, devs)
	})
}

func (d *nriDriver) CreateContainer(pod policy.Pod, name string, r policy.Resources) error {
	return d.create(pod, name, func(sb *api.PodSandbox) (*api.Container, error) { return d.rt.CreateContainer(sb, name, r) })
}

// create runs a pod's sandbox if needed and creates a container with
// createIn.
func (d *nriDriver) create(pod policy.Pod, name string, createIn func(*api.PodSandbox) (*api.Container, error)) error {
	d.specs.set(pod)
	sb := d.pods[pod.UID]
	if sb == nil {
		if err := d.RunPod(pod); err != nil {
			return err
		}
		sb = d.pods[pod.UID]
	}
	return d.unchanged(func() error {
		c, err := createIn(sb)
		if err == nil {
			d.ctrs[pod.UID+"/"+name] = c
		}
		return err
	})
}

func (d *nriDriver) UpdateContainer(pod policy.Pod, name string, r policy.Resources) error {
	c, err := d.container(pod, name)
	if err != nil {
		return err
	}
	return d.unchanged(func() error { return d.rt.UpdateContainer(c, r) })
}

// StopContainer implements scenario.Driver: a process that exits by
// itself with exitCode, or the kubelet's kill (137).
func (d *nriDriver) StopContainer(pod policy.Pod, name string, exitCode int32) error {
	c, err := d.container(pod, name)
	if err != nil {
		return err
	}
	defer d.settle()
	if exitCode == fakeruntime.ExitCodeKilled {
		return d.rt.StopContainer(c)
	}
	return d.rt.ExitContainer(c, exitCode)
}

func (d *nriDriver) RestartContainer(pod policy.Pod, name string, r policy.Resources) error {
	old, err := d.container(pod, name)
	if err != nil {
		return err
	}
	if err := d.StopContainer(pod, name, fakeruntime.ExitCodeKilled); err != nil {
		return err
	}
	if err := d.CreateContainer(pod, name, r); err != nil {
		return err
	}
	defer d.settle()
	return d.rt.RemoveContainer(old)
}

func (d *nriDriver) RemoveContainer(pod policy.Pod, name string) error {
	c, err := d.container(pod, name)
	if err != nil {
		return err
	}
	defer d.settle()
	delete(d.ctrs, pod.UID+"/"+name)
	return d.rt.RemoveContainer(c)
}

func (d *nriDriver) RemovePod(pod policy.Pod) error {
	sb := d.pods[pod.UID]
	if sb == nil {
		return fmt.Errorf("no pod %s", pod.Name)
	}
	defer d.settle()
	delete(d.pods, pod.UID)
	for key, c := range d.ctrs {
		if c.PodSandboxId == sb.Id {
			delete(d.ctrs, key)
		}
	}
	return d.rt.RemovePod(sb)
}

func (d *nriDriver) UpdatePod(pod policy.Pod, r policy.PodResources) error {
	sb := d.pods[pod.UID]
	if sb == nil {
		return fmt.Errorf("no pod %s", pod.Name)
	}
	return d.unchanged(func() error { return d.rt.UpdatePod(sb, r) })
}

func (d *nriDriver) ContainerCPUs(pod policy.Pod, name string) (cpuset.CPUSet, bool) {
	c := d.ctrs[pod.UID+"/"+name]
	if c == nil {
		return cpuset.New(), false
	}
	return d.rt.CPUs(c.Id)
}

// State reads the checkpoint from disk: what the scenario checks is what
// the plugin made durable.
func (d *nriDriver) State() *state.State {
	return checkpointState(d.t, d.rp.stateDir, d.pol.Allocator().Topology().CPUs())
}

func (d *nriDriver) NUMANodesOf(cpus cpuset.CPUSet) int {
	return d.pol.Allocator().Topology().NUMANodesOf(cpus).Count()
}
