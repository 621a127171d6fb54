package e2etest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"
	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// ScenarioOptions configure PlayScenarios.
type ScenarioOptions struct {
	// Files is a glob of scenario files (test/scenarios/*.yaml).
	Files string
	// Plugin is the plugin's binary.
	Plugin string
	// NewEnv returns the containerd the scenarios run on; it is called
	// once, when a scenario is this machine's.
	NewEnv func(t *testing.T) *harness.Env
	// Started, if set, is called with each scenario's plugin once it is
	// synchronized (the VM checks the plugin's cgroup v2 line).
	Started func(t *testing.T, m *CPUManager)
	// NodeDevices are device nodes of this machine by NUMA node (the VM
	// guest's disks): a scenario's creation given devices on node n gets
	// NodeDevices[n]. A scenario with devices on a node not listed is
	// skipped.
	NodeDevices map[int]string
}

// suiteKeys are the configuration keys the suites set themselves; a
// scenario that sets one cannot be played on a real machine.
var suiteKeys = []string{"nriSocket", "stateDir", "metricsAddress", "healthAddress", "debugAddress", "kubeletCheckpoint", "logLevel", "sysfsRoot", "cgroupfsRoot"}

// PlayScenarios plays each scenario file of opts.Files, as a subtest, on
// this machine's containerd over CRI, with the plugin's real binary
// configured as the scenario says, when this machine is one of the
// scenario's (scenario.File.Match, on the topology the plugin reads from
// /sys). It skips the others, saying how this machine differs.
//
// A scenario that declares pods' specs (a pod step, or a creation naming a
// container's role: scenario.File.NeedsPodSpec) runs its plugin on a fake
// Kubernetes API server of its own (harness.FakeAPIServer, over HTTP on
// loopback), with kubernetesAPI: true: the driver adds each such pod to
// the API before it runs the pod's sandbox (apiPods), and deletes it once
// the sandbox is removed, as the API server would show the pods the
// kubelet runs; its other pods are not in the API. The plugin must watch
// the node's pods there from its start to its end (CPUManager.OnAPI).
//
// Each scenario gets a plugin of its own, with an empty checkpoint, on a
// containerd shared by the scenarios (its pods are removed after each).
// A step's action is the kubelet's CRI call (see criDriver); the cpusets
// are read from the containers' cgroup files and the state from the
// checkpoint on disk. After every step, once the plugin's asynchronous
// updates landed (within Wait), every running container's cgroup cpuset,
// its effective set and its command's Cpus_allowed_list must be what
// the checkpoint gives it (its assigned CPUs, or the shared pool), no
// CPU in two exclusive cpusets nor in an exclusive and a shared one, and
// the CPU quota what the kubelet set; a new process in each container
// the step created or resized must be allowed those CPUs too; a refused
// call must change neither the checkpoint nor any cgroup; and the
// plugin's log must have no drift warning.
//
// It returns the files it played (their base names).
func PlayScenarios(ctx context.Context, t *testing.T, opts ScenarioOptions) (played []string) {
	t.Helper()
	real, err := cpuallocator.Discover("/sys")
	if err != nil {
		t.Fatalf("read this machine's topology: %v", err)
	}
	paths, err := filepath.Glob(opts.Files)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenario files match %s (%v)", opts.Files, err)
	}
	t.Logf("this machine as the plugin reads it:\n%s", strings.Join(scenario.Shape(real), "\n"))
	type entry struct {
		f       *scenario.File
		m       scenario.Topology
		ok      bool
		skipWhy string
	}
	var files []entry
	mine := 0
	for _, path := range paths {
		f, err := scenario.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		m, ok, why, err := f.Match(real)
		if err != nil {
			t.Fatal(err)
		}
		if missing := missingDevices(f, opts.NodeDevices); ok && len(missing) > 0 {
			ok, why = false, fmt.Sprintf("the scenario gives containers devices on NUMA nodes %v, and the suite knows no device node of this machine on %v", f.DeviceNodes(), missing)
		}
		for _, key := range suiteKeys {
			if _, set := f.Config[key]; set && ok {
				t.Fatalf("%s sets %s, which the suites on real machines set themselves", path, key)
			}
		}
		if ok {
			mine++
		}
		files = append(files, entry{f: f, m: m, ok: ok, skipWhy: why})
	}
	var env *harness.Env
	if mine > 0 {
		env = opts.NewEnv(t)
	}
	for i, path := range paths {
		e := files[i]
		if e.ok {
			played = append(played, filepath.Base(path))
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			if !e.ok {
				t.Skip(e.skipWhy)
			}
			t.Logf("this machine is the scenario's %s", e.m)
			play(ctx, t, env, real, e.f, opts)
		})
	}
	return played
}

