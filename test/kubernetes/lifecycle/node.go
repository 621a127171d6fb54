package lifecycle

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/scenario"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// Node is the plugin over NRI on a runtime that plays containerd 2.4,
// with its checkpoint on disk and, when asked, a Kubernetes API that
// knows the pods' specs and phases.
type Node struct {
	t        testing.TB
	RT       *fakeruntime.Runtime
	pol      *policy.Policy
	stateDir string
	API      *API // nil: the plugin works on NRI alone

	plugin *plugin.Plugin
	store  *state.Store
	cancel context.CancelFunc
	done   chan struct{}
}

// NewNode starts the runtime and the plugin.
func NewNode(t testing.TB, pol *policy.Policy, withAPI bool) *Node {
	n := &Node{t: t, RT: fakeruntime.New(t, pol.Allocator().Topology().CPUs()), pol: pol, stateDir: stateDir(t)}
	if withAPI {
		n.API = &API{pods: map[string]*v1.Pod{}}
	}
	n.StartPlugin()
	t.Cleanup(n.StopPlugin)
	return n
}

// StartPlugin starts the plugin on the node's state directory and waits
// until it is synchronized.
func (n *Node) StartPlugin() {
	n.t.Helper()
	store, err := state.NewStore(n.stateDir)
	if err != nil {
		n.t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	if os.Getenv("LIFECYCLE_PLUGIN_LOG") != "" {
		log.SetOutput(os.Stderr)
		log.SetLevel(logrus.DebugLevel)
	}
	opts := plugin.Options{
		Socket:           n.RT.Socket(),
		Log:              log,
		ReconnectMin:     10 * time.Millisecond,
		DialInterval:     10 * time.Millisecond,
		ReconnectMax:     100 * time.Millisecond,
		SendDelay:        5 * time.Millisecond,
		MaintainInterval: 5 * time.Millisecond,
	}
	if n.API != nil {
		opts.API = n.API
	}
	p, err := plugin.New(n.pol, store, opts)
	if err != nil {
		n.t.Fatal(err)
	}
	if n.API != nil {
		n.API.end = p.EndPod
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.plugin, n.store, n.cancel, n.done = p, store, cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		if err := p.Run(ctx); err != nil {
			n.t.Errorf("plugin: %v", err)
		}
	}()
	n.waitReady()
}

// waitReady waits until the plugin is registered and synchronized, and
// the runtime delivers events to it.
func (n *Node) waitReady() {
	n.t.Helper()
	n.waitFor("the plugin to synchronize", n.plugin.Ready)
	n.RT.BlockPluginSync().Unblock()
}

// StopPlugin stops the plugin and waits until the runtime noticed
// (idempotent).
func (n *Node) StopPlugin() {
	if n.plugin == nil {
		return
	}
	n.cancel()
	<-n.done
	if err := n.store.Close(); err != nil {
		n.t.Errorf("closing the state store: %v", err)
	}
	n.RT.WaitPluginGone()
	n.plugin = nil
	if n.API != nil {
		n.API.end = nil
	}
}

// RestartContainerd restarts the runtime under the running plugin and
// waits until the plugin has synchronized with the new one.
func (n *Node) RestartContainerd() {
	n.t.Helper()
	before := n.RT.Syncs()
	n.RT.RestartContainerd()
	n.waitFor("the plugin to synchronize with the restarted runtime", func() bool { return n.RT.Syncs() > before && n.plugin.Ready() })
	n.RT.BlockPluginSync().Unblock()
}

// Settle waits until the runtime runs every container on the cpuset the
// plugin wants for it, with no update in flight.
func (n *Node) Settle() plugin.Snapshot {
	n.t.Helper()
	var snap plugin.Snapshot
	var why string
	ok := n.poll(func() bool {
		snap = n.plugin.Snapshot()
		switch {
		case snap.Lending != "":
			why = "CPUs " + snap.Lending + " are on loan"
			return false
		case !snap.Ready:
			why = "the plugin is not ready"
			return false
		}
		applied := n.RT.Applied()
		for _, id := range slices.Sorted(maps.Keys(snap.Containers)) {
			c := snap.Containers[id]
			if c.Stopped {
				continue
			}
			if got, ok := applied[id]; ok && got.String() != c.CPUs {
				why = fmt.Sprintf("container %s (%s) runs on %s, the plugin wants %s", id, c.Name, got, c.CPUs)
				return false
			}
		}
		return true
	})
	if !ok {
		n.t.Fatalf("timed out waiting for the runtime to apply what the plugin decided: %s", why)
	}
	return snap
}

// poll polls cond for up to 30 s and reports whether it held.
func (n *Node) poll(cond func() bool) bool {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// waitFor polls cond for up to 30 s (the machine may be busy: a test
// shares it, and the lives run two at a time).
func (n *Node) waitFor(what string, cond func() bool) {
	n.t.Helper()
	if !n.poll(cond) {
		n.t.Fatalf("timed out waiting for %s", what)
	}
}

// WaitFor polls cond until it holds (30 s at most).
func (n *Node) WaitFor(what string, cond func() bool) { n.t.Helper(); n.waitFor(what, cond) }

// Plugin returns the running plugin.
func (n *Node) Plugin() *plugin.Plugin { return n.plugin }

// sandboxPod is the pod as the kubelet runs its sandbox: its cgroup
// parent by QoS and its pod totals without the overhead.
func sandboxPod(s *PodSpec, vpod *v1.Pod) policy.Pod {
	pod, _ := scenario.KubeletPod(s.Name, s.QoS)
	pod.Resources = podTotals(s, vpod)
	return pod
}

// podTotals are the pod-level resources the kubelet sends with the
// sandbox and in UpdatePodSandboxResources.
func podTotals(s *PodSpec, vpod *v1.Pod) policy.Resources {
	limit := kubeapi.PodCPULimitMilli(vpod)
	request := int64(0)
	for _, c := range s.Containers {
		if c.Kind != KindInit {
			request += c.Milli
		}
	}
	for _, c := range s.Containers {
		if c.Kind == KindInit {
			request = max(request, c.Milli)
		}
	}
	return scenario.KubeletResources(s.QoS, request, limit, 0)
}

// containerResources are a container's resources as the kubelet sends
// them.
func containerResources(s *PodSpec, milli int64) policy.Resources {
	limit := int64(0)
	if s.QoS == "guaranteed" {
		limit = milli
	}
	return scenario.KubeletResources(s.QoS, milli, limit, 256<<20)
}

// API is the Kubernetes API as the plugin sees it: the pods' specs and
// phases, always in step with the kubelet (the generator changes both at
// once).
type API struct {
	mu   sync.Mutex
	pods map[string]*v1.Pod
	// end is the plugin's EndPod while it runs.
	end func(uid string)
}

var _ plugin.API = (*API)(nil)

// Set records a pod's spec.
func (a *API) Set(pod *v1.Pod) {
	a.mu.Lock()
	a.pods[string(pod.UID)] = pod
	a.mu.Unlock()
}

// Ended reports a pod terminal or deleted to the plugin.
func (a *API) Ended(uid string) {
	a.mu.Lock()
	delete(a.pods, uid)
	end := a.end
	a.mu.Unlock()
	if end != nil {
		end(uid)
	}
}

func (a *API) pod(uid string) *v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pods[uid]
}

// PodSpec implements plugin.API.
func (a *API) PodSpec(uid string, totalMilli int64, _ time.Duration) (policy.PodSpec, bool) {
	if pod := a.pod(uid); pod != nil && kubeapi.PodCPULimitMilli(pod) == totalMilli {
		return kubeapi.SpecOf(pod), true
	}
	return nil, false
}

// ContainerSpec implements plugin.API.
func (a *API) ContainerSpec(uid, container string, limitMilli int64, _ time.Duration) (policy.PodSpec, bool) {
	if pod := a.pod(uid); pod != nil {
		spec := kubeapi.SpecOf(pod)
		if r, ok := spec[container]; ok && policy.CPULimitMilli(r) == limitMilli {
			return spec, true
		}
	}
	return nil, false
}

// PodActive implements plugin.API: the API lists the pod (it drops it at
// its end).
func (a *API) PodActive(uid string) bool { return a.pod(uid) != nil }

// PodInfo implements plugin.API.
func (a *API) PodInfo(uid string, _ time.Duration) (policy.PodInfo, bool) {
	if pod := a.pod(uid); pod != nil {
		return kubeapi.InfoOf(pod), true
	}
	return policy.PodInfo{}, false
}

// Refused implements plugin.API.
func (a *API) Refused(policy.Pod, string, string, *policy.Refusal) {}

// Resized implements plugin.API.
func (a *API) Resized(policy.Pod, string, cpuset.CPUSet, cpuset.CPUSet) {}

// Changed implements plugin.API.
func (a *API) Changed() {}

// stateDir returns a directory for the plugin's checkpoint: on a memory
// file system when the machine has one (/dev/shm), where a sync costs
// nothing (the checkpoint's durability is state's tests' business; a
// disk's syncs would take most of the lives' time), else the test's
// temporary directory.
func stateDir(t testing.TB) string {
	dir, err := os.MkdirTemp("/dev/shm", "lifecycle-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
