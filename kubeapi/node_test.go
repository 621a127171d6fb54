package kubeapi

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

const testGroupLabel = "example.com/group"

// values collects what a node watch tells of its label.
type values struct {
	mu  sync.Mutex
	got []string
}

func (v *values) add(s string) {
	v.mu.Lock()
	v.got = append(v.got, s)
	v.mu.Unlock()
}

func (v *values) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.got)
}

func labelled(labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: labels, ResourceVersion: "1"}}
}

// TestNodeGroupLabel: the API tells the plugin the label's value at the
// first read and at every change of it, not at other changes of the
// node.
func TestNodeGroupLabel(t *testing.T) {
	client := fake.NewClientset(labelled(map[string]string{testGroupLabel: "canary", "other": "1"}))
	var v values
	a, _ := started(t, client, Options{GroupLabel: testGroupLabel, OnGroupLabel: v.add})
	waitFor(t, "the first read", func() bool { return len(v.list()) == 1 })
	waitFor(t, "the watch", func() bool { return testutil.ToFloat64(a.metrics.available.WithLabelValues(string(FeatureNode))) == 1 })
	ctx := context.Background()
	for _, labels := range []map[string]string{
		{testGroupLabel: "canary", "other": "2"}, // not the group's label
		{testGroupLabel: "big", "other": "2"},
		{"other": "2"}, // out of any group
	} {
		n, err := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels = labels
		if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"canary", "big", ""}
	waitFor(t, "the label's changes", func() bool { return len(v.list()) == len(want) })
	if got := v.list(); !slices.Equal(got, want) {
		t.Errorf("values %q, want %q", got, want)
	}
}

// scriptedNodes is a NodeClient whose reads a test scripts, and whose
// watches it drives.
type scriptedNodes struct {
	mu      sync.Mutex
	get     func() (*corev1.Node, error)
	watches chan *watch.RaceFreeFakeWatcher
}

func (s *scriptedNodes) setGet(f func() (*corev1.Node, error)) {
	s.mu.Lock()
	s.get = f
	s.mu.Unlock()
}

func (s *scriptedNodes) Get(context.Context, string) (*corev1.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.get()
}

func (s *scriptedNodes) Watch(context.Context, string, string) (watch.Interface, error) {
	w := watch.NewRaceFreeFake()
	s.watches <- w
	return w, nil
}

// TestNodeWatchRetries: a watch that expires is read again without a
// failure; a read the API server refuses is a failure of the feature,
// retried; the value is told only when it changes.
func TestNodeWatchRetries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, []Feature{FeatureNode})
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	nodes := &scriptedNodes{watches: make(chan *watch.RaceFreeFakeWatcher, 10)}
	nodes.setGet(func() (*corev1.Node, error) { return labelled(map[string]string{testGroupLabel: "a"}), nil })
	var v values
	w := &nodeWatch{client: nodes, node: testNode, label: testGroupLabel, health: newHealth(log.WithField("test", t.Name()), m),
		onValue: v.add, backoff: func() *wait.Backoff { return &wait.Backoff{Steps: 1 << 30} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	next := func() *watch.RaceFreeFakeWatcher {
		t.Helper()
		select {
		case fw := <-nodes.watches:
			return fw
		case <-time.After(30 * time.Second):
			t.Fatal("no watch")
		}
		return nil
	}
	available := func() float64 { return testutil.ToFloat64(m.available.WithLabelValues(string(FeatureNode))) }
	failures := func() float64 { return testutil.ToFloat64(m.failures.WithLabelValues(string(FeatureNode))) }

	fw := next()
	fw.Modify(labelled(map[string]string{testGroupLabel: "a", "other": "x"}))
	fw.Modify(labelled(map[string]string{testGroupLabel: "b"}))
	waitFor(t, "b", func() bool { return len(v.list()) == 2 })
	// Expired: read again, no failure.
	nodes.setGet(func() (*corev1.Node, error) { return labelled(map[string]string{testGroupLabel: "c"}), nil })
	fw.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	fw = next()
	if f := failures(); f != 0 {
		t.Errorf("%v failures after an expired watch, want 0", f)
	}
	// Refused: a failure, retried.
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, testNode, errors.New("no get"))
	nodes.setGet(func() (*corev1.Node, error) { return nil, forbidden })
	fw.Stop()
	waitFor(t, "the failure", func() bool { return failures() >= 1 && available() == 0 })
	nodes.setGet(func() (*corev1.Node, error) { return labelled(map[string]string{testGroupLabel: "c"}), nil })
	next()
	waitFor(t, "the node available again", func() bool { return available() == 1 })
	if got, want := v.list(), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("values %q, want %q", got, want)
	}
}