// play plays f with a plugin of its own.
func play(ctx context.Context, t *testing.T, env *harness.Env, real *cpuallocator.Topology, f *scenario.File, opts ScenarioOptions) {
	cfg, err := yaml.Marshal(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Config) == 0 {
		cfg = nil
	}
	d := &criDriver{t: t, ctx: ctx, env: env, topo: real, nodeDevices: opts.NodeDevices,
		pods: map[string]*harness.Pod{}, ctrs: map[string]*scenarioContainer{}, inAPI: map[string]*corev1.Pod{}}
	if f.NeedsPodSpec() {
		api, err := harness.StartFakeAPIServer(t.TempDir(), scenarioNode, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := api.Close(); err != nil {
				t.Errorf("stop the fake Kubernetes API server: %v", err)
			}
		})
		if d.apiPods, err = apiPods(f, scenarioNode); err != nil {
			t.Fatal(err)
		}
		d.api = api
		d.m = StartCPUManagerOnAPI(ctx, t, env, opts.Plugin, real.CPUs(), string(cfg), api)
	} else {
		d.m = StartCPUManager(ctx, t, env, opts.Plugin, real.CPUs(), string(cfg))
	}
	m := d.m
	if opts.Started != nil {
		opts.Started(t, m)
	}
	t.Cleanup(func() {
		// The pods go first, with the plugin watching; then the plugin;
		// then its API server (a cleanup registered before).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := env.CRI.Cleanup(ctx); err != nil {
			t.Errorf("remove the scenario's pods: %v", err)
		}
		m.NoDrift(t)
		if d.api != nil {
			m.OnAPI(t)
			for _, e := range d.api.Events() {
				t.Logf("the plugin's event on %s %s/%s: %s %s: %s", e.Regarding.Kind, e.Regarding.Namespace, e.Regarding.Name, e.Type, e.Reason, e.Note)
			}
		}
		if err := m.Stop(5 * time.Second); err != nil {
			t.Error(err)
		}
	})
	r := scenario.NewRunner(d)
	r.Report = func(line string) { t.Log(line) }
	r.Verify = d.verify
	r.Settle = d.settle
	if err := r.Run(f); err != nil {
		t.Fatalf("%v\nthe plugin's log, last lines:\n%s", err, m.LogTail(40))
	}
}

// missingDevices returns the NUMA nodes f gives devices on that have no
// device node in nodeDevices.
func missingDevices(f *scenario.File, nodeDevices map[int]string) []int {
	var missing []int
	for _, n := range f.DeviceNodes() {
		if _, ok := nodeDevices[n]; !ok {
			missing = append(missing, n)
		}
	}
	return missing
}

// scenarioCommand is the command of the scenarios' containers: it sleeps
// until stopped, and on SIGTERM (the kubelet's stop) exits with the code
// written in exitCodeFile, 0 without one; SIGKILL makes it 137.
var scenarioCommand = []string{"sh", "-c", "trap 'exit $(cat " + exitCodeFile + " 2>/dev/null || echo 0)' TERM; sleep 2147483647 & wait"}

const exitCodeFile = "/exit-code"

