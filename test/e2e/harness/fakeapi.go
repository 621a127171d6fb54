package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// FakeAPIServer is the part of a Kubernetes API server the plugin's
// kubeapi package uses, in the test process, over plain HTTP on loopback,
// for the suites that drive containerd over CRI without a cluster: the
// pods bound to one node, listed and watched, and the events the plugin
// writes. It serves
//
//   - GET /api/v1/nodes/NODE: the Node, without labels, and its watch
//     (fieldSelector=metadata.name=NODE), on which nothing changes;
//   - GET /api/v1/pods?fieldSelector=spec.nodeName=NODE: the node's pods
//     (a PodList, JSON; the client asks for protobuf first and takes JSON);
//   - the same with watch=true: newline-delimited watch events from the
//     resourceVersion asked, or, with sendInitialEvents=true (client-go's
//     streaming list, the reflector's first try), an ADDED event per pod
//     then the BOOKMARK whose k8s.io/initial-events-end annotation ends
//     the initial list, then every change, until timeoutSeconds or the
//     client goes;
//   - POST /apis/events.k8s.io/v1/namespaces/NS/events and PATCH (a JSON
//     merge patch) of .../events/NAME: kept, and answered as the API
//     server answers;
//
// and answers everything else 404 (a Status), recording it (Unserved).
// A test adds and deletes pods (AddPod, DeletePod) and waits until a
// watch of the node's pods has sent a change (WaitDelivered).
type FakeAPIServer struct {
	// URL is the server's address, http://127.0.0.1:PORT.
	URL string
	// Kubeconfig is a kubeconfig file that names the server, for
	// $KUBECONFIG.
	Kubeconfig string
	// Node is the name of the node whose pods the server holds.
	Node string

	srv  *http.Server
	logf Logf
	done chan struct{} // closed when Serve returns

	mu sync.Mutex
	// rv is the resource version of the last change.
	rv uint64
	// pods are by namespace/name; history is every change of them, in
	// resource version order (a scenario makes few).
	pods    map[string]*corev1.Pod
	history []podChange
	// changed is closed and replaced at every change of the pods and at
	// every change a watch sent.
	changed chan struct{}
	// watches are the open watches of the node's pods, by a serial
	// number: the resource version up to which each has sent every
	// change, -1 until it has sent its initial state.
	watches   map[int]int64
	nextWatch int
	events    map[string]*eventsv1.Event // by namespace/name
	unserved  []string
}

// podChange is a change of a pod, as a watch sends it.
type podChange struct {
	typ watch.EventType
	rv  uint64
	pod *corev1.Pod
}

// StartFakeAPIServer starts a FakeAPIServer for node on a free loopback
// port and writes its kubeconfig into dir. Close stops it.
func StartFakeAPIServer(dir, node string, logf Logf) (*FakeAPIServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake API server: listen: %w", err)
	}
	s := &FakeAPIServer{
		URL: "http://" + ln.Addr().String(), Kubeconfig: filepath.Join(dir, "kubeconfig"), Node: node,
		logf: logf.orDiscard(), done: make(chan struct{}),
		rv: 1, pods: map[string]*corev1.Pod{}, changed: make(chan struct{}),
		watches: map[int]int64{}, events: map[string]*eventsv1.Event{},
	}
	if err := os.WriteFile(s.Kubeconfig, []byte(fakeKubeconfig(s.URL)), 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("fake API server: write its kubeconfig: %w", err)
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // http.ErrServerClosed once closed
	}()
	s.logf("fake Kubernetes API server for node %s on %s, kubeconfig %s", node, s.URL, s.Kubeconfig)
	return s, nil
}

// fakeKubeconfig is a kubeconfig naming server, without credentials.
func fakeKubeconfig(server string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: "` + server + `"}
users:
- name: fake
  user: {}
contexts:
- name: fake
  context: {cluster: fake, user: fake}
