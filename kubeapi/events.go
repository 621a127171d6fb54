package kubeapi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Component is the reporting controller of the plugin's events.
const Component = "nri-cpumanager"

// The reasons and actions of the plugin's events.
const (
	ReasonResizeRefused   = "ResizeRefused"
	ReasonCreationRefused = "CreationRefused"
	ReasonResized         = "Resized"
	actionResize          = "Resize"
	actionCreate          = "Create"
)

// The rate limit of events per pod, as client-go's spam filter of
// core/v1 events (tools/record): a burst, then one event every few
// minutes. The plugin reports a refusal once per distinct refusal and 5
// minutes already; this bounds a pod whose refusals keep changing. Pods
// the limiter remembers are forgotten when the watch sees them deleted,
// and all of them past maxLimited (a node never has that many).
const (
	eventBurst   = 25
	eventEvery   = 5 * time.Minute
	maxLimited   = 4096
	maxNoteBytes = 1024 // events.k8s.io/v1 rejects a longer note
)

// eventer records the plugin's events on pods through the events API
// (events.k8s.io/v1, with its event series: repeats of an event of a pod,
// container and reason within minutes become one event whose count grows).
type eventer struct {
	recorder events.EventRecorder
	metrics  *metrics
	now      func() time.Time

	mu      sync.Mutex
	limited map[types.UID]*rate.Limiter
}

// sink is the events API as the broadcaster writes to it, recording the
// outcome of each write in the API's health.
type sink struct {
	events.EventSink
	health *health
}

func (s sink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.record(s.EventSink.Create(ctx, e))
}

func (s sink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.record(s.EventSink.Update(ctx, e))
}

func (s sink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.record(s.EventSink.Patch(ctx, e, data))
}

func (s sink) record(e *eventsv1.Event, err error) (*eventsv1.Event, error) {
	if err != nil {
		s.health.failed(FeatureEvents, err)
	} else {
		s.health.succeeded(FeatureEvents)
	}
	return e, err
}

// startEvents starts the broadcaster that writes events until ctx ends.
func startEvents(ctx context.Context, client kubernetes.Interface, h *health, m *metrics, now func() time.Time) (*eventer, error) {
	b := events.NewBroadcaster(sink{EventSink: &events.EventSinkImpl{Interface: client.EventsV1()}, health: h})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("starting the event recorder: %w", err)
	}
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return &eventer{recorder: b.NewRecorder(scheme.Scheme, Component), metrics: m, now: now, limited: map[types.UID]*rate.Limiter{}}, nil
}

// refused records a refused creation (event "CreateContainer") or resize
// of a pod's container (container "" for the pod's own resize).
func (e *eventer) refused(pod policy.Pod, container, event string, r *policy.Refusal) {
	reason, action := ReasonResizeRefused, actionResize
	if event == "CreateContainer" {
		reason, action = ReasonCreationRefused, actionCreate
	}
	e.record(pod, container, corev1.EventTypeWarning, reason, action, r.Error())
}

// resized records a resize that changed a container's exclusive CPUs.
func (e *eventer) resized(pod policy.Pod, container string, before, after cpuset.CPUSet) {
	note := fmt.Sprintf("container %s: exclusive CPUs %s (%d) → %s (%d)", container, cpusText(before), before.Size(), cpusText(after), after.Size())
	e.record(pod, container, corev1.EventTypeNormal, ReasonResized, actionResize, note)
}

func (e *eventer) record(pod policy.Pod, container, typ, reason, action, note string) {
	if pod.UID == "" || pod.Name == "" || pod.Namespace == "" {
		return // not a pod of the API (a test, a pod the runtime made alone)
	}
	if !e.allow(types.UID(pod.UID)) {
		e.count(reason, eventDropped)
		return
	}
	e.count(reason, eventSent)
	if len(note) > maxNoteBytes {
		note = strings.ToValidUTF8(note[:maxNoteBytes-len("…")], "") + "…"
	}
	e.recorder.Eventf(podReference(pod, container), nil, typ, reason, action, "%s", note)
}

// allow takes a token of the pod's bucket.
func (e *eventer) allow(uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.limited[uid]
	if l == nil {
		if len(e.limited) >= maxLimited {
			clear(e.limited)
		}
		l = rate.NewLimiter(rate.Every(eventEvery), eventBurst)
		e.limited[uid] = l
	}
	return l.AllowN(e.now(), 1)
}

// forget drops a deleted pod's bucket.
func (e *eventer) forget(uid string) {
	e.mu.Lock()
	delete(e.limited, types.UID(uid))
	e.mu.Unlock()
}

func (e *eventer) count(reason, outcome string) {
	if e.metrics != nil {
		e.metrics.events.WithLabelValues(reason, outcome).Inc()
	}
}

// podReference refers to a pod, or to one of its containers as the
// kubelet's events do (field path spec.containers{name}), so that
// `kubectl describe pod` lists the event.
func podReference(pod policy.Pod, container string) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID)}
	if container != "" {
		ref.FieldPath = "spec.containers{" + container + "}"
	}
	return ref
}

func cpusText(s cpuset.CPUSet) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