// stopTimeout is the time a stopped container gets between SIGTERM and
// SIGKILL; the scenarios' containers exit at SIGTERM.
const stopTimeout = 30 * time.Second

// scenarioContainer is a container the driver created, with what the
// checks need of it.
type scenarioContainer struct {
	*harness.Container
	cg  *harness.Cgroup
	pid int
	// running is false once it was stopped.
	running bool
	// fresh is set when the step created or resized it: a new process in
	// it is checked once (an exec, seconds in the emulated guest).
	fresh bool
	// devices are the device nodes it was given; the kubelet gives them
	// again to the next attempt of a restarted container.
	devices []harness.Device
}

// criDriver is a scenario.Driver over CRI: each action is what the
// kubelet sends containerd for it, with the resources the kubelet
// converts.
//
//   - create: RunPodSandbox at a pod's first create (its cgroup parent by
//     its QoS class, its totals when the scenario gives them), then
//     CreateContainer and StartContainer; a container created again after
//     an exit is the next attempt of its name; devices on NUMA node n are
//     the device node NodeDevices[n], given as a device plugin's
//     DeviceSpec is (at /dev/numa-node-<n> in the container);
//   - resize: UpdateContainerResources; updatePod:
//     UpdatePodSandboxResources;
//   - stop: StopContainer, the container's command exiting with the
//     step's exit code (137: killed at once);
//   - restart: StopContainer (137) unless the container exited already,
//     the next attempt created and started, then RemoveContainer of the
//     stopped one;
//   - remove: RemoveContainer; removePod: StopPodSandbox and
//     RemovePodSandbox (then the pod cgroup, as the kubelet removes it);
//   - pod: RunPodSandbox, as at a pod's first create.
//
// With the Kubernetes API (a scenario that declares pods' specs), a pod
// whose spec the scenario declares is added to the API before its
// RunPodSandbox, once the plugin's watch was sent it (the plugin waits a
// little for a Guaranteed pod's spec at its sandbox, and reads its cache
// at creations), and deleted from it after its RemovePodSandbox. Resizes
// change no pod in the API, as the fixture suites' drivers give the
// plugin no spec for a resize: the plugin waits for a spec of the new size
// and goes on with NRI alone.
type criDriver struct {
	t    *testing.T
	ctx  context.Context
	env  *harness.Env
	m    *CPUManager
	topo *cpuallocator.Topology
	// nodeDevices are the host's device nodes by NUMA node.
	nodeDevices map[int]string
	// pods are by pod UID; ctrs by "<pod UID>/<name>", the latest attempt.
	pods map[string]*harness.Pod
	ctrs map[string]*scenarioContainer
	// api is the plugin's Kubernetes API, for a scenario that declares
	// pods' specs; apiPods are the pods it shows for each sandbox the
	// scenario runs, in order (nil: not in the API), sandboxes how many
	// ran, inAPI the pods added, by UID.
	api       *harness.FakeAPIServer
	apiPods   []*corev1.Pod
	sandboxes int
	inAPI     map[string]*corev1.Pod
}

// scenarioNode is the node name of the scenarios' plugins on the fake
// Kubernetes API.
const scenarioNode = "scenario-node"

var (
	_ scenario.Driver       = (*criDriver)(nil)
	_ scenario.DeviceDriver = (*criDriver)(nil)
)

// harnessResources returns resources whose conversion by the kubelet
// (harness.Resources.LinuxResources) gives the CPU shares, quota and
// memory limit of r, which the scenario package converted already: the
// limit from the quota, and the smallest request with r's shares.
func harnessResources(r policy.Resources) (harness.Resources, error) {
	var h harness.Resources
	if r.CPUQuota > 0 {
		if r.CPUPeriod != 100000 {
			return h, fmt.Errorf("CPU period %d: the kubelet's is 100000", r.CPUPeriod)
		}
		h.CPULimitMilli = r.CPUQuota / 100
	}
	h.CPURequestMilli = (int64(r.CPUShares)*1000 + 1023) / 1024
	h.MemoryLimit = r.MemoryLimit
	got := h.LinuxResources()
	if uint64(got.CpuShares) != r.CPUShares || got.CpuQuota != r.CPUQuota || got.MemoryLimitInBytes != r.MemoryLimit {
		return h, fmt.Errorf("resources %+v do not convert back from %+v", got, r)
	}
	return h, nil
}