current-context: fake
`
}

// Close stops the server and ends its watches.
func (s *FakeAPIServer) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// AddPod adds a pod (a copy of it, with its resource version set) and
// returns the resource version of its addition. A pod of that namespace
// and name must not be there.
func (s *FakeAPIServer) AddPod(pod *corev1.Pod) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := pod.Namespace + "/" + pod.Name
	if _, ok := s.pods[k]; ok {
		return 0, fmt.Errorf("fake API server: pod %s exists already", k)
	}
	p := pod.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	s.rv++
	p.ResourceVersion = strconv.FormatUint(s.rv, 10)
	s.pods[k] = p
	s.history = append(s.history, podChange{typ: watch.Added, rv: s.rv, pod: p})
	s.notifyLocked()
	return s.rv, nil
}

// DeletePod deletes a pod, as the API server does once the kubelet
// confirmed its containers are gone, and returns the resource version of
// the deletion.
func (s *FakeAPIServer) DeletePod(namespace, name string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := namespace + "/" + name
	old, ok := s.pods[k]
	if !ok {
		return 0, fmt.Errorf("fake API server: no pod %s", k)
	}
	delete(s.pods, k)
	p := old.DeepCopy()
	s.rv++
	p.ResourceVersion = strconv.FormatUint(s.rv, 10)
	now := metav1.Now()
	p.DeletionTimestamp = &now
	s.history = append(s.history, podChange{typ: watch.Deleted, rv: s.rv, pod: p})
	s.notifyLocked()
	return s.rv, nil
}

// WaitDelivered waits until a watch of the node's pods has sent every
// change up to resource version rv (its initial state included), or ctx
// ends.
func (s *FakeAPIServer) WaitDelivered(ctx context.Context, rv uint64) error {
	for {
		s.mu.Lock()
		ch := s.changed
		sent := slices.Collect(maps.Values(s.watches))
		s.mu.Unlock()
		if slices.ContainsFunc(sent, func(v int64) bool { return v >= 0 && uint64(v) >= rv }) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("no watch of node %s's pods sent the changes up to resource version %d (open watches: %d): %w", s.Node, rv, len(sent), ctx.Err())
		}
	}
}

// WaitWatched waits until a watch of the node's pods has sent the pods as
// they are now: a client that watches them (the plugin) is up to date
// once it read them.
func (s *FakeAPIServer) WaitWatched(ctx context.Context) error {
	s.mu.Lock()
	rv := s.rv
	s.mu.Unlock()
	return s.WaitDelivered(ctx, rv)
}

// Events returns the events written to the server, ordered by namespace
// and name.
func (s *FakeAPIServer) Events() []eventsv1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []eventsv1.Event
	for _, k := range slices.Sorted(maps.Keys(s.events)) {
		out = append(out, *s.events[k].DeepCopy())
	}
	return out
}

// Unserved returns the requests the server answered 404 because it does
// not serve them ("METHOD path?query"): requests the plugin made that the
// fake does not know.
func (s *FakeAPIServer) Unserved() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unserved)
}

// notifyLocked wakes everything waiting for a change; s.mu is held.
func (s *FakeAPIServer) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// serve routes a request.
func (s *FakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && path == "/api/v1/pods":
		s.listOrWatchPods(w, r)
		return
	case r.Method == http.MethodGet && path == "/api/v1/nodes/"+s.Node:
		writeJSON(w, http.StatusOK, s.node())
		return
	case r.Method == http.MethodGet && path == "/api/v1/nodes" && r.URL.Query().Get("watch") != "" && r.URL.Query().Get("fieldSelector") == "metadata.name="+s.Node:
		s.watchNode(w, r)
		return
	case len(parts) >= 6 && parts[0] == "apis" && parts[1] == "events.k8s.io" && parts[2] == "v1" && parts[3] == "namespaces" && parts[5] == "events":
		switch {
		case len(parts) == 6 && r.Method == http.MethodPost:
			s.createEvent(w, r, parts[4])
			return
		case len(parts) == 7 && r.Method == http.MethodPatch:
			s.patchEvent(w, r, parts[4], parts[6])
			return
		}
	}
	s.mu.Lock()
	s.unserved = append(s.unserved, r.Method+" "+r.URL.RequestURI())
	s.mu.Unlock()
	s.logf("fake API server: %s %s: not served", r.Method, r.URL.RequestURI())
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the fake API server does not serve "+r.Method+" "+r.URL.Path)
}

// listOrWatchPods lists or watches the pods the field selector selects.
func (s *FakeAPIServer) listOrWatchPods(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	node, err := nodeSelector(q.Get("fieldSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		s.watchPods(w, r, node)
		return
	}
	s.mu.Lock()
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(s.rv, 10)}}
	for _, p := range s.podsOn(node) {
		list.Items = append(list.Items, *p)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, &list)
}

// node is the server's Node: its name, a UID and no labels (no
// configuration group).
func (s *FakeAPIServer) node() *corev1.Node {
	return &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Node, UID: types.UID(s.Node + "-uid"), ResourceVersion: "1"}}
}

// watchNode serves a watch of the Node, which never changes: nothing is
// sent until timeoutSeconds or the client goes.
func (s *FakeAPIServer) watchNode(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if secs, err := strconv.Atoi(r.URL.Query().Get("timeoutSeconds")); err == nil && secs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(secs)*time.Second)
		defer cancel()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if flusher, ok := w.(http.Flusher); ok {
		flusher.Flush()
	}
	<-ctx.Done()
}

// nodeSelector reads the one field selector the plugin sends,
// spec.nodeName=NODE; "" selects every pod.
func nodeSelector(selector string) (string, error) {
	if selector == "" {
		return "", nil
	}
	node, ok := strings.CutPrefix(selector, "spec.nodeName=")
	if !ok || strings.ContainsAny(node, ",=!") {
		return "", fmt.Errorf("the fake API server knows the field selector spec.nodeName=NODE only, not %q", selector)
	}
	return node, nil
}

// podsOn returns the pods on node ("": every pod), ordered by namespace
// and name; s.mu is held.
func (s *FakeAPIServer) podsOn(node string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, k := range slices.Sorted(maps.Keys(s.pods)) {
		if p := s.pods[k]; node == "" || p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

// watchEvent is a watch event as the API server writes it in JSON
// (metav1.WatchEvent).
type watchEvent struct {
	Type   watch.EventType `json:"type"`
	Object any             `json:"object"`
}

// watchPods serves a watch of the pods on node.
func (s *FakeAPIServer) watchPods(w http.ResponseWriter, r *http.Request, node string) {
	q := r.URL.Query()
	ctx := r.Context()
	if secs, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && secs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(secs)*time.Second)
		defer cancel()
	}
	rv := q.Get("resourceVersion")
	streaming := q.Get("sendInitialEvents") == "true"
	s.mu.Lock()
	from := s.rv
	var initial []*corev1.Pod
	switch {
	case streaming || rv == "" || rv == "0":
		// The state now, as ADDED events (and, streaming, a bookmark).
		initial = s.podsOn(node)
	default:
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil || n > s.rv {
			s.mu.Unlock()
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("resourceVersion %q: not one of this server's (the last is %d)", rv, s.rv))
			return
		}
		from = n
	}
	id := s.nextWatch
	s.nextWatch++
	s.watches[id] = -1
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watches, id)
		s.notifyLocked()
		s.mu.Unlock()
	}()
	s.logf("fake API server: watch %d of the pods on node %q from resource version %d (streaming list: %v)", id, node, from, streaming)

	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w) // one event a line
	send := func(e watchEvent) bool { return enc.Encode(e) == nil }
	for _, p := range initial {
		if !send(watchEvent{Type: watch.Added, Object: p}) {
			return
		}
	}
	if streaming {
		bookmark := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.FormatUint(from, 10),
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}}
		if !send(watchEvent{Type: watch.Bookmark, Object: bookmark}) {
			return
		}
	}
	sent := from
	for {
		if flusher != nil {
			flusher.Flush()
		}
		s.mu.Lock()
		if s.watches[id] != int64(sent) {
			s.watches[id] = int64(sent)
			s.notifyLocked()
		}
		var next []podChange
		for _, c := range s.history {
			if c.rv > sent && (node == "" || c.pod.Spec.NodeName == node) {
				next = append(next, c)
			}
		}
		last, ch := s.rv, s.changed
		s.mu.Unlock()
		if last == sent {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return
			}
		}
		for _, c := range next {
			if !send(watchEvent{Type: c.typ, Object: c.pod}) {
				return
			}
		}
		sent = last // the changes of other nodes' pods and of events included
	}
}

// createEvent stores an event (events.k8s.io/v1).
func (s *FakeAPIServer) createEvent(w http.ResponseWriter, r *http.Request, namespace string) {
	var e eventsv1.Event
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&e); err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "decode the event: "+err.Error())
		return
	}
	if e.Namespace == "" {
		e.Namespace = namespace
	}
	if e.Namespace != namespace {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("the event's namespace %q is not the request's %q", e.Namespace, namespace))
		return
	}
	s.mu.Lock()
	if e.Name == "" && e.GenerateName != "" {
		e.Name = fmt.Sprintf("%s%d", e.GenerateName, s.rv+1)
	}
	k := namespace + "/" + e.Name
	if e.Name == "" {
		s.mu.Unlock()
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the event has no name")
		return
	}
	if _, ok := s.events[k]; ok {
		s.mu.Unlock()
		writeStatus(w, http.StatusConflict, metav1.StatusReasonAlreadyExists, fmt.Sprintf("event %s exists already", k))
		return
	}
	s.rv++
	e.ResourceVersion = strconv.FormatUint(s.rv, 10)
	e.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "events.k8s.io/v1"}
	s.events[k] = &e
	out := e.DeepCopy()
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

// patchEvent applies a JSON merge patch (the events' series) to an event.
func (s *FakeAPIServer) patchEvent(w http.ResponseWriter, r *http.Request, namespace, name string) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/merge-patch+json") {
		writeStatus(w, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "the fake API server applies JSON merge patches only, not "+ct)
		return
	}
	var patch map[string]any
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&patch); err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "decode the patch: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := namespace + "/" + name
	old, ok := s.events[k]
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("event %s not found", k))
		return
	}
	patched, err := mergePatch(old, patch)
	if err != nil {
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
		return
	}
	s.rv++
	patched.ResourceVersion = strconv.FormatUint(s.rv, 10)
	s.events[k] = patched
	writeJSON(w, http.StatusOK, patched.DeepCopy())
}

// mergePatch applies a JSON merge patch (RFC 7386) to an event.
func mergePatch(e *eventsv1.Event, patch map[string]any) (*eventsv1.Event, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	merged := mergeObjects(doc, patch)
	if data, err = json.Marshal(merged); err != nil {
		return nil, err
	}
	out := &eventsv1.Event{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("the patched event: %w", err)
	}
	return out, nil
}

// mergeObjects is RFC 7386's MergePatch of two JSON objects.
func mergeObjects(doc, patch map[string]any) map[string]any {
	if doc == nil {
		doc = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			dv, _ := doc[k].(map[string]any)
			doc[k] = mergeObjects(dv, pv)
		default:
			doc[k] = v
		}
	}
	return doc
}

// writeJSON answers with an object in JSON.
func writeJSON(w http.ResponseWriter, code int, obj any) {
	data, err := json.Marshal(obj)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// writeStatus answers with a failure Status, which client-go turns into
// the API error of its reason.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Code: int32(code)}
	data, err := json.Marshal(&st)
	if err != nil {
		data = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}
