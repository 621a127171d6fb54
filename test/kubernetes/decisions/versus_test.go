package decisions

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	kstate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/test/kubernetes/placement"
)

// machines are the policy's scale benchmark machines (policy/
// scale_bench_test.go), siblings offset by the core count.
var machines = []placement.MachineSpec{
	{Name: "64", Spec: fakesysfs.Spec{Sockets: 2, CoresPerNUMA: 16, ThreadsPerCore: 2, L3PerNUMA: 2, Numbering: fakesysfs.SiblingsOffset}},
	{Name: "512", Spec: fakesysfs.Spec{Sockets: 2, NUMAPerSocket: 4, CoresPerNUMA: 32, ThreadsPerCore: 2, L3PerNUMA: 4, Numbering: fakesysfs.SiblingsOffset}},
	{Name: "4096", Spec: fakesysfs.Spec{Sockets: 4, NUMAPerSocket: 4, CoresPerNUMA: 128, ThreadsPerCore: 2, L3PerNUMA: 8, Numbering: fakesysfs.SiblingsOffset}},
}

// loads are the numbers of containers on the node.
var loads = []int{10, 100, 500}

const (
	// repetitions of the alternation of the two sides' blocks.
	repetitions = 7
	// blockBudget is about how long one side's block of calls takes.
	blockBudget = 40 * time.Millisecond
	// minCalls and maxCalls bound the calls of a block.
	minCalls, maxCalls = 5, 2000
)

// TestVersusKubelet prints, per machine, containers on the node and
// decision, the kubelet's median time over the plugin's (the same
// repetition), and the plugin's median and 99th percentile. It asserts
// nothing: run with VERSUS_KUBELET=1 (make bench-kubelet).
func TestVersusKubelet(t *testing.T) {
	if os.Getenv("VERSUS_KUBELET") == "" {
		t.Skip("a timing report: VERSUS_KUBELET=1 runs it (make bench-kubelet)")
	}
	only := os.Getenv("VERSUS_KUBELET_CPUS")
	var rows []string
	for _, ms := range machines {
		if only != "" && only != ms.Name {
			continue
		}
		m, err := placement.NewMachine(ms)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range loads {
			k, err := newKubeletNode(m, n)
			if err != nil {
				t.Fatal(err)
			}
			o, err := newPluginNode(m, n)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range []string{"create", "grow", "shrink", "release"} {
				kube, ours := k.op(t, op), o.op(t, op)
				r := alternate(kube, ours)
				rows = append(rows, fmt.Sprintf("| %s | %d | %s | %s | %s / %s | %.1f× |",
					ms.Name, n, op, us(r.kubeP50), us(r.oursP50), us(r.oursP99), r.ratio))
			}
		}
	}
	t.Logf("load average at the end: %s", loadAverage())
	t.Log("\n| CPUs | containers | decision | kubelet p50 | plugin p50 / p99 | kubelet ÷ plugin (median of " + strconv.Itoa(repetitions) + ") |\n|---|---|---|---|---|---|\n" +
		strings.Join(rows, "\n"))
}

// result is what alternate measured.
type result struct {
	ratio                     float64
	kubeP50, oursP50, oursP99 time.Duration
}

// alternate runs blocks of the two sides in turn and returns the median of
// the repetitions' ratios of medians, the kubelet's median and the plugin's
// median and 99th percentile over all its calls.
func alternate(kube, ours func() time.Duration) result {
	kn, on := calls(kube), calls(ours)
	var ratios []float64
	var kAll, oAll []time.Duration
	for range repetitions {
		kb, ob := block(kube, kn), block(ours, on)
		ratios = append(ratios, float64(median(kb))/float64(max(median(ob), 1)))
		kAll, oAll = append(kAll, kb...), append(oAll, ob...)
	}
	slices.Sort(ratios)
	return result{ratio: ratios[len(ratios)/2], kubeP50: median(kAll), oursP50: median(oAll), oursP99: percentile(oAll, 0.99)}
}

