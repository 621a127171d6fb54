package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The kubelet's conversion of CPU and memory to the runtime's terms
// (pkg/kubelet/cm: MilliCPUToShares, MilliCPUToQuota).
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliPerCPU   = 1000
	quotaPeriod   = 100000 // µs, the kubelet's default cpuCFSQuotaPeriod
	minQuotaValue = 1000   // µs
)

// uidIndex indexes the watched pods by UID, the key the runtime gives.
const uidIndex = "uid"

// podWatch is the one watch of the pods bound to this node. Its cache
// keeps only what admission needs of each pod (trimPod).
type podWatch struct {
	informer cache.SharedIndexInformer
	health   *health
	metrics  *metrics

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change of the cache
	deleted func(uid string)
	// ended is told of every pod the watch sees terminal or deleted
	// (endedSent: once per pod); nil until set.
	ended     func(uid string)
	endedSent map[string]bool
}

// newPodWatch watches the pods lw lists: this node's.
func newPodWatch(lw cache.ListerWatcher, node string, h *health, m *metrics) *podWatch {
	w := &podWatch{health: h, metrics: m, changed: make(chan struct{})}
	inner := cache.ToListerWatcherWithContext(lw)
	recording := &cache.ListWatch{
		// Only a watch established makes the feature available again: a
		// list that succeeds before a watch that fails (a role without
		// watch) would otherwise flap between the two.
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := inner.ListWithContext(ctx, o)
			if err != nil {
				w.result(err)
			}
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := inner.WatchWithContext(ctx, o)
			w.result(err)
			return wi, err
		},
	}
	// lw says whether it can stream the initial list (a fake cannot); the
	// wrapper keeps that.
	w.informer = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(recording, lw), &corev1.Pod{}, cache.SharedIndexInformerOptions{
		Indexers:          cache.Indexers{uidIndex: indexByUID},
		ObjectDescription: "pods on node " + node,
	})
	// Neither can fail before the informer runs.
	_ = w.informer.SetTransform(trimPod)
	_ = w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if routineWatchEnd(err) {
			return // the reflector lists again; a failure of that counts
		}
		w.health.failed(FeaturePods, err)
	})
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			w.notify()
			w.checkEnded(obj)
		},
		UpdateFunc: func(_, obj any) {
			w.notify()
			w.checkEnded(obj)
		},
		DeleteFunc: func(obj any) {
			w.notify()
			if pod, ok := podOf(obj); ok {
				if w.deleted != nil {
					w.deleted(string(pod.UID))
				}
				w.tellEnded(string(pod.UID), true)
			}
		},
	})
	return w
}

// checkEnded tells the plugin of a pod the watch sees in a terminal phase
// (Succeeded, Failed): the kubelet's static policy gives such a pod's CPUs
// back, although its sandbox may stay for long (a completed Job's pod).
func (w *podWatch) checkEnded(obj any) {
	if pod, ok := podOf(obj); ok && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
		w.tellEnded(string(pod.UID), false)
	}
}

// tellEnded tells the plugin, once, that a pod ended; deleted forgets it
// was told.
func (w *podWatch) tellEnded(uid string, deleted bool) {
	w.mu.Lock()
	ended, sent := w.ended, w.endedSent[uid]
	if deleted {
		delete(w.endedSent, uid)
	} else if ended != nil {
		if w.endedSent == nil {
			w.endedSent = map[string]bool{}
		}
		w.endedSent[uid] = true
	}
	w.mu.Unlock()
	if ended != nil && (deleted || !sent) {
		ended(uid)
	}
}

// onEnded sets the function told of ended pods.
func (w *podWatch) onEnded(fn func(uid string)) {
	w.mu.Lock()
	w.ended = fn
	w.mu.Unlock()
}