// qosOf reads a pod's class from its cgroup parent (scenario.KubeletPod).
func qosOf(pod policy.Pod) harness.QOSClass {
	switch {
	case strings.Contains(pod.CgroupParent, "/besteffort/"):
		return harness.QOSBestEffort
	case strings.Contains(pod.CgroupParent, "/burstable/"):
		return harness.QOSBurstable
	}
	return harness.QOSGuaranteed
}

func key(pod policy.Pod, name string) string { return pod.UID + "/" + name }

func (d *criDriver) container(pod policy.Pod, name string) (*scenarioContainer, error) {
	c := d.ctrs[key(pod, name)]
	if c == nil {
		return nil, fmt.Errorf("no container %s in pod %s", name, pod.Name)
	}
	return c, nil
}

// RunPod implements scenario.Driver.
func (d *criDriver) RunPod(pod policy.Pod) error {
	totals, err := harnessResources(pod.Resources)
	if pod.Resources == (policy.Resources{}) {
		totals, err = harness.Resources{}, nil // none
	}
	if err != nil {
		return err
	}
	if err := d.addToAPI(pod); err != nil {
		return err
	}
	p, err := d.env.CRI.RunPodSandbox(d.ctx, harness.PodSpec{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, QOS: qosOf(pod), Resources: &totals})
	if err != nil {
		return err
	}
	if d.env.CRI.CgroupDriver == harness.CgroupfsDriver && p.CgroupParent != pod.CgroupParent {
		return fmt.Errorf("pod %s runs in %s, the scenario's pod in %s", pod.Name, p.CgroupParent, pod.CgroupParent)
	}
	d.pods[pod.UID] = p
	return nil
}

// CreateContainer implements scenario.Driver.
func (d *criDriver) CreateContainer(pod policy.Pod, name string, r policy.Resources) error {
	return d.create(pod, name, r, nil)
}

// CreateContainerWithDevices implements scenario.DeviceDriver.
func (d *criDriver) CreateContainerWithDevices(pod policy.Pod, name string, r policy.Resources, nodes []int) error {
	var devices []harness.Device
	for _, n := range nodes {
		host, ok := d.nodeDevices[n]
		if !ok {
			return fmt.Errorf("%s/%s: this machine has no device node known on NUMA node %d", pod.Name, name, n)
		}
		devices = append(devices, harness.Device{HostPath: host, ContainerPath: fmt.Sprintf("/dev/numa-node-%d", n), Permissions: "r"})
	}
	return d.create(pod, name, r, devices)
}

// create creates and starts the next attempt of a container.
func (d *criDriver) create(pod policy.Pod, name string, r policy.Resources, devices []harness.Device) error {
	p := d.pods[pod.UID]
	if p == nil {
		return fmt.Errorf("no pod %s", pod.Name)
	}
	res, err := harnessResources(r)
	if err != nil {
		return err
	}
	spec := harness.ContainerSpec{Name: name, Resources: res, Command: scenarioCommand, Devices: devices}
	if old := d.ctrs[key(pod, name)]; old != nil {
		spec.Attempt = old.Attempt + 1
	}
	var c *harness.Container
	err = d.unchanged("create "+pod.Name+"/"+name, func() error {
		var err error
		c, err = p.CreateContainer(d.ctx, spec)
		return err
	})
	if err != nil {
		return err
	}
	if err := c.Start(d.ctx); err != nil {
		return err
	}
	sc := &scenarioContainer{Container: c, running: true, fresh: true, devices: devices}
	if sc.cg, err = c.Cgroup(d.ctx); err != nil {
		return err
	}
	WantDriverPath(d.t, c, d.env.CRI.CgroupDriver, sc.cg.Path)
	if sc.pid, err = c.PID(d.ctx); err != nil {
		return err
	}
	d.ctrs[key(pod, name)] = sc
	return nil
}

