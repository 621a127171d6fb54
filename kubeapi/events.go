package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// The events' limits. Per pod, as client-go's spam filter of core/v1
// events (tools/record): a burst, then one event every few minutes (the
// plugin reports a refusal once per distinct refusal and 5 minutes
// already; this bounds a pod whose refusals keep changing). Pods the
// limiter remembers are forgotten when the watch sees them deleted, and
// all of them past maxLimited (a node never has that many). A repeat of an
// event (same pod, container, type, reason, action) within seriesWindow
// is counted in the first one's series, as client-go's events recorder
// does. At most queueLength events wait to be written; more are dropped.
const (
	eventBurst   = 25
	eventEvery   = 5 * time.Minute
	maxLimited   = 4096
	seriesWindow = 6 * time.Minute
	queueLength  = 256
	maxNoteBytes = 1024 // events.k8s.io/v1 rejects a longer note
)

// eventKey is what makes two events the same for a series.
type eventKey struct {
	uid                         types.UID
	fieldPath, typ, reason, act string
}

// written is an event in the API, for its series.
type written struct {
	namespace, name string
	count           int32
	last            time.Time
}

// eventer writes the plugin's events on pods (events.k8s.io/v1) from one
// goroutine; recording never blocks.
type eventer struct {
	sink     EventWriter
	health   *health
	metrics  *metrics
	now      func() time.Time
	instance string
	queue    chan *eventsv1.Event

	mu      sync.Mutex
	limited map[types.UID]*rate.Limiter
	series  map[eventKey]*written
}

func newEventer(sink EventWriter, node string, h *health, m *metrics, now func() time.Time) *eventer {
	return &eventer{sink: sink, health: h, metrics: m, now: now, instance: Component + "-" + node,
		queue: make(chan *eventsv1.Event, queueLength), limited: map[types.UID]*rate.Limiter{}, series: map[eventKey]*written{}}
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
	if len(note) > maxNoteBytes {
		note = strings.ToValidUTF8(note[:maxNoteBytes-len("…")], "") + "…"
	}
	now := e.now()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()), Namespace: pod.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: Component,
		ReportingInstance:   e.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           podReference(pod, container),
		Note:                note,
		Type:                typ,
	}
	select {
	case e.queue <- ev:
		e.count(reason, eventSent)
	default:
		e.count(reason, eventDropped) // the API server is too slow
	}
}

// run writes the queued events until ctx ends.
func (e *eventer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-e.queue:
			if err := e.write(ctx, ev); err != nil && ctx.Err() == nil {
				e.health.failed(FeatureEvents, err)
			} else if err == nil {
				e.health.succeeded(FeatureEvents)
			}
		}
	}
}

// write creates an event, or counts it in the series of the same event
// written within seriesWindow.
func (e *eventer) write(ctx context.Context, ev *eventsv1.Event) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key := eventKey{uid: ev.Regarding.UID, fieldPath: ev.Regarding.FieldPath, typ: ev.Type, reason: ev.Reason, act: ev.Action}
	now := ev.EventTime.Time
	e.mu.Lock()
	w := e.series[key]
	if w != nil && now.Sub(w.last) >= seriesWindow {
		w = nil
	}
	var patch written
	if w != nil {
		w.count++
		w.last = now
		patch = *w
	}
	e.mu.Unlock()
	if w != nil {
		data, err := json.Marshal(map[string]any{"series": eventsv1.EventSeries{Count: max(patch.count, 2), LastObservedTime: metav1.NewMicroTime(now)}})
		if err != nil {
			return fmt.Errorf("event series patch: %w", err)
		}
		_, err = e.sink.Patch(ctx, patch.namespace, patch.name, data)
		if !apierrors.IsNotFound(err) {
			if err != nil {
				return fmt.Errorf("counting event %s/%s in its series: %w", patch.namespace, patch.name, err)
			}
			return nil
		}
		// Deleted meanwhile (events expire): a new one.
	}
	if _, err := e.sink.Create(ctx, ev); err != nil {
		return fmt.Errorf("creating event %s on pod %s/%s: %w", ev.Reason, ev.Namespace, ev.Regarding.Name, err)
	}
	e.mu.Lock()
	if len(e.series) >= maxLimited {
		clear(e.series)
	}
	e.series[key] = &written{namespace: ev.Namespace, name: ev.Name, count: 1, last: now}
	e.mu.Unlock()
	return nil
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

// forget drops what is kept of a deleted pod.
func (e *eventer) forget(uid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.limited, types.UID(uid))
	for k := range e.series {
		if k.uid == types.UID(uid) {
			delete(e.series, k)
		}
	}
}

func (e *eventer) count(reason, outcome string) {
	if e.metrics != nil {
		e.metrics.events.WithLabelValues(reason, outcome).Inc()
	}
}

// podReference refers to a pod, or to one of its containers as the
// kubelet's events do (field path spec.containers{name}), so that
// `kubectl describe pod` lists the event.
func podReference(pod policy.Pod, container string) corev1.ObjectReference {
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID)}
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