// calls sizes a block to about blockBudget.
func calls(f func() time.Duration) int {
	var spent time.Duration
	n := 0
	for spent < blockBudget/4 && n < maxCalls {
		spent += f()
		n++
	}
	per := spent / time.Duration(n)
	return min(maxCalls, max(minCalls, int(blockBudget/max(per, 1))))
}

func block(f func() time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

func median(d []time.Duration) time.Duration { return percentile(d, 0.5) }

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3) }

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// pinnedOf is how many pinned containers of 2 CPUs a node of cpus CPUs
// with n containers holds (newScaleNode's rule).
func pinnedOf(cpus, n int) int { return min(n/2, cpus/16) }

// kubeletNode is the kubelet's static policy on a memory state holding
// the node's pinned containers (CPU 0 reserved, as the plugin's).
type kubeletNode struct {
	policy cpumanager.Policy
	state  kstate.State
	pods   []*v1.Pod
	next   *v1.Pod
}

func newKubeletNode(m *placement.Machine, n int) (*kubeletNode, error) {
	p, err := cpumanager.NewStaticPolicy(logr.Discard(), m.Kubelet, 1, cpuset.New(0), noAffinity{}, nil)
	if err != nil {
		return nil, err
	}
	s := kstate.NewMemoryState(logr.Discard())
	if err := p.Start(logr.Discard(), s); err != nil {
		return nil, err
	}
	k := &kubeletNode{policy: p, state: s}
	for i := range pinnedOf(m.Ours.CPUs().Size(), n) {
		pod := guaranteedPod("p"+strconv.Itoa(i), 2)
		if err := p.Allocate(logr.Discard(), s, pod, &pod.Spec.Containers[0]); err != nil {
			return nil, err
		}
		k.pods = append(k.pods, pod)
	}
	k.next = guaranteedPod("new", 2)
	return k, nil
}

// op returns one timed call of the decision; the state is put back after
// it, outside the timing.
func (k *kubeletNode) op(t *testing.T, op string) func() time.Duration {
	log := logr.Discard()
	snapshot := func() func() {
		a, d := k.state.GetCPUAssignments(), k.state.GetDefaultCPUSet()
		return func() { k.state.SetCPUAssignments(a); k.state.SetDefaultCPUSet(d) }
	}
	check := func(err error) {
		if err != nil {
			t.Fatalf("kubelet %s: %v", op, err)
		}
	}
	target := k.pods[0]
	recreate := func(cpus int) func() time.Duration {
		pod := guaranteedPod(strings.TrimSuffix(string(target.UID), "-uid"), cpus)
		return func() time.Duration {
			start := time.Now()
			check(k.policy.RemoveContainer(log, k.state, string(pod.UID), "app"))
			check(k.policy.Allocate(log, k.state, pod, &pod.Spec.Containers[0]))
			return time.Since(start)
		}
	}
	restore := snapshot()
	switch op {
	case "create":
		return func() time.Duration {
			start := time.Now()
			check(k.policy.Allocate(log, k.state, k.next, &k.next.Spec.Containers[0]))
			d := time.Since(start)
			restore()
			return d
		}
	case "grow":
		grow := recreate(4)
		return func() time.Duration { d := grow(); restore(); return d }
	case "shrink":
		recreate(4)()
		grown := snapshot()
		restore()
		shrink := recreate(2)
		return func() time.Duration { grown(); d := shrink(); restore(); return d }
	case "release":
		return func() time.Duration {
			start := time.Now()
			check(k.policy.RemoveContainer(log, k.state, string(target.UID), "app"))
			d := time.Since(start)
			restore()
			return d
		}
	}
	t.Fatalf("unknown decision %s", op)
	return nil
}