// UpdateContainer implements scenario.Driver.
func (d *criDriver) UpdateContainer(pod policy.Pod, name string, r policy.Resources) error {
	c, err := d.container(pod, name)
	if err != nil {
		return err
	}
	res, err := harnessResources(r)
	if err != nil {
		return err
	}
	if err := d.unchanged("resize "+c.String(), func() error { return c.Update(d.ctx, res) }); err != nil {
		return err
	}
	c.fresh = true
	return nil
}

// StopContainer implements scenario.Driver: the kubelet's StopContainer,
// the container's command exiting with exitCode.
func (d *criDriver) StopContainer(pod policy.Pod, name string, exitCode int32) error {
	c, err := d.container(pod, name)
	if err != nil {
		return err
	}
	timeout := stopTimeout
	switch exitCode {
	case 137:
		timeout = 0
	case 0:
	default:
		if _, err := c.Exec(d.ctx, "sh", "-c", fmt.Sprintf("echo %d > %s", exitCode, exitCodeFile)); err != nil {
			return err
		}
	}
	if err := c.Stop(d.ctx, timeout); err != nil {
		return err
	}
	c.running = false
	st, err := c.Status(d.ctx)
	if err != nil {
		return err
	}
	if st.GetExitCode() != exitCode {
		return fmt.Errorf("%s exited with %d, want %d", c, st.GetExitCode(), exitCode)
	}
	return nil
}

// RestartContainer implements scenario.Driver.
func (d *criDriver) RestartContainer(pod policy.Pod, name string, r policy.Resources) error {
	old, err := d.container(pod, name)
	if err != nil {
		return err
	}
	if old.running {
		// A crash, as the kubelet sees it when it kills a container whose
		// probe failed; an exited one is re-created as it is.
		if err := d.StopContainer(pod, name, 137); err != nil {
			return err
		}
	}
	if err := d.create(pod, name, r, old.devices); err != nil {
		return err
	}
	return old.Remove(d.ctx)
}

// RemoveContainer implements scenario.Driver.
func (d *criDriver) RemoveContainer(pod policy.Pod, name string) error {
	c, err := d.container(pod, name)
	if err != nil {
		return err
	}
	delete(d.ctrs, key(pod, name))
	return c.Remove(d.ctx)
}

// RemovePod implements scenario.Driver.
func (d *criDriver) RemovePod(pod policy.Pod) error {
	p := d.pods[pod.UID]
	if p == nil {
		return fmt.Errorf("no pod %s", pod.Name)
	}
	delete(d.pods, pod.UID)
	maps.DeleteFunc(d.ctrs, func(k string, _ *scenarioContainer) bool { return strings.HasPrefix(k, pod.UID+"/") })
	if err := p.Remove(d.ctx); err != nil {
		return err
	}
	if ap := d.inAPI[pod.UID]; ap != nil {
		delete(d.inAPI, pod.UID)
		if _, err := d.api.DeletePod(ap.Namespace, ap.Name); err != nil {
			return err
		}
	}
	return nil
}

