package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	nrtfake "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nri-cpumanager/nri-cpumanager/kubeapi/kubeapitest"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

const testNode = "node-a"

// guaranteed returns a pod on testNode whose containers ask for the given
// whole CPUs each (request = limit, 1 GiB).
func guaranteed(name string, cpus map[string]int64) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			Annotations:   map[string]string{"big": "annotation"}},
		Spec:   corev1.PodSpec{NodeName: testNode},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSGuaranteed, StartTime: &metav1.Time{}},
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if c, ok := cpus[n]; ok {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "img", Resources: whole(c)})
		}
	}
	return pod
}

func whole(cpus int64) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("1Gi")}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// started runs an API on a fake clientset holding objs until the test
// ends, and waits for its pod watch to sync.
func started(t *testing.T, client *fake.Clientset, opts Options) (*API, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Clients = fakeClients(client, nil)
	opts.Registerer = reg
	if opts.NodeName == "" {
		opts.NodeName = testNode
	}
	if opts.Log == nil {
		opts.Log = logrus.New()
		opts.Log.SetOutput(io.Discard)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx, func() policy.TopologyView { return policy.TopologyView{Policy: "none", Scope: "container"} }); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the pod watch to sync", a.pods.informer.HasSynced)
	return a, reg
}

// waitFor polls cond until it holds; the deadline only bounds a broken
// test, it asserts nothing about time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPodSpecWaitsForTheResize: the runtime's totals may reach the plugin
// before the watch shows the resize; PodSpec waits for the spec whose
// limits add up to them, and answers with every container's desired
// resources in the runtime's terms.
func TestPodSpecWaitsForTheResize(t *testing.T) {
	pod := guaranteed("p", map[string]int64{"a": 2, "b": 1})
	client := fake.NewClientset(pod)
	a, reg := started(t, client, Options{})

	if spec, ok := a.PodSpec("uid-p", 3000, time.Hour); !ok || spec["a"].CPUQuota != 200000 || spec["b"].CPUShares != 1024 {
		t.Fatalf("PodSpec of the pod as it is = %v, %t", spec, ok)
	}
	got := make(chan policy.PodSpec, 1)
	go func() {
		spec, ok := a.PodSpec("uid-p", 5000, time.Hour) // the resize: a 2 → 3, b 1 → 2
		if !ok {
			spec = nil
		}
		got <- spec
	}()
	// The API server gets the resize (before or after PodSpec starts
	// waiting: either way the answer is the new spec).
	resized := guaranteed("p", map[string]int64{"a": 3, "b": 2})
	if _, err := client.CoreV1().Pods("ns").Update(context.Background(), resized, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := <-got
	want := policy.PodSpec{
		"a": {CPUShares: 3072, CPUQuota: 300000, CPUPeriod: 100000, MemoryLimit: 1 << 30},
		"b": {CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 1 << 30},
	}
	if len(spec) != len(want) || spec["a"] != want["a"] || spec["b"] != want["b"] {
		t.Errorf("PodSpec after the resize = %v, want %v", spec, want)
	}
	// A total the spec never reaches: false once the wait is over.
	if spec, ok := a.PodSpec("uid-p", 7000, time.Millisecond); ok {
		t.Errorf("PodSpec for a total the spec does not have = %v, true", spec)
	}
	if spec, ok := a.PodSpec("uid-unknown", 3000, time.Millisecond); ok {
		t.Errorf("PodSpec of an unknown pod = %v, true", spec)
	}
	if n := testutil.ToFloat64(a.metrics.podSpecs.WithLabelValues(specTimeout)); n != 2 {
		t.Errorf("timeouts counted: %v, want 2", n)
	}
	if n := testutil.ToFloat64(a.metrics.podSpecs.WithLabelValues(specMatched)); n != 2 {
		t.Errorf("matches counted: %v, want 2", n)
	}
	_ = reg
}

// TestPodWatchIsThisNodesTrimmedPods: one list and watch, selected by
// spec.nodeName, and a cache that keeps only what admission reads.
func TestPodWatchIsThisNodesTrimmedPods(t *testing.T) {
	client := fake.NewClientset(guaranteed("p", map[string]int64{"a": 1}))
	a, _ := started(t, client, Options{})
	var lists, watches int
	for _, act := range client.Actions() {
		if act.GetResource().Resource != "pods" {
			continue
		}
		var sel string
		switch act := act.(type) {
		case k8stesting.ListAction:
			lists++
			sel = act.GetListRestrictions().Fields.String()
		case k8stesting.WatchAction:
			watches++
			sel = act.GetWatchRestrictions().Fields.String()
		default:
			t.Errorf("unexpected request %s %s", act.GetVerb(), act.GetResource())
			continue
		}
		if sel != "spec.nodeName="+testNode {
			t.Errorf("%s of pods selected by %q, want spec.nodeName=%s", act.GetVerb(), sel, testNode)
		}
	}
	if lists != 1 || watches != 1 {
		t.Errorf("%d lists and %d watches of pods, want one of each", lists, watches)
	}
	objs := a.pods.informer.GetStore().List()
	if len(objs) != 1 {
		t.Fatalf("cache holds %d objects", len(objs))
	}
	pod := objs[0].(*corev1.Pod)
	if pod.ManagedFields != nil || pod.Annotations != nil || pod.Status.StartTime != nil || pod.Status.Conditions != nil || pod.Spec.Containers[0].Image != "" {
		t.Errorf("cached pod keeps more than the plugin reads: %+v", pod)
	}
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("cached pod lost its phase: %+v", pod.Status)
	}
	if pod.UID != "uid-p" || pod.Spec.Containers[0].Resources.Limits.Cpu().Value() != 1 {
		t.Errorf("cached pod lost what admission reads: %+v", pod)
	}
}

