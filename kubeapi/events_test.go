package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// TestEventRejectionsKeepEventsAvailable: the API server refusing one
// event (its namespace being deleted) is counted as rejected and leaves
// the events available; the API server failing (a 503) marks them
// unavailable.
func TestEventRejectionsKeepEventsAvailable(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	var fail error // what the creates return
	setFail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		fail = err
	}
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		return fail != nil, nil, fail
	})
	a, _ := started(t, client, Options{})
	available := a.metrics.available.WithLabelValues(string(FeatureEvents))
	rejected := a.metrics.events.WithLabelValues(ReasonResized, eventRejectedOutcome)
	resize := func(name string) {
		a.Resized(policy.Pod{UID: "uid-" + name, Namespace: "ns", Name: name}, "a", cpuset.New(1), cpuset.New(1, 2))
	}

	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "p.1",
		errors.New("unable to create new content in namespace ns because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"}}
	setFail(terminating)
	resize("p")
	waitFor(t, "the refused event counted", func() bool { return testutil.ToFloat64(rejected) == 1 })
	if v := testutil.ToFloat64(available); v != 1 {
		t.Errorf("kubernetes_api_available{feature=events} = %v after one refused event, want 1", v)
	}

	setFail(apierrors.NewServiceUnavailable("etcd is down"))
	resize("q")
	waitFor(t, "events unavailable", func() bool { return testutil.ToFloat64(available) == 0 })
}

// TestEventNamesWithinTheAPIsBounds: a 253-character pod name and node
// name still give an event name and a reporting instance the API server
// accepts, distinct for distinct nodes.
func TestEventNamesWithinTheAPIsBounds(t *testing.T) {
	long := strings.Repeat("a", 250)
	if name := eventName(long+"bc", time.Unix(1e9, 5)); len(name) > maxEventName || !strings.HasPrefix(name, long[:200]) {
		t.Errorf("event name of a 252-character pod: %d characters, %q", len(name), name)
	}
	if got := eventName("p", time.Unix(0, 0x2a)); got != "p.2a" {
		t.Errorf("event name of pod p = %q, want p.2a (the kubelet's form)", got)
	}
	one, other := reportingInstance(long+"x"), reportingInstance(long+"y")
	if len(one) > maxReportingInstance || len(other) > maxReportingInstance || one == other {
		t.Errorf("reporting instances of two long node names: %q (%d), %q (%d): want distinct, at most %d", one, len(one), other, len(other), maxReportingInstance)
	}
	if got := reportingInstance("node-1"); got != "nri-cpumanager-node-1" {
		t.Errorf("reporting instance on node-1 = %q", got)
	}
}

// TestEventOnTheNode: what the plugin's checks at start found wrong is a
// Warning event on the Node, in the default namespace, from the plugin's
// component on this node.
func TestEventOnTheNode(t *testing.T) {
	client := fake.NewClientset()
	a, _ := started(t, client, Options{})
	a.NodeCheckFailed("kubelet: cpuManagerPolicy: static (/host/var/lib/kubelet/config.yaml): two CPU managers would fight over the same cpusets")
	var events []eventsv1.Event
	waitFor(t, "the node's event", func() bool {
		list, err := client.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
		events = list.Items
		return err == nil && len(events) == 1
	})
	e := events[0]
	if e.Regarding.Kind != "Node" || e.Regarding.Name != testNode || e.Type != corev1.EventTypeWarning || e.Reason != ReasonNodeCheckFailed ||
		e.ReportingController != Component || !strings.HasPrefix(e.Name, testNode+".") || !strings.Contains(e.Note, "cpuManagerPolicy: static") {
		t.Errorf("event %s/%s: %s %s regarding %+v from %s: %q", e.Namespace, e.Name, e.Type, e.Reason, e.Regarding, e.ReportingController, e.Note)
	}
}

// TestEventsWrittenWithinTheAPIsBounds: the events the plugin writes have
// a name the API server accepts (a DNS subdomain: at most 253 characters,
// ending in a letter or digit) and a reportingInstance of at most 128
// characters, whatever the pod's and the node's names (each up to 253
// characters); short names keep the kubelet's form, and two long node
// names keep distinct instances.
func TestEventsWrittenWithinTheAPIsBounds(t *testing.T) {
	const (
		maxName     = 253 // metadata.name of an event: a DNS subdomain
		maxInstance = 128 // reportingInstance, events.k8s.io/v1
	)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	stamp := fmt.Sprintf(".%x", now.UnixNano())
	longNode := strings.Repeat("n", 252)
	instances := map[string]string{}
	for _, tc := range []struct {
		name, pod, node string
	}{
		{"short names", "p", "node-1"},
		{"253-character pod name", strings.Repeat("p", 253), "node-1"},
		{"pod name cut at a dash", strings.Repeat("p", maxName-len(stamp)-1) + "-" + strings.Repeat("q", len(stamp)), "node-1"},
		{"pod name cut at a dot", strings.Repeat("p", maxName-len(stamp)-1) + "." + strings.Repeat("q", len(stamp)), "node-1"},
		{"253-character node name", "p", longNode + "x"},
		{"another 253-character node name", "p", longNode + "y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if errs := validation.IsDNS1123Subdomain(tc.pod); len(errs) > 0 || len(tc.pod) > maxName {
				t.Fatalf("test pod name %q is no pod name: %v", tc.pod, errs)
			}
			client := fake.NewClientset()
			a, _ := started(t, client, Options{NodeName: tc.node, Now: func() time.Time { return now }})
			a.Resized(policy.Pod{UID: "uid-" + tc.name, Namespace: "ns", Name: tc.pod}, "a", cpuset.New(1), cpuset.New(1, 2))
			waitFor(t, "the event", func() bool { return len(eventsIn(t, client)) == 1 })
			ev := eventsIn(t, client)[0]

			if errs := validation.IsDNS1123Subdomain(ev.Name); len(errs) > 0 || len(ev.Name) > maxName {
				t.Errorf("event name %q (%d characters) is refused by the API server: %v", ev.Name, len(ev.Name), errs)
			}
			kept := strings.TrimSuffix(ev.Name, stamp)
			if kept == ev.Name || !strings.HasPrefix(tc.pod, kept) || len(kept) < min(len(tc.pod), maxName-len(stamp)-1) {
				t.Errorf("event name %q, want as much of the pod's name as fits, then %q", ev.Name, stamp)
			}
			if len(tc.pod)+len(stamp) <= maxName && ev.Name != tc.pod+stamp {
				t.Errorf("event name %q, want %q (the kubelet's form)", ev.Name, tc.pod+stamp)
			}

			if len(ev.ReportingInstance) > maxInstance {
				t.Errorf("reportingInstance %q has %d characters, the API server accepts %d", ev.ReportingInstance, len(ev.ReportingInstance), maxInstance)
			}
			if full := Component + "-" + tc.node; len(full) <= maxInstance && ev.ReportingInstance != full {
				t.Errorf("reportingInstance %q, want %q", ev.ReportingInstance, full)
			}
			instances[tc.node] = ev.ReportingInstance
		})
	}
	if one, other := instances[longNode+"x"], instances[longNode+"y"]; one == other {
		t.Errorf("two long node names share the reportingInstance %q", one)
	}
}