// addToAPI adds the pod of the sandbox that runs next to the Kubernetes
// API, when the scenario declares its spec, and waits until the plugin's
// watch was sent it. The server cannot tell when the plugin's cache holds
// it: the plugin reads its watch within milliseconds, and waits for the
// pod at its RunPodSandbox (300 ms, the kubeapi's PodInfo) once its cache
// is synced, which the plugin's start made sure of (its watch was sent the
// pods before the scenario's first step; a sandbox takes longer to run).
func (d *criDriver) addToAPI(pod policy.Pod) error {
	idx := d.sandboxes
	d.sandboxes++
	if d.api == nil {
		return nil
	}
	if idx >= len(d.apiPods) {
		return fmt.Errorf("pod %s: sandbox %d of a scenario that runs %d", pod.Name, idx+1, len(d.apiPods))
	}
	ap := d.apiPods[idx]
	if ap == nil {
		return nil
	}
	if ap.Name != pod.Name || string(ap.UID) != pod.UID {
		return fmt.Errorf("sandbox %d is pod %s (%s), the spec the driver made for it pod %s (%s)", idx+1, pod.Name, pod.UID, ap.Name, ap.UID)
	}
	rv, err := d.api.AddPod(ap)
	if err != nil {
		return err
	}
	d.inAPI[pod.UID] = ap
	ctx, cancel := context.WithTimeout(d.ctx, Wait)
	defer cancel()
	if err := d.api.WaitDelivered(ctx, rv); err != nil {
		return fmt.Errorf("pod %s in the Kubernetes API: %w", pod.Name, err)
	}
	return nil
}

// UpdatePod implements scenario.Driver.
func (d *criDriver) UpdatePod(pod policy.Pod, r policy.PodResources) error {
	p := d.pods[pod.UID]
	if p == nil {
		return fmt.Errorf("no pod %s", pod.Name)
	}
	totals, err := harnessResources(r.Resources)
	if err != nil {
		return err
	}
	return d.unchanged("update pod "+pod.Name, func() error { return p.UpdateResources(d.ctx, totals) })
}

// ContainerCPUs implements scenario.Driver: the cpuset.cpus of the
// container's cgroup.
func (d *criDriver) ContainerCPUs(pod policy.Pod, name string) (cpuset.CPUSet, bool) {
	c := d.ctrs[key(pod, name)]
	if c == nil || !c.running {
		return cpuset.New(), false
	}
	cpus, err := c.cg.CPUs()
	if err != nil {
		d.t.Logf("%s: %v", c, err)
		return cpuset.New(), false
	}
	return cpus, true
}

// State implements scenario.Driver: the checkpoint on disk.
func (d *criDriver) State() *state.State { return d.m.Checkpoint(d.t) }

// NUMANodesOf implements scenario.Driver.
func (d *criDriver) NUMANodesOf(cpus cpuset.CPUSet) int { return d.topo.NUMANodesOf(cpus).Count() }