// TestPodSpecWithoutTheWatch: a watch that the API server refuses
// (forbidden) answers at once, says once what the plugin loses, and
// counts each failure.
func TestPodSpecWithoutTheWatch(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
	})
	log, hook := test.NewNullLogger()
	reg := prometheus.NewRegistry()
	a, err := New(Options{Clients: fakeClients(client, nil), NodeName: testNode, Log: log, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "two failed lists", func() bool { return testutil.ToFloat64(a.metrics.failures.WithLabelValues(string(FeaturePods))) >= 2 })
	if spec, ok := a.PodSpec("uid-p", 1000, time.Hour); ok { // would hang the test if it waited
		t.Errorf("PodSpec without the watch = %v, true", spec)
	}
	if v := testutil.ToFloat64(a.metrics.available.WithLabelValues(string(FeaturePods))); v != 0 {
		t.Errorf("kubernetes_api_available{feature=pods} = %v, want 0", v)
	}
	if v := testutil.ToFloat64(a.metrics.available.WithLabelValues(string(FeatureEvents))); v != 1 {
		t.Errorf("kubernetes_api_available{feature=events} = %v, want 1 (nothing failed)", v)
	}
	var warnings int
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warnings++
			if e.Data["feature"] != FeaturePods {
				t.Errorf("warning about %v", e.Data["feature"])
			}
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings about the failing watch, want 1", warnings)
	}
}

func TestPodCPULimitMilli(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	for _, tt := range []struct {
		name string
		edit func(*corev1.Pod)
		want int64
	}{
		{"containers", func(*corev1.Pod) {}, 3000},
		// The kubelet's numbers: cm.ResourceConfigForPod's quota of the
		// limits with the overhead, less the overhead's quota
		// (subtractOverheadFromResourceConfig), each milli·100000/1000
		// and at least 1000 µs, read back rounded up.
		{"overhead, which the kubelet sends apart", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
		}, 3000}, // 325000 − 25000 µs
		{"an overhead below the smallest quota", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m")}
		}, 2995}, // 300500 − 1000 µs
		{"an overhead of a fraction of a milli-CPU", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100.5m")}
		}, 3000}, // MilliValue rounds 100.5m up: 310100 − 10100 µs
		{"a memory overhead only", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		}, 3000},
		{"pod-level limit and an overhead", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8m")}
		}, 5998}, // 600800 − 1000 µs
		{"sidecar", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: whole(1)}}
		}, 4000},
		{"init container needs less than the containers", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: whole(2)}}
		}, 3000},
		{"init container needs more", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: whole(5)}}
		}, 5000},
		{"pod-level limit", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}
		}, 6000},
		{"a container without a limit", func(p *corev1.Pod) { p.Spec.Containers[1].Resources = corev1.ResourceRequirements{} }, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := guaranteed("p", map[string]int64{"a": 2, "b": 1})
			tt.edit(p)
			if got := PodCPULimitMilli(p); got != tt.want {
				t.Errorf("PodCPULimitMilli = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestRuntimeResources: the kubelet's conversion (MilliCPUToShares,
// MilliCPUToQuota), the sidecars named, init containers left out.
func TestRuntimeResources(t *testing.T) {
	q := resource.MustParse
	for _, tt := range []struct {
		name string
		r    corev1.ResourceRequirements
		want policy.Resources
	}{
		{"guaranteed", whole(4), policy.Resources{CPUShares: 4096, CPUQuota: 400000, CPUPeriod: 100000, MemoryLimit: 1 << 30}},
		{"fraction", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("500m")}},
			policy.Resources{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000}},
		{"tiny", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("1m")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("1m")}},
			policy.Resources{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000}},
		{"limit only", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("2")}},
			policy.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000}},
		{"nothing", corev1.ResourceRequirements{}, policy.Resources{CPUShares: 2}},
	} {
		if got := RuntimeResources(tt.r); got != tt.want {
			t.Errorf("%s: RuntimeResources = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	always := corev1.ContainerRestartPolicyAlways
	p := guaranteed("p", map[string]int64{"a": 2})
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: whole(8)}, {Name: "side", RestartPolicy: &always, Resources: whole(1)}}
	spec := SpecOf(p)
	if len(spec) != 3 || spec["init"].CPUQuota != 800000 || spec["side"].CPUQuota != 100000 || spec["a"].CPUQuota != 200000 {
		t.Errorf("SpecOf = %v, want a, init and side", spec)
	}
}