// active implements API.PodActive: a pod the synced cache holds and
// that is not terminal, or any pod while the cache may be stale.
func (w *podWatch) active(uid string) bool {
	if !w.informer.HasSynced() || !w.health.ok(FeaturePods) {
		return true
	}
	objs, err := w.informer.GetIndexer().ByIndex(uidIndex, uid)
	if err != nil || len(objs) != 1 {
		return false
	}
	pod, ok := objs[0].(*corev1.Pod)
	return ok && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// podInfo implements API.PodInfo: what the cache's copy of pod uid says
// of its containers, waiting at most wait for the cache to hold the pod
// (not at all while the watch is not synced or failing).
func (w *podWatch) podInfo(uid string, wait time.Duration) (policy.PodInfo, bool) {
	if info, ok := w.infoNow(uid); ok || wait <= 0 || !w.informer.HasSynced() || !w.health.ok(FeaturePods) {
		return info, ok
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := w.next() // before the look-up: a change after it wakes us
		if info, ok := w.infoNow(uid); ok {
			return info, true
		}
		select {
		case <-changed:
		case <-timer.C:
			return policy.PodInfo{}, false
		}
	}
}

// infoNow is podInfo without waiting.
func (w *podWatch) infoNow(uid string) (policy.PodInfo, bool) {
	objs, err := w.informer.GetIndexer().ByIndex(uidIndex, uid)
	if err != nil || len(objs) != 1 {
		return policy.PodInfo{}, false
	}
	pod, ok := objs[0].(*corev1.Pod)
	if !ok {
		return policy.PodInfo{}, false
	}
	return InfoOf(pod), true
}

// InfoOf returns what a pod's spec says of its containers: their roles
// (an init container with restartPolicy Always is a sidecar), and the
// pod's exclusive CPU need as the kubelet's static policy computes it
// (podGuaranteedCPUs: for a Guaranteed pod, the largest of each init
// container's whole CPUs plus the sidecars' declared before it, and of
// the sidecars' and app containers' sum; 0 for any other pod, and for a
// pod with pod-level resources, which the kubelet pins no container of).
func InfoOf(pod *corev1.Pod) policy.PodInfo {
	info := policy.PodInfo{Roles: make(map[string]policy.Role, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))}
	guaranteed := pod.Status.QOSClass == corev1.PodQOSGuaranteed && !resourcehelper.IsPodLevelResourcesSet(pod)
	whole := func(c *corev1.Container) int {
		q, ok := c.Resources.Requests[corev1.ResourceCPU]
		if !ok || !guaranteed || q.MilliValue()%milliPerCPU != 0 {
			return 0
		}
		return int(q.Value())
	}
	var inits, sidecars, long int
	info.Containers = make([]policy.SpecContainer, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			info.Roles[c.Name] = policy.RoleSidecar
			info.Containers = append(info.Containers, policy.SpecContainer{Name: c.Name, Role: policy.RoleSidecar, CPUs: whole(c)})
			sidecars += whole(c)
			continue
		}
		info.Roles[c.Name] = policy.RoleInit
		info.Containers = append(info.Containers, policy.SpecContainer{Name: c.Name, Role: policy.RoleInit, CPUs: whole(c)})
		inits = max(inits, sidecars+whole(c))
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		info.Roles[c.Name] = policy.RoleApp
		info.Containers = append(info.Containers, policy.SpecContainer{Name: c.Name, Role: policy.RoleApp, CPUs: whole(c)})
		long += whole(c)
	}
	info.GuaranteedCPUs = max(inits, sidecars+long)
	return info
}

