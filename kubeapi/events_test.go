package kubeapi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// clock is a settable clock for the events' rate limit.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func eventsIn(t *testing.T, client *fake.Clientset) []eventsv1.Event {
	t.Helper()
	list, err := client.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestEventsOnPods: a refused resize and creation are Warning events, a
// resize a Normal one, each on the pod (the container in the field path),
// from the plugin's component, with the refusal's one line as the note.
func TestEventsOnPods(t *testing.T) {
	client := fake.NewClientset()
	a, _ := started(t, client, Options{})
	pod := policy.Pod{UID: "uid-p", Namespace: "ns", Name: "p"}
	r := &policy.Refusal{Verdict: policy.Infeasible, Reason: policy.ReasonProhibitedCPUAllocation, Message: "container a cannot shrink below its baseline CPUs 1-2"}
	a.Refused(pod, "a", "UpdateContainer", r)
	a.Refused(pod, "", "UpdatePodSandbox", r)
	a.Refused(pod, "b", "CreateContainer", &policy.Refusal{Verdict: policy.Deferred, Reason: policy.ReasonAllocateCPUs, Message: "not enough free CPUs"})
	a.Resized(pod, "a", cpuset.New(1, 2), cpuset.New(1, 2, 3, 4))
	a.Refused(policy.Pod{UID: "uid-x"}, "a", "UpdateContainer", r) // not a pod of the API: no event
	waitFor(t, "four events", func() bool { return len(eventsIn(t, client)) == 4 })

	got := map[string]eventsv1.Event{}
	for _, e := range eventsIn(t, client) {
		got[e.Reason+" "+e.Regarding.FieldPath] = e
		if e.Regarding.Kind != "Pod" || e.Regarding.Name != "p" || e.Regarding.UID != "uid-p" || e.ReportingController != Component {
			t.Errorf("event %s regards %+v, from %q", e.Reason, e.Regarding, e.ReportingController)
		}
	}
	for key, want := range map[string]struct{ typ, action, note string }{
		"ResizeRefused spec.containers{a}":   {"Warning", "Resize", r.Error()},
		"ResizeRefused ":                     {"Warning", "Resize", r.Error()},
		"CreationRefused spec.containers{b}": {"Warning", "Create", "Deferred: allocateCPUsError: not enough free CPUs"},
		"Resized spec.containers{a}":         {"Normal", "Resize", "container a: exclusive CPUs 1-2 (2) → 1-4 (4)"},
	} {
		e, ok := got[key]
		if !ok {
			t.Errorf("no event %q among %v", key, got)
			continue
		}
		if e.Type != want.typ || e.Action != want.action || e.Note != want.note {
			t.Errorf("event %q: %s %s %q, want %s %s %q", key, e.Type, e.Action, e.Note, want.typ, want.action, want.note)
		}
	}
}

// TestEventsRateLimited: a pod gets a burst of events, then one every few
// minutes; the rest are dropped and counted, and other pods are not held
// back by it.
func TestEventsRateLimited(t *testing.T) {
	c := &clock{now: time.Unix(1e9, 0)}
	client := fake.NewClientset()
	a, _ := started(t, client, Options{Now: c.Now})
	r := &policy.Refusal{Verdict: policy.Infeasible, Reason: policy.ReasonTopologyAffinity, Message: "m"}
	busy, other := policy.Pod{UID: "uid-busy", Namespace: "ns", Name: "busy"}, policy.Pod{UID: "uid-other", Namespace: "ns", Name: "other"}
	for range eventBurst + 10 {
		a.Refused(busy, "a", "UpdateContainer", r)
	}
	a.Refused(other, "a", "UpdateContainer", r)
	sent := a.metrics.events.WithLabelValues(ReasonResizeRefused, eventSent)
	dropped := a.metrics.events.WithLabelValues(ReasonResizeRefused, eventDropped)
	if s, d := testutil.ToFloat64(sent), testutil.ToFloat64(dropped); s != eventBurst+1 || d != 10 {
		t.Errorf("sent %v and dropped %v events, want %d and 10", s, d, eventBurst+1)
	}
	c.add(eventEvery)
	a.Refused(busy, "a", "UpdateContainer", r)
	a.Refused(busy, "a", "UpdateContainer", r)
	if s := testutil.ToFloat64(sent); s != eventBurst+2 {
		t.Errorf("after %v: sent %v events, want one more", eventEvery, s)
	}
	// The isomorphic events of a pod are one event series in the API.
	waitFor(t, "the busy pod's event series", func() bool {
		for _, e := range eventsIn(t, client) {
			if e.Regarding.Name == "busy" && e.Series != nil && e.Series.Count >= 2 {
				return true
			}
		}
		return false
	})
	var busyEvents int
	for _, e := range eventsIn(t, client) {
		if e.Regarding.Name == "busy" {
			busyEvents++
		}
	}
	if busyEvents != 1 {
		t.Errorf("%d events of the busy pod in the API, want one series", busyEvents)
	}
}

// TestEventNoteBounded: events.k8s.io/v1 takes notes of at most 1 kB.
func TestEventNoteBounded(t *testing.T) {
	client := fake.NewClientset()
	a, _ := started(t, client, Options{})
	r := &policy.Refusal{Verdict: policy.Infeasible, Reason: policy.ReasonTopologyAffinity, Message: strings.Repeat("x", 4000)}
	a.Refused(policy.Pod{UID: "u", Namespace: "ns", Name: "p"}, "a", "UpdateContainer", r)
	waitFor(t, "the event", func() bool { return len(eventsIn(t, client)) == 1 })
	if n := len(eventsIn(t, client)[0].Note); n > maxNoteBytes {
		t.Errorf("note of %d bytes", n)
	}
}