func discard() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

func newReg() *prometheus.Registry { return prometheus.NewRegistry() }

// fakeClients are the API's clients on fake clientsets; topo nil turns the
// export off.
func fakeClients(client *fake.Clientset, topo *nrtfake.Clientset) Clients {
	c := Clients{Pods: kubeapitest.Pods(client, testNode), Events: kubeapitest.Events{Client: client}, Node: kubeapitest.Node{Client: client}}
	if topo != nil {
		c.Topology = fakeTopology{topo.TopologyV1alpha2().NodeResourceTopologies()}
	}
	return c
}

// TestRoutineWatchEnds: a watch that expires or whose connection closes
// is no outage; a refused connection or a denial is.
func TestRoutineWatchEnds(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewResourceExpired("too old resource version"), true},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonGone, Code: 410}}, true},
		{fmt.Errorf("decoding: %w", io.ErrUnexpectedEOF), true},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil), false},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
	} {
		if got := routineWatchEnd(tt.err); got != tt.want {
			t.Errorf("routineWatchEnd(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestInfoOf: the roles of a pod's containers and its exclusive CPU need
// as the kubelet's static policy computes it (podGuaranteedCPUs).
func TestInfoOf(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	half := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	for _, tt := range []struct {
		name  string
		edit  func(*corev1.Pod)
		want  int
		roles map[string]policy.Role
	}{
		{"app containers", func(*corev1.Pod) {}, 3, map[string]policy.Role{"a": policy.RoleApp, "b": policy.RoleApp}},
		{"an init container needing less reuses", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: whole(2)}}
		}, 3, map[string]policy.Role{"i": policy.RoleInit, "a": policy.RoleApp, "b": policy.RoleApp}},
		{"an init container needing more", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: whole(5)}}
		}, 5, nil},
		{"a sidecar adds up, and to the init containers after it", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: whole(1)}, {Name: "i", Resources: whole(3)}}
		}, 4, map[string]policy.Role{"s": policy.RoleSidecar, "i": policy.RoleInit, "a": policy.RoleApp, "b": policy.RoleApp}},
		{"fractional containers count nothing", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: half}}
			p.Spec.Containers[1].Resources = half
		}, 2, nil},
		{"a pod that is not Guaranteed", func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSBurstable }, 0, nil},
		{"pod-level resources", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}
		}, 0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := guaranteed("p", map[string]int64{"a": 2, "b": 1})
			tt.edit(p)
			info := InfoOf(p)
			if info.GuaranteedCPUs != tt.want {
				t.Errorf("GuaranteedCPUs = %d, want %d", info.GuaranteedCPUs, tt.want)
			}
			if tt.roles != nil && !maps.Equal(info.Roles, tt.roles) {
				t.Errorf("roles %v, want %v", info.Roles, tt.roles)
			}
		})
	}
}