// settle runs check until it passes, for at most Wait.
func (d *criDriver) settle(check func() error) error {
	ctx, cancel := context.WithTimeout(d.ctx, Wait)
	defer cancel()
	var last error
	err := harness.Poll(ctx, func() (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (still after %v)", last, Wait)
	}
	return err
}

// verify checks every running container against the checkpoint (see
// PlayScenarios).
func (d *criDriver) verify() error {
	st := d.State()
	pool := st.DefaultCPUSet()
	exclusive := map[string]cpuset.CPUSet{}
	shared := cpuset.New()
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(d.ctrs)) {
		c := d.ctrs[k]
		if !c.running {
			continue
		}
		want := pool
		if a, ok := st.Assignment(c.Pod.Spec.UID, c.Name); ok {
			want = a.Assigned()
			exclusive[c.String()] = want
		}
		got, err := d.settled(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !got.Equals(want) {
			errs = append(errs, fmt.Errorf("%s runs on %s, the checkpoint gives it %s", c, got, want))
			continue
		}
		if _, ok := exclusive[c.String()]; !ok {
			shared = shared.Union(got)
		}
		if err := d.wantQuota(c); err != nil {
			errs = append(errs, err)
		}
	}
	names := slices.Sorted(maps.Keys(exclusive))
	for i, a := range names {
		if both := exclusive[a].Intersection(shared); !both.IsEmpty() {
			errs = append(errs, fmt.Errorf("CPUs %s are %s's and a shared container's", both, a))
		}
		for _, b := range names[i+1:] {
			if both := exclusive[a].Intersection(exclusive[b]); !both.IsEmpty() {
				errs = append(errs, fmt.Errorf("CPUs %s are %s's and %s's", both, a, b))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Last, as it costs an exec: a new process in the containers the step
	// created or resized.
	for _, k := range slices.Sorted(maps.Keys(d.ctrs)) {
		c := d.ctrs[k]
		if !c.running || !c.fresh {
			continue
		}
		got, _ := c.cg.CPUs()
		allowed, err := c.CPUsAllowed(d.ctx)
		if err != nil {
			return err
		}
		if !allowed.Equals(got) {
			return fmt.Errorf("%s: a new process in it may use CPUs %s, its cgroup %s", c, allowed, got)
		}
		c.fresh = false
	}
	return nil
}

// settled returns the CPUs c runs on when its cgroup's cpuset.cpus
// (written: on cgroup v2 an empty one would inherit its parent's),
// effective set and its command's Cpus_allowed_list agree.
func (d *criDriver) settled(c *scenarioContainer) (cpuset.CPUSet, error) {
	cpus, err := c.cg.CPUs()
	if err != nil {
		return cpus, err
	}
	if cpus.IsEmpty() {
		return cpus, fmt.Errorf("%s: nothing wrote the cpuset.cpus of its cgroup %s", c, c.cg.Path)
	}
	effective, err := c.cg.EffectiveCPUs()
	if err != nil {
		return cpus, err
	}
	command, err := harness.ProcessCPUsAllowed(c.pid)
	if err != nil {
		return cpus, err
	}
	if !cpus.Equals(effective) || !cpus.Equals(command) {
		return cpus, fmt.Errorf("%s: cgroup cpuset %s, effective %s, its command's Cpus_allowed_list %s", c, cpus, effective, command)
	}
	return cpus, nil
}

// wantQuota checks c's CPU quota: its limit as the kubelet sets it, -1
// (none) without one.
func (d *criDriver) wantQuota(c *scenarioContainer) error {
	want := int64(-1)
	if c.Resources.CPULimitMilli > 0 {
		want = harness.MilliCPUToQuota(c.Resources.CPULimitMilli, 100000)
	}
	quota, err := c.cg.CPUQuota()
	if err != nil {
		return err
	}
	if quota != want {
		return fmt.Errorf("%s: CPU quota %d, want %d (%s)", c, quota, want, c.Resources)
	}
	return nil
}

// unchanged runs a call the plugin may refuse; a refused one must change
// neither the checkpoint nor any container's cgroup cpuset.
func (d *criDriver) unchanged(what string, call func() error) error {
	before, err := d.snapshot()
	if err != nil {
		return err
	}
	callErr := call()
	if callErr == nil {
		return nil
	}
	after, err := d.snapshot()
	if err != nil {
		return errors.Join(callErr, err)
	}
	if diff := before.diff(after); diff != "" {
		d.t.Errorf("%s was refused (%v) and yet changed %s", what, callErr, diff)
	}
	return callErr
}

// snapshot is what a refused call must leave as it was.
type snapshot struct {
	checkpoint []byte
	cpus       map[string]cpuset.CPUSet
}

func (d *criDriver) snapshot() (snapshot, error) {
	s := snapshot{cpus: map[string]cpuset.CPUSet{}}
	var err error
	s.checkpoint, err = os.ReadFile(filepath.Join(d.m.StateDir, state.CheckpointFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	for k, c := range d.ctrs {
		if !c.running {
			continue
		}
		if s.cpus[k], err = c.cg.CPUs(); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (s snapshot) diff(after snapshot) string {
	var diffs []string
	if !bytes.Equal(s.checkpoint, after.checkpoint) {
		diffs = append(diffs, fmt.Sprintf("the checkpoint (%s → %s)", s.checkpoint, after.checkpoint))
	}
	for _, k := range slices.Sorted(maps.Keys(s.cpus)) {
		if !s.cpus[k].Equals(after.cpus[k]) {
			diffs = append(diffs, fmt.Sprintf("the cpuset of %s (%s → %s)", k, s.cpus[k], after.cpus[k]))
		}
	}
	return strings.Join(diffs, ", ")
}
