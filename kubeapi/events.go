package kubeapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	// ReasonAdmissionRefused is a pod the plugin could not admit whole at
	// its sandbox, as the kubelet's admission would not have admitted it.
	ReasonAdmissionRefused = "AdmissionRefused"
	ReasonResized          = "Resized"
	// ReasonNodeCheckFailed is the event on the Node when the plugin's
	// checks of it at start (doctor's) find something wrong.
	ReasonNodeCheckFailed = "NodeCheckFailed"
	actionCheck           = "Check"
	actionResize          = "Resize"
	actionCreate          = "Create"
	actionAdmit           = "Admit"
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
	return &eventer{sink: sink, health: h, metrics: m, now: now, instance: reportingInstance(node),
		queue: make(chan *eventsv1.Event, queueLength), limited: map[types.UID]*rate.Limiter{}, series: map[eventKey]*written{}}
}

// maxReportingInstance is the API server's bound on an event's
// reportingInstance (events.k8s.io/v1).
const maxReportingInstance = 128

// reportingInstance is the events' reportingInstance on node: the
// component and the node's name, the name shortened (with a hash of it, so
// that two long names stay apart) when the whole would pass the API
// server's bound; node names may be 253 characters.
func reportingInstance(node string) string {
	full := Component + "-" + node
	if len(full) <= maxReportingInstance {
		return full
	}
	sum := sha256.Sum256([]byte(node))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	return full[:maxReportingInstance-len(suffix)] + suffix
}

// maxEventName is the API server's bound on an object's name (a DNS
// subdomain).
const maxEventName = 253

// eventName is the name of an event on pod at now, as the kubelet names
// its own (the pod's name, a dot, the time in hex nanoseconds), the pod's
// name shortened when the whole would pass the bound on names.
func eventName(podName string, now time.Time) string {
	stamp := fmt.Sprintf(".%x", now.UnixNano())
	if len(podName)+len(stamp) > maxEventName {
		podName = strings.TrimRight(podName[:maxEventName-len(stamp)], ".-")
	}
	return podName + stamp
}

// eventRejected reports whether err is the API server refusing one event
// (its content, its namespace being deleted, a name taken), which says
// nothing of the API's availability to the plugin, as opposed to the API
// server being down, slow, or forbidding the plugin's events.
func eventRejected(err error) bool {
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsAlreadyExists(err),
		apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsRequestEntityTooLargeError(err):
		return true
	case apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return true
	}
	return false
}

// refused records a refused creation (event "CreateContainer"), pod
// admission ("RunPodSandbox") or resize of a pod's container (container ""
// for the pod's own resize or admission).
func (e *eventer) refused(pod policy.Pod, container, event string, r *policy.Refusal) {
	reason, action := ReasonResizeRefused, actionResize
	switch event {
	case "CreateContainer":
		reason, action = ReasonCreationRefused, actionCreate
	case "RunPodSandbox":
		reason, action = ReasonAdmissionRefused, actionAdmit
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
	e.recordOn(podReference(pod, container), types.UID(pod.UID), typ, reason, action, note)
}

// nodeCheckFailed records that the plugin's checks of node at start found
// problems: a Warning event on the Node (in the default namespace, where
// the kubelet writes its own events of nodes).
func (e *eventer) nodeCheckFailed(node, note string) {
	if node == "" {
		return
	}
	ref := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, Namespace: metav1.NamespaceDefault}
	e.recordOn(ref, types.UID("node/"+node), corev1.EventTypeWarning, ReasonNodeCheckFailed, actionCheck, note)
}

// recordOn queues an event regarding an object, limited per limit key.
func (e *eventer) recordOn(regarding corev1.ObjectReference, limit types.UID, typ, reason, action, note string) {
	if !e.allow(limit) {
		e.count(reason, eventDropped)
		return
	}
	if len(note) > maxNoteBytes {
		note = strings.ToValidUTF8(note[:maxNoteBytes-len("…")], "") + "…"
	}
	now := e.now()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(regarding.Name, now), Namespace: regarding.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: Component,
		ReportingInstance:   e.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           regarding,
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
			err := e.write(ctx, ev)
			switch {
			case err == nil:
				e.health.succeeded(FeatureEvents)
			case eventRejected(err):
				// The API server answered: it is there, and refused this
				// event alone.
				e.count(ev.Reason, eventRejectedOutcome)
				e.health.log.WithError(err).Debug("the API server refused an event")
				e.health.succeeded(FeatureEvents)
			case ctx.Err() == nil:
				e.health.failed(FeatureEvents, err)
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
		return fmt.Errorf("creating event %s on %s %s/%s: %w", ev.Reason, ev.Regarding.Kind, ev.Namespace, ev.Regarding.Name, err)
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