// TestInfoOfContainersInAdmissionOrder: the containers the plugin admits a
// pod from come in the kubelet's order, init containers and sidecars
// first, each with the exclusive CPUs the static policy gives it.
func TestInfoOfContainersInAdmissionOrder(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	p := guaranteed("p", map[string]int64{"a": 2, "b": 1})
	p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: whole(3)}, {Name: "s", RestartPolicy: &always, Resources: whole(1)}}
	got := InfoOf(p).Containers
	want := []policy.SpecContainer{{Name: "i", Role: policy.RoleInit, CPUs: 3}, {Name: "s", Role: policy.RoleSidecar, CPUs: 1},
		{Name: "a", Role: policy.RoleApp, CPUs: 2}, {Name: "b", Role: policy.RoleApp, CPUs: 1}}
	if !slices.Equal(got, want) {
		t.Errorf("containers %+v, want %+v", got, want)
	}
	p.Status.QOSClass = corev1.PodQOSBurstable
	for _, c := range InfoOf(p).Containers {
		if c.CPUs != 0 {
			t.Errorf("a Burstable pod's %s needs %d exclusive CPUs, want 0", c.Name, c.CPUs)
		}
	}
}

// TestPodInfoOfStaticPodsAndLatePods: a static pod's sandbox runs under
// its own UID, which its mirror pod in the API carries in its
// kubernetes.io/config.mirror annotation: PodInfo and PodActive find the
// mirror by it. PodInfo waits, bounded, for a pod the watch has not seen
// yet.
func TestPodInfoOfStaticPodsAndLatePods(t *testing.T) {
	mirror := guaranteed("etcd", map[string]int64{"a": 2})
	mirror.Annotations = map[string]string{mirrorAnnotation: "static-uid"}
	client := fake.NewClientset(mirror)
	a, _ := started(t, client, Options{})
	if info, ok := a.PodInfo("static-uid", 0); !ok || info.GuaranteedCPUs != 2 {
		t.Errorf("PodInfo of the static pod's UID = %+v, %v; want its mirror's spec", info, ok)
	}
	if !a.PodActive("static-uid") {
		t.Errorf("the static pod is not active")
	}
	if a.PodActive("unknown-uid") {
		t.Errorf("a pod the synced watch does not list is active")
	}
	late := guaranteed("late", map[string]int64{"a": 1})
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = client.CoreV1().Pods("ns").Create(context.Background(), late, metav1.CreateOptions{})
	}()
	if info, ok := a.PodInfo("uid-late", 30*time.Second); !ok || info.GuaranteedCPUs != 1 {
		t.Errorf("PodInfo of a pod created while it waited = %+v, %v", info, ok)
	}
}

// TestPodsEndedAreToldOnce: the plugin is told of a pod the watch sees
// terminal once, however often it changes after, and of a pod deleted;
// a running pod is never told, and PodInfo reads the cache.
func TestPodsEndedAreToldOnce(t *testing.T) {
	running, done := guaranteed("run", map[string]int64{"a": 1}), guaranteed("done", map[string]int64{"a": 1})
	client := fake.NewClientset(running, done)
	var mu sync.Mutex
	told := map[string]int{}
	a, err := New(Options{NodeName: testNode, Clients: Clients{Pods: kubeapitest.Pods(client, testNode), Events: kubeapitest.Events{Client: client}}, Log: logrus.New()})
	if err != nil {
		t.Fatal(err)
	}
	a.OnPodEnded(func(uid string) {
		mu.Lock()
		told[uid]++
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = a.Run(ctx, nil) }()
	count := func(uid string) int {
		mu.Lock()
		defer mu.Unlock()
		return told[uid]
	}
	waitFor(t, "the watch to sync", func() bool { _, ok := a.PodInfo("uid-run", 0); return ok })
	if info, _ := a.PodInfo("uid-run", 0); info.GuaranteedCPUs != 1 || info.Roles["a"] != policy.RoleApp {
		t.Errorf("PodInfo = %+v", info)
	}
	pods := client.CoreV1().Pods("ns")
	for i, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodSucceeded} {
		done.Status.Phase = phase
		done.ResourceVersion = fmt.Sprint(10 + i)
		if _, err := pods.UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the completed pod to be told", func() bool { return count("uid-done") == 1 })
	if err := pods.Delete(ctx, "done", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted pod to be told", func() bool { return count("uid-done") == 2 })
	if n := count("uid-run"); n != 0 {
		t.Errorf("a running pod was told ended %d times", n)
	}
}