// routineWatchEnd reports whether a watch ended the way watches do: its
// resource version too old (compaction), or its connection closed.
func routineWatchEnd(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// result records the outcome of a list or watch request.
func (w *podWatch) result(err error) {
	if err != nil {
		w.health.failed(FeaturePods, err)
		return
	}
	w.health.succeeded(FeaturePods)
}

// run runs the watch until ctx ends.
func (w *podWatch) run(ctx context.Context) { w.informer.RunWithContext(ctx) }

// notify wakes every PodSpec call waiting for a change.
func (w *podWatch) notify() {
	w.mu.Lock()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// next returns the channel closed at the next change of the cache.
func (w *podWatch) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// podSpec implements API.PodSpec: it waits at most wait for the cache to
// hold a version of pod uid whose CPU limit is totalMilli. It does not
// wait while the watch is not synced or its last request failed: the
// cache may be stale then, and the plugin goes on with NRI alone.
func (w *podWatch) podSpec(uid string, totalMilli int64, wait time.Duration) (policy.PodSpec, bool) {
	return w.specWhen(uid, func(pod *corev1.Pod) bool { return PodCPULimitMilli(pod) == totalMilli }, wait)
}

// containerSpec implements API.ContainerSpec: podSpec, for a version of
// the pod whose spec asks container for a CPU limit of limitMilli.
func (w *podWatch) containerSpec(uid, container string, limitMilli int64, wait time.Duration) (policy.PodSpec, bool) {
	return w.specWhen(uid, func(pod *corev1.Pod) bool {
		r, ok := SpecOf(pod)[container]
		return ok && policy.CPULimitMilli(r) == limitMilli
	}, wait)
}

// specWhen waits at most wait for the cache to hold a version of pod uid
// that match accepts, and returns its spec.
func (w *podWatch) specWhen(uid string, match func(*corev1.Pod) bool, wait time.Duration) (policy.PodSpec, bool) {
	if !w.informer.HasSynced() || !w.health.ok(FeaturePods) {
		w.count(specNoWatch)
		return nil, false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := w.next() // before the look-up: a change after it wakes us
		if spec, ok := w.lookup(uid, match); ok {
			w.count(specMatched)
			return spec, true
		}
		select {
		case <-changed:
		case <-timer.C:
			w.count(specTimeout)
			return nil, false
		}
	}
}

func (w *podWatch) count(outcome string) {
	if w.metrics != nil {
		w.metrics.podSpecs.WithLabelValues(outcome).Inc()
	}
}

// lookup returns the spec of pod uid when the cache holds it and match
// accepts it.
func (w *podWatch) lookup(uid string, match func(*corev1.Pod) bool) (policy.PodSpec, bool) {
	objs, err := w.informer.GetIndexer().ByIndex(uidIndex, uid)
	if err != nil || len(objs) != 1 {
		return nil, false
	}
	pod, ok := objs[0].(*corev1.Pod)
	if !ok || !match(pod) {
		return nil, false
	}
	return SpecOf(pod), true
}

// PodCPULimitMilli is the pod's CPU limit in milli-CPU as the kubelet
// sends it in UpdatePodSandboxResources: the pod-level limit when
// spec.resources sets one, else the larger of the containers' and
// sidecars' sum and what any init container needs while it runs, without
// the pod's overhead; 0 when a container has no CPU limit (the kubelet
// sets no pod quota then).
//
// "Without the overhead" the kubelet's way, which is not the limit alone:
// it converts the pod cgroup's limit, overhead included, to a CFS quota
// (cm.ResourceConfigForPod), then subtracts the overhead's own quota
// (kuberuntime's subtractOverheadFromResourceConfig). Each conversion
// rounds down and is at least 1000 µs, so an overhead below 10m takes
// away more than itself: limits of 2 CPUs and an overhead of 5m come as
// 200500 − 1000 µs, 1995m.
func PodCPULimitMilli(pod *corev1.Pod) int64 {
	declared := true
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{
		ContainerFn: func(res corev1.ResourceList, _ resourcehelper.ContainerType) {
			if res.Cpu().IsZero() {
				declared = false
			}
		},
	})
	if resourcehelper.IsPodLevelResourcesSet(pod) && !pod.Spec.Resources.Limits.Cpu().IsZero() {
		declared = true
	}
	if !declared {
		return 0
	}
	// The kubelet writes quota = milli·period/1000 (at least 1000 µs); the
	// runtime's totals are read back from it.
	quota := quotaFromMilli(limits.Cpu().MilliValue())
	if overhead := pod.Spec.Overhead.Cpu().MilliValue(); overhead > 0 {
		quota -= quotaFromMilli(overhead)
	}
	if quota <= 0 {
		return 0
	}
	return policy.CPULimitMilli(policy.Resources{CPUQuota: quota, CPUPeriod: quotaPeriod})
}

// SpecOf returns what the pod's spec asks for each of its containers
// (regular containers, sidecars and init containers: the kubelet resizes a
// sidecar while an init container after it runs, and that init container
// is part of the pod then), in the runtime's terms: desired resources, as
// the kubelet applies them once it has admitted a resize.
func SpecOf(pod *corev1.Pod) policy.PodSpec {
	spec := make(policy.PodSpec, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		spec[c.Name] = RuntimeResources(c.Resources)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		spec[c.Name] = RuntimeResources(c.Resources)
	}
	return spec
}

// RuntimeResources converts a container's resources to what the kubelet
// sends the runtime: shares = max(2, request·1024/1000) (the limit when no
// request is set), quota = limit·100000/1000 (at least 1000) with period
// 100000, no quota without a limit, memory limit in bytes.
func RuntimeResources(r corev1.ResourceRequirements) policy.Resources {
	request := r.Requests.Cpu()
	if _, ok := r.Requests[corev1.ResourceCPU]; !ok {
		request = r.Limits.Cpu()
	}
	out := policy.Resources{CPUShares: sharesFromMilli(request.MilliValue())}
	if limit := r.Limits.Cpu().MilliValue(); limit > 0 {
		out.CPUQuota, out.CPUPeriod = quotaFromMilli(limit), quotaPeriod
	}
	out.MemoryLimit = r.Limits.Memory().Value()
	return out
}

func sharesFromMilli(milli int64) uint64 {
	if milli <= 0 {
		return minShares
	}
	return uint64(min(max(milli*sharesPerCPU/milliPerCPU, minShares), maxShares))
}

func quotaFromMilli(milli int64) int64 {
	if milli <= 0 {
		return 0
	}
	return max(milli*quotaPeriod/milliPerCPU, minQuotaValue)
}

// trimPod is the watch's transform: it keeps of a pod only what the
// plugin reads (its identity and, for a mirror pod, its static pod's UID,
// its containers' names, resources and restart policies, its pod-level resources and overhead, its phase and
// QoS class), so that the cache of a full node is small; managed fields,
// the rest of the status, volumes, environment and the like are dropped.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone: the informer handles it
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, Generation: pod.Generation,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			NodeName:  pod.Spec.NodeName,
			Overhead:  pod.Spec.Overhead,
			Resources: pod.Spec.Resources,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, QOSClass: pod.Status.QOSClass},
	}
	if static := pod.Annotations[mirrorAnnotation]; static != "" {
		out.Annotations = map[string]string{mirrorAnnotation: static}
	}
	out.Spec.Containers = make([]corev1.Container, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{Name: c.Name, Resources: c.Resources}
	}
	if len(pod.Spec.InitContainers) > 0 {
		out.Spec.InitContainers = make([]corev1.Container, len(pod.Spec.InitContainers))
		for i, c := range pod.Spec.InitContainers {
			out.Spec.InitContainers[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		}
	}
	return out, nil
}

// indexByUID indexes a pod by its UID, and a mirror pod (the API's copy
// of a static pod, which the API server gives a UID of its own) by the
// static pod's UID too, which its kubernetes.io/config.mirror annotation
// holds: the kubelet runs a static pod's sandbox under that UID (its
// config hash).
func indexByUID(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pod index: unexpected %T", obj)
	}
	if static := pod.Annotations[mirrorAnnotation]; static != "" && static != string(pod.UID) {
		return []string{string(pod.UID), static}, nil
	}
	return []string{string(pod.UID)}, nil
}

// mirrorAnnotation marks a mirror pod, with the UID of its static pod
// (the kubelet's kubetypes.ConfigMirrorAnnotationKey).
const mirrorAnnotation = "kubernetes.io/config.mirror"

// podOf returns the pod of an informer notification, tombstones included.
func podOf(obj any) (*corev1.Pod, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	return pod, ok
}