// guaranteedPod is a Guaranteed pod of one container "app" of cpus CPUs.
func guaranteedPod(name string, cpus int) *v1.Pod {
	res := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse("1Gi"),
	}
	p := &v1.Pod{}
	p.Namespace, p.Name, p.UID = "default", name, types.UID(name+"-uid")
	p.Spec.Containers = []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}
	return p
}

// noAffinity is a topology manager that hints nothing (policy none).
type noAffinity struct{}

func (noAffinity) GetAffinity(string, string) topologymanager.TopologyHint {
	return topologymanager.TopologyHint{}
}
func (noAffinity) GetPolicy() topologymanager.Policy { return topologymanager.NewNonePolicy() }
func (noAffinity) Name() string                      { return "none" }

// pluginNode is the plugin's policy on a model holding the node's
// containers, built as the policy's scale benchmark builds it.
type pluginNode struct {
	pol    *policy.Policy
	m      *policy.Model
	resize policy.Container
	ended  policy.Pod
	next   policy.Container
}

func newPluginNode(mach *placement.Machine, n int) (*pluginNode, error) {
	cfg, err := config.Parse([]byte("reservedSystemCPUs: \"0\""))
	if err != nil {
		return nil, err
	}
	pol, err := assemble.Policy(cfg, mach.Ours)
	if err != nil {
		return nil, err
	}
	m := policy.NewModel(pol.NewState())
	pinned := pinnedOf(mach.Ours.CPUs().Size(), n)
	node := &pluginNode{pol: pol}
	for i := range n {
		qos, r := "burstable", scenario.KubeletResources("burstable", 200, 0, 0)
		if i < pinned {
			qos, r = "guaranteed", scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)
		}
		pod, err := scenario.KubeletPod("p"+strconv.Itoa(i), qos)
		if err != nil {
			return nil, err
		}
		pod.SandboxID = "sandbox-" + pod.UID
		m = pol.RunPodSandbox(m, pod).Model
		c := policy.Container{ID: "ctr-" + strconv.Itoa(i), Name: "app", Pod: pod, Resources: r}
		d, err := pol.CreateContainer(m, c)
		if err != nil {
			return nil, err
		}
		m = d.Model
		if i == 0 {
			c.CPUs = m.CPUsOf(c.ID)
			node.resize, node.ended = c, pod
		}
	}
	node.m = m
	pod, err := scenario.KubeletPod("new", "guaranteed")
	if err != nil {
		return nil, err
	}
	pod.SandboxID = "sandbox-new"
	node.next = policy.Container{ID: "new-app", Name: "app", Pod: pod, Resources: scenario.KubeletResources("guaranteed", 2000, 2000, 1<<30)}
	return node, nil
}

// op returns one timed call of the decision.
func (o *pluginNode) op(t *testing.T, op string) func() time.Duration {
	check := func(err error) {
		if err != nil {
			t.Fatalf("plugin %s: %v", op, err)
		}
	}
	grow := scenario.KubeletResources("guaranteed", 4000, 4000, 1<<30)
	switch op {
	case "create":
		return func() time.Duration {
			start := time.Now()
			_, err := o.pol.CreateContainer(o.m, o.next)
			d := time.Since(start)
			check(err)
			return d
		}
	case "grow":
		return func() time.Duration {
			start := time.Now()
			_, err := o.pol.UpdateContainer(o.m, o.resize, grow)
			d := time.Since(start)
			check(err)
			return d
		}
	case "shrink":
		grown, err := o.pol.UpdateContainer(o.m, o.resize, grow)
		check(err)
		bigger := o.resize
		bigger.Resources = grow
		return func() time.Duration {
			start := time.Now()
			_, err := o.pol.UpdateContainer(grown.Model, bigger, o.resize.Resources)
			d := time.Since(start)
			check(err)
			return d
		}
	case "release":
		return func() time.Duration {
			start := time.Now()
			_ = o.pol.RemovePodSandbox(o.m, o.ended)
			return time.Since(start)
		}
	}
	t.Fatalf("unknown decision %s", op)
	return nil
}
