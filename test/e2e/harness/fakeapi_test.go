package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// TestFakeAPIServer: the fake API server lists and watches a node's pods
// (a streaming list that ends with the initial-events-end bookmark, a
// watch from a resource version that replays the changes since, a watch
// that ends at its timeoutSeconds), keeps events and their merge
// patches, and answers anything else 404, recording it. (The plugin's
// own client against it: e2etest's TestAPIPodsAreTheScenariosSpecs.)
func TestFakeAPIServer(t *testing.T) {
	s, err := StartFakeAPIServer(t.TempDir(), "n1", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if data, err := os.ReadFile(s.Kubeconfig); err != nil || !strings.Contains(string(data), "server: \""+s.URL+"\"") {
		t.Errorf("kubeconfig %q (%v) does not name %s", data, err, s.URL)
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID(name + "-uid")}, Spec: corev1.PodSpec{NodeName: node}}
	}
	rvA, err := s.AddPod(pod("a", "n1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddPod(pod("a", "n1")); err == nil {
		t.Errorf("a pod added twice")
	}
	if _, err := s.AddPod(pod("other", "n2")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	selector := "fieldSelector=" + url.QueryEscape("spec.nodeName=n1")

	// The list: the node's pods, at the last resource version.
	var list corev1.PodList
	get(t, s.URL+"/api/v1/pods?"+selector, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].Name != "a" || list.Kind != "PodList" || list.ResourceVersion != "3" {
		t.Errorf("list: %+v", list)
	}

	// The streaming list, then a change.
	events, stop := watchLines(ctx, t, s.URL+"/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&"+selector)
	wantEvent(t, events, "ADDED", "a", "", false)
	wantEvent(t, events, "BOOKMARK", "", "3", true)
	if err := s.WaitWatched(ctx); err != nil {
		t.Fatal(err)
	}
	rvB, err := s.AddPod(pod("b", "n1"))
	if err != nil {
		t.Fatal(err)
	}
	wantEvent(t, events, "ADDED", "b", "", false)
	if err := s.WaitDelivered(ctx, rvB); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeletePod("default", "a"); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, events, "DELETED", "a", "", false)
	stop()

	// A watch from a resource version replays the node's changes since.
	events, stop = watchLines(ctx, t, fmt.Sprintf("%s/api/v1/pods?watch=true&resourceVersion=%d&%s", s.URL, rvA, selector))
	wantEvent(t, events, "ADDED", "b", "", false)
	wantEvent(t, events, "DELETED", "a", "", false)
	stop()

	// A watch ends at its timeout.
	events, stop = watchLines(ctx, t, fmt.Sprintf("%s/api/v1/pods?watch=true&resourceVersion=%d&timeoutSeconds=1&%s", s.URL, rvB, selector))
	defer stop()
	wantEvent(t, events, "DELETED", "a", "", false)
	if line, ok := <-events; ok {
		t.Errorf("after its timeout, the watch sent %s", line)
	}

	get(t, s.URL+"/api/v1/pods?fieldSelector=metadata.name%3Da", http.StatusBadRequest, nil)

	// Events: created, patched, a conflict, an unknown one.
	body := `{"metadata":{"name":"e1","namespace":"default"},"reason":"AdmissionRefused","note":"no","series":null}`
	send(t, http.MethodPost, s.URL+"/apis/events.k8s.io/v1/namespaces/default/events", "application/json", body, http.StatusCreated)
	send(t, http.MethodPost, s.URL+"/apis/events.k8s.io/v1/namespaces/default/events", "application/json", body, http.StatusConflict)
	send(t, http.MethodPatch, s.URL+"/apis/events.k8s.io/v1/namespaces/default/events/e1", "application/merge-patch+json", `{"series":{"count":2},"note":null}`, http.StatusOK)
	send(t, http.MethodPatch, s.URL+"/apis/events.k8s.io/v1/namespaces/default/events/e2", "application/merge-patch+json", `{}`, http.StatusNotFound)
	evs := s.Events()
	if len(evs) != 1 || evs[0].Reason != "AdmissionRefused" || evs[0].Note != "" || evs[0].Series == nil || evs[0].Series.Count != 2 {
		t.Errorf("events: %+v", evs)
	}

	// The node, without labels.
	var node corev1.Node
	get(t, s.URL+"/api/v1/nodes/n1", http.StatusOK, &node)
	if node.Name != "n1" || node.UID == "" || len(node.Labels) != 0 {
		t.Errorf("node %+v", node.ObjectMeta)
	}

	// Anything else: 404, recorded.
	var st metav1.Status
	get(t, s.URL+"/api/v1/nodes/n2", http.StatusNotFound, &st)
	if st.Reason != metav1.StatusReasonNotFound {
		t.Errorf("status %+v", st)
	}
	if un := s.Unserved(); len(un) != 1 || un[0] != "GET /api/v1/nodes/n2" {
		t.Errorf("unserved %v", un)
	}
}

// get GETs url, wants code, and decodes the answer into out (when set).
func get(t *testing.T, url string, code int, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != code {
		t.Fatalf("GET %s: %s %s, want %d", url, resp.Status, data, code)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
}

// send sends a request with a body and wants code.
func send(t *testing.T, method, url, contentType, body string, code int) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != code {
		t.Errorf("%s %s: %s %s, want %d", method, url, resp.Status, data, code)
	}
}

// watchLines opens a watch and returns its lines, the channel closed when
// the watch ends, and a function that ends it.
func watchLines(ctx context.Context, t *testing.T, url string) (<-chan string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("watch %s: %s, %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines, cancel
}

// wantEvent reads the next watch event and checks its type, its pod's name
// and resource version (when given) and whether it is the bookmark that
// ends the initial events.
func wantEvent(t *testing.T, events <-chan string, typ, name, rv string, initialEnd bool) {
	t.Helper()
	line, ok := <-events
	if !ok {
		t.Fatalf("the watch ended, want a %s event", typ)
	}
	var e struct {
		Type   string     `json:"type"`
		Object corev1.Pod `json:"object"`
	}
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatalf("watch event %s: %v", line, err)
	}
	o := e.Object
	if e.Type != typ || o.Name != name || rv != "" && o.ResourceVersion != rv || o.Kind != "Pod" || o.APIVersion != "v1" ||
		(o.Annotations[metav1.InitialEventsAnnotationKey] == "true") != initialEnd {
		t.Errorf("watch event %s, want %s of %q (resource version %q, initial events end %v)", line, typ, name, rv, initialEnd)
	}
}
