package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
	"github.com/nri-cpumanager/nri-cpumanager/kubeapi/kubeapitest"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

const apiNode = "integration-node"

// apiPod is a Guaranteed pod of the API server with whole CPUs per
// container, in the order given.
func apiPod(p policy.Pod, cpus ...int64) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: types.UID(p.UID)},
		Spec:       corev1.PodSpec{NodeName: apiNode},
	}
	for i, c := range cpus {
		l := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(c, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("1Gi")}
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i+1),
			Resources: corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}})
	}
	return pod
}

// apiCluster is the API server as the plugin sees it through kubeapi, fed
// by a fake clientset the test writes pods into, as the kubelet's resize
// writes them before it calls the runtime.
type apiCluster struct {
	client *fake.Clientset
	api    *kubeapi.API
}

func startAPI(t *testing.T) *apiCluster {
	t.Helper()
	c := &apiCluster{client: fake.NewClientset()}
	clients := kubeapi.Clients{Pods: kubeapitest.Pods(c.client, apiNode), Events: kubeapitest.Events{Client: c.client}}
	a, err := kubeapi.New(kubeapi.Options{NodeName: apiNode, Clients: clients, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c.api = a
	return c
}

// run runs the API with the plugin's topology until the test ends.
func (c *apiCluster) run(t *testing.T, p *plugin.Plugin) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.api.Run(ctx, p.Topology); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// resize writes the pod's new spec to the API server and waits until the
// plugin's watch shows it.
func (c *apiCluster) resize(t *testing.T, pod *corev1.Pod, total int64) {
	t.Helper()
	pods := c.client.CoreV1().Pods(pod.Namespace)
	if _, err := pods.Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil { // not there yet
		if _, err := pods.Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the watch to show the spec", func() bool {
		_, ok := c.api.PodSpec(string(pod.UID), total*1000, 0)
		return ok
	})
}

// kubeletResize plays a pod resize in the kubelet's order
// (doPodResizeAction): a net increase calls UpdatePodSandboxResources
// first and stops when it fails; then the containers' decreases, then
// their increases, stopping at the first failure; a net decrease ends with
// UpdatePodSandboxResources; an unchanged total sends none.
func kubeletResize(rt *fakeruntime.Runtime, sb *api.PodSandbox, ctrs []*api.Container, from, to []int64) error {
	var before, after int64
	for i := range from {
		before, after = before+from[i], after+to[i]
	}
	total := policy.PodResources{Resources: guaranteed(after)}
	if after > before {
		if err := rt.UpdatePod(sb, total); err != nil {
			return fmt.Errorf("UpdatePodSandboxResources: %w", err)
		}
	}
	for _, decrease := range []bool{true, false} {
		for i, c := range ctrs {
			if (decrease && to[i] < from[i]) || (!decrease && to[i] > from[i]) {
				if err := rt.UpdateContainer(c, guaranteed(to[i])); err != nil {
					return fmt.Errorf("UpdateContainerResources %s: %w", c.Name, err)
				}
			}
		}
	}
	if after < before {
		if err := rt.UpdatePod(sb, total); err != nil {
			return fmt.Errorf("UpdatePodSandboxResources: %w", err)
		}
	}
	return nil
}

// node16 is KEP-5554's e2e machine: two NUMA nodes of 4 cores × 2
// threads (CPUs 0-7, 8-15), CPU 0 reserved.
func node16(t *testing.T, extra string) *node {
	return newNode(t, fakesysfs.Spec{Sockets: 1, NUMAPerSocket: 2, CoresPerNUMA: 4, ThreadsPerCore: 2},
		"reservedSystemCPUs: \"0\"\ntopologyManagerPolicy: single-numa-node\n"+extra)
}

// TestKEPMultiContainerRowsWithTheAPI plays KEP-5554's multi-container
// e2e row 3 (increase one container, then ask the other for more than
// the NUMA node holds while restoring the first) in the kubelet's order,
// with the plugin watching the pod in the API server: the pod-level call
// that starts the resize is refused as a whole, from the spec, naming the
// container that cannot have its CPUs, and nothing changes — no cpuset,
// not the checkpoint — so the kubelet changes no container either.
func TestKEPMultiContainerRowsWithTheAPI(t *testing.T) {
	n := node16(t, "")
	cluster := startAPI(t)
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPluginWith(t, rt, n.pol, t.TempDir(), func(o *plugin.Options) { o.API = cluster.api })
	cluster.run(t, rp.Plugin)

	p := policyPod(t, "gu-pod", "guaranteed")
	p.Resources = guaranteed(4)
	pod := apiPod(p, 2, 2)
	cluster.resize(t, pod, 4)
	sb, err := rt.RunPod(p)
	if err != nil {
		t.Fatal(err)
	}
	ctrs := []*api.Container{mustCreate(t, rt, sb, "c1", guaranteed(2)), mustCreate(t, rt, sb, "c2", guaranteed(2))}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, ctrs[0], "2-3")
	wantCPUs(t, rt, ctrs[1], "4-5")

	// Row 3, first: increase c1 within capacity.
	cluster.resize(t, apiPod(p, 4, 2), 6)
	if err := kubeletResize(rt, sb, ctrs, []int64{2, 2}, []int64{4, 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	wantCPUs(t, rt, ctrs[0], "2-3,6-7")

	// Then: restore c1 and grow c2 to 8, more than NUMA node 0 holds.
	online := n.topo.CPUs()
	before, saved := rt.Applied(), durableState(rp.stateDir, online)
	cluster.resize(t, apiPod(p, 2, 8), 10)
	err = kubeletResize(rt, sb, ctrs, []int64{4, 2}, []int64{2, 8})
	const want = "Infeasible: resizeAllocateCPUsError: pod default/gu-pod's resize is refused as a whole, its containers unchanged: container c2: "
	if err == nil || !strings.HasPrefix(err.Error(), "UpdatePodSandboxResources: ") || !strings.Contains(err.Error(), want) {
		t.Fatalf("row 3's resize: %v\nwant the text %q", err, want)
	}
	unchangedSince(t, rt, rp, online, before, saved)
}

// TestPodResizeAllOrNothingWithTheAPI: a resize whose pod total some
// division of CPUs among the containers could satisfy, but whose spec asks
// one container for a count full-pcpus-only refuses (5 CPUs on 2 threads
// per core), while another container shrinks. On the pod totals alone
// (NRI only) the kubelet's order applies the decrease and then stops at
// the refused increase, leaving the pod half-resized; with the API the
// first call is refused from the spec and nothing changes.
func TestPodResizeAllOrNothingWithTheAPI(t *testing.T) {
	for _, withAPI := range []bool{false, true} {
		t.Run(fmt.Sprintf("API %v", withAPI), func(t *testing.T) {
			n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8, ThreadsPerCore: 2},
				"reservedSystemCPUs: \"0-1\"\ncpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n")
			cluster := startAPI(t)
			rt := fakeruntime.New(t, n.topo.CPUs())
			rp := startPluginWith(t, rt, n.pol, t.TempDir(), func(o *plugin.Options) {
				if withAPI {
					o.API = cluster.api
				}
			})
			cluster.run(t, rp.Plugin)
			p := policyPod(t, "trio", "guaranteed")
			p.Resources = guaranteed(6)
			cluster.resize(t, apiPod(p, 2, 2, 2), 6)
			sb, err := rt.RunPod(p)
			if err != nil {
				t.Fatal(err)
			}
			ctrs := []*api.Container{mustCreate(t, rt, sb, "c1", guaranteed(2)), mustCreate(t, rt, sb, "c2", guaranteed(2)), mustCreate(t, rt, sb, "c3", guaranteed(2))}
			// c1 grows to 4 first, so that it may shrink back.
			cluster.resize(t, apiPod(p, 4, 2, 2), 8)
			if err := kubeletResize(rt, sb, ctrs, []int64{2, 2, 2}, []int64{4, 2, 2}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "settled", func() bool { return settled(rp, rt) })

			online := n.topo.CPUs()
			before, saved := rt.Applied(), durableState(rp.stateDir, online)
			cluster.resize(t, apiPod(p, 2, 5, 3), 10)
			err = kubeletResize(rt, sb, ctrs, []int64{4, 2, 2}, []int64{2, 5, 3})
			if err == nil || !strings.Contains(err.Error(), "SMTAlignmentError") {
				t.Fatalf("the resize: %v, want an SMT alignment refusal", err)
			}
			waitFor(t, "settled", func() bool { return settled(rp, rt) })
			if !withAPI {
				// What the API is for: c1's decrease went through.
				if !strings.HasPrefix(err.Error(), "UpdateContainerResources c2: ") {
					t.Errorf("without the API the refusal came at %v", err)
				}
				if got, _ := rt.CPUs(ctrs[0].Id); got.Size() != 2 {
					t.Errorf("without the API c1 runs on %s, want the decrease to 2 CPUs applied", got)
				}
				return
			}
			if !strings.HasPrefix(err.Error(), "UpdatePodSandboxResources: ") || !strings.Contains(err.Error(), "refused as a whole") {
				t.Errorf("with the API the refusal came at %v, want the pod-level call", err)
			}
			unchangedSince(t, rt, rp, online, before, saved)
		})
	}
}

// unchangedSince fails the test when a cpuset or the checkpoint changed.
func unchangedSince(t *testing.T, rt *fakeruntime.Runtime, rp *runningPlugin, online cpuset.CPUSet, before map[string]cpuset.CPUSet, saved *state.State) {
	t.Helper()
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	after := rt.Applied()
	for id, cpus := range before {
		if !after[id].Equals(cpus) {
			t.Errorf("the refused resize changed %s from %s to %s", id, cpus, after[id])
		}
	}
	if now := durableState(rp.stateDir, online); !now.Equal(saved) {
		t.Errorf("the refused resize changed the checkpoint:\nbefore %+v\nafter  %+v", saved, now)
	}
	noViolations(t, rt)
}
