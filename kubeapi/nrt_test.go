package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/sirupsen/logrus"
	"sync"
	"testing"
	"time"

	nrtv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	nrtfake "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned/fake"
	nrtclient "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned/typed/topology/v1alpha2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// fakeTopology is TopologyClient on the module's fake clientset: the
// plugin's objects go through JSON into the module's types, decoded
// strictly, so a field the module does not know fails the test.
type fakeTopology struct {
	c nrtclient.NodeResourceTopologyInterface
}

func toModule(nrt *NodeResourceTopology) (*nrtv1alpha2.NodeResourceTopology, error) {
	data, err := encodeNRT(nrt)
	if err != nil {
		return nil, err
	}
	out := &nrtv1alpha2.NodeResourceTopology{}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err != nil {
		return nil, fmt.Errorf("the module's NodeResourceTopology does not take %s: %w", data, err)
	}
	return out, nil
}

func fromModule(nrt *nrtv1alpha2.NodeResourceTopology, err error) (*NodeResourceTopology, error) {
	if err != nil {
		return nil, err
	}
	return decodeNRT(json.Marshal(nrt))
}

func (f fakeTopology) Get(ctx context.Context, name string) (*NodeResourceTopology, error) {
	return fromModule(f.c.Get(ctx, name, metav1.GetOptions{}))
}

func (f fakeTopology) Create(ctx context.Context, nrt *NodeResourceTopology) (*NodeResourceTopology, error) {
	m, err := toModule(nrt)
	if err != nil {
		return nil, err
	}
	return fromModule(f.c.Create(ctx, m, metav1.CreateOptions{}))
}

func (f fakeTopology) Update(ctx context.Context, nrt *NodeResourceTopology) (*NodeResourceTopology, error) {
	m, err := toModule(nrt)
	if err != nil {
		return nil, err
	}
	return fromModule(f.c.Update(ctx, m, metav1.UpdateOptions{}))
}

func (f fakeTopology) Delete(ctx context.Context, name string) error {
	return f.c.Delete(ctx, name, metav1.DeleteOptions{})
}

// view is a plugin's topology that a test changes.
type view struct {
	mu sync.Mutex
	v  policy.TopologyView
}

func (v *view) get() policy.TopologyView {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.v
}

func (v *view) set(f func(*policy.TopologyView)) {
	v.mu.Lock()
	f(&v.v)
	v.mu.Unlock()
}

func twoNodes() policy.TopologyView {
	return policy.TopologyView{Policy: "single-numa-node", Scope: "pod", Zones: []policy.NUMAZone{
		{Node: 0, Capacity: 8, Allocatable: 7, Available: 5, Distances: map[int]int{0: 10, 1: 21}},
		{Node: 1, Capacity: 8, Allocatable: 8, Available: 8, Distances: map[int]int{1: 10, 0: 21}},
	}}
}

func TestTopologyObject(t *testing.T) {
	nrt := Topology("n1", twoNodes())
	if nrt.Name != "n1" || len(nrt.Zones) != 2 {
		t.Fatalf("object %+v", nrt)
	}
	for i, want := range []struct {
		name             string
		cap, alloc, free int64
	}{{"node-0", 8, 7, 5}, {"node-1", 8, 8, 8}} {
		z := nrt.Zones[i]
		if z.Name != want.name || z.Type != "Node" || len(z.Resources) != 1 {
			t.Errorf("zone %d: %+v", i, z)
			continue
		}
		r := z.Resources[0]
		if r.Name != "cpu" || r.Capacity.Value() != want.cap || r.Allocatable.Value() != want.alloc || r.Available.Value() != want.free {
			t.Errorf("zone %s: cpu %s/%s/%s, want %d/%d/%d", z.Name, r.Capacity.String(), r.Allocatable.String(), r.Available.String(), want.cap, want.alloc, want.free)
		}
	}
	if got := fmt.Sprint(nrt.Zones[1].Costs); got != "[{node-0 21} {node-1 10}]" {
		t.Errorf("zone node-1's costs %s, want the NUMA distances by node", got)
	}
	attrs := map[string]string{}
	for _, a := range nrt.Attributes {
		attrs[a.Name] = a.Value
	}
	if attrs["topologyManagerPolicy"] != "single-numa-node" || attrs["topologyManagerScope"] != "pod" || len(attrs) != 2 {
		t.Errorf("attributes %v", attrs)
	}
	if len(nrt.TopologyPolicies) != 1 || nrt.TopologyPolicies[0] != string(nrtv1alpha2.SingleNUMANodePodLevel) {
		t.Errorf("topologyPolicies %v", nrt.TopologyPolicies)
	}
}

// nodeUIDs is a NodeReader of fixed UIDs.
type nodeUIDs map[string]types.UID

func (n nodeUIDs) UID(_ context.Context, name string) (types.UID, error) {
	if uid, ok := n[name]; ok {
		return uid, nil
	}
	return "", apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
}

// TestTopologyExport: the object is created at start, owned by its Node
// (the garbage collector deletes it with the Node), updated after a change
// the plugin reports (and not written again without one), and removed on
// exit when asked to.
func TestTopologyExport(t *testing.T) {
	topo := nrtfake.NewSimpleClientset()
	v := &view{v: twoNodes()}
	clients := fakeClients(fake.NewClientset(), topo)
	clients.Nodes = nodeUIDs{testNode: "node-uid"}
	a, err := New(Options{Clients: clients, NodeName: testNode, Log: discard(), RemoveTopologyOnExit: true, Registerer: newReg()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx, v.get) }()
	api := topo.TopologyV1alpha2().NodeResourceTopologies()
	available := func(zone int) int64 {
		nrt, err := api.Get(context.Background(), testNode, metav1.GetOptions{})
		if err != nil {
			return -1
		}
		return nrt.Zones[zone].Resources[0].Available.Value()
	}
	waitFor(t, "the object", func() bool { return available(0) == 5 })
	writes := a.metrics.nrtUpdates.WithLabelValues("ok")
	if n := testutil.ToFloat64(writes); n != 1 {
		t.Errorf("%v writes at start, want 1", n)
	}
	nrt, err := api.Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nrt.OwnerReferences) != 1 || nrt.OwnerReferences[0] != (metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: testNode, UID: "node-uid"}) {
		t.Errorf("owner references %+v, want the Node %s", nrt.OwnerReferences, testNode)
	}
	a.Changed() // nothing changed: no write
	v.set(func(tv *policy.TopologyView) { tv.Zones[0].Available = 3 })
	a.Changed()
	waitFor(t, "the update", func() bool { return available(0) == 3 })
	if n := testutil.ToFloat64(writes); n != 2 {
		t.Errorf("%v writes after one change, want 2", n)
	}
	cancel()
	<-done
	if _, err := api.Get(context.Background(), testNode, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after exit with removeOnExit: %v, want not found", err)
	}
}

// TestTopologyExportOwnsTheObjectByItsNode: the plugin's object ends up
// owned by its Node, and by it alone, whether the plugin creates it or
// finds it written by a version without owner references (whose content
// is otherwise current) or owned by a Node of the same name since
// deleted; labels others set are kept.
func TestTopologyExportOwnsTheObjectByItsNode(t *testing.T) {
	node := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: testNode, UID: "node-uid"}
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference // of the object there at start
		there  bool                    // an object of the plugin is there at start
	}{
		{"created", nil, false},
		{"written without an owner", nil, true},
		{"owned by a deleted Node", []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: testNode, UID: "old-node-uid"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := nrtfake.NewSimpleClientset()
			if tc.there {
				old := Topology(testNode, twoNodes())
				old.Labels["team"] = "x"
				old.OwnerReferences = tc.owners
				obj, err := toModule(old)
				if err != nil {
					t.Fatal(err)
				}
				topo = nrtfake.NewSimpleClientset(obj)
			}
			clients := fakeClients(fake.NewClientset(), topo)
			clients.Nodes = nodeUIDs{testNode: node.UID}
			a, err := New(Options{Clients: clients, NodeName: testNode, Log: discard(), Registerer: newReg()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = a.Run(ctx, func() policy.TopologyView { return twoNodes() }) }()
			defer func() { cancel(); <-done }()
			api := topo.TopologyV1alpha2().NodeResourceTopologies()
			var owners []metav1.OwnerReference
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				nrt, err := api.Get(context.Background(), testNode, metav1.GetOptions{})
				if err == nil {
					owners = nrt.OwnerReferences
					if len(owners) == 1 && owners[0] == node {
						if tc.there && nrt.Labels["team"] != "x" {
							t.Errorf("labels %v, want team=x kept", nrt.Labels)
						}
						return
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("owner references %+v after 30 s, want the Node %s alone", owners, testNode)
				}
			}
		})
	}
}

// TestTopologyExportKeepsOthersLabels: an object that is there already
// (another plugin run, an edit) is updated in place, keeping labels the
// plugin does not own.
func TestTopologyExportKeepsOthersLabels(t *testing.T) {
	own := Topology(testNode, policy.TopologyView{Policy: "none", Scope: "container"})
	own.Labels["team"] = "x"
	old, err := toModule(own)
	if err != nil {
		t.Fatal(err)
	}
	topo := nrtfake.NewSimpleClientset(old)
	a, err := New(Options{Clients: fakeClients(fake.NewClientset(), topo), NodeName: testNode, Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx, func() policy.TopologyView { return twoNodes() }) }()
	api := topo.TopologyV1alpha2().NodeResourceTopologies()
	waitFor(t, "the update", func() bool {
		nrt, err := api.Get(context.Background(), testNode, metav1.GetOptions{})
		return err == nil && len(nrt.Zones) == 2
	})
	cancel()
	<-done
	nrt, err := api.Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err) // not removed: removeOnExit is off
	}
	if nrt.Labels["team"] != "x" || nrt.Labels["app.kubernetes.io/managed-by"] != Component {
		t.Errorf("labels %v", nrt.Labels)
	}
}

// TestTopologyExportLeavesAForeignObjectAlone: an object another tool
// wrote (node-feature-discovery's topology updater) is neither updated
// nor removed on exit; the gauge says so.
func TestTopologyExportLeavesAForeignObjectAlone(t *testing.T) {
	theirs := Topology(testNode, policy.TopologyView{Policy: "none", Scope: "container"})
	theirs.Labels[managedBy] = "node-feature-discovery"
	old, err := toModule(theirs)
	if err != nil {
		t.Fatal(err)
	}
	topo := nrtfake.NewSimpleClientset(old)
	a, err := New(Options{Clients: fakeClients(fake.NewClientset(), topo), NodeName: testNode, Log: discard(), RemoveTopologyOnExit: true, Registerer: newReg()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx, func() policy.TopologyView { return twoNodes() }) }()
	waitFor(t, "the foreign object seen", func() bool { return testutil.ToFloat64(a.metrics.nrtForeign) == 1 })
	a.Changed()
	cancel()
	<-done
	api := topo.TopologyV1alpha2().NodeResourceTopologies()
	nrt, err := api.Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the other tool's object was removed on exit: %v", err)
	}
	if nrt.Labels[managedBy] != "node-feature-discovery" || len(nrt.Zones) != 0 {
		t.Errorf("the other tool's object was rewritten: labels %v, %d zones", nrt.Labels, len(nrt.Zones))
	}
	if n := testutil.ToFloat64(a.metrics.nrtUpdates.WithLabelValues("ok")) + testutil.ToFloat64(a.metrics.nrtUpdates.WithLabelValues("error")); n != 0 {
		t.Errorf("%v writes of another tool's object, want none", n)
	}
}

// TestTopologyExportFollowsAReregisteredNode: a Node deleted and
// registered again under the same name has a new UID; the next forced
// sync (the minutely resync) reads it again and owns the object by the
// new Node, instead of writing back the owner the garbage collector just
// deleted the object for.
func TestTopologyExportFollowsAReregisteredNode(t *testing.T) {
	topo := nrtfake.NewSimpleClientset()
	nodes := nodeUIDs{testNode: "first-uid"}
	x := newExporter(fakeTopology{topo.TopologyV1alpha2().NodeResourceTopologies()}, testNode, newHealth(logrus.NewEntry(discard()), nil), nil)
	x.view, x.nodes = func() policy.TopologyView { return twoNodes() }, nodes
	ownerOfObject := func() types.UID {
		t.Helper()
		nrt, err := topo.TopologyV1alpha2().NodeResourceTopologies().Get(context.Background(), testNode, metav1.GetOptions{})
		if err != nil || len(nrt.OwnerReferences) != 1 {
			t.Fatalf("object %+v, %v: want one owner", nrt, err)
		}
		return nrt.OwnerReferences[0].UID
	}
	if err := x.sync(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if got := ownerOfObject(); got != "first-uid" {
		t.Fatalf("owner %s, want first-uid", got)
	}
	nodes[testNode] = "second-uid"
	if err := x.sync(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if got := ownerOfObject(); got != "first-uid" {
		t.Errorf("a sync that is not forced read the Node again: owner %s", got)
	}
	if err := x.sync(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if got := ownerOfObject(); got != "second-uid" {
		t.Errorf("owner %s after a forced sync, want the re-registered Node's second-uid", got)
	}
}

// TestTopologyExportRetriesWithJitter: the export's retries after failed
// writes double from a second up to maxBackoff, each stretched at random
// by up to half: after an outage of the API server the nodes of a
// cluster, which all failed at once, do not all retry at once.
func TestTopologyExportRetriesWithJitter(t *testing.T) {
	firsts := map[time.Duration]bool{}
	for range 20 {
		b := newRetryBackoff()
		base := time.Second
		for step := range 10 {
			d := b.Step()
			if d < base || d > base*3/2 {
				t.Fatalf("retry %d waits %v, want within [%v, %v]", step+1, d, base, base*3/2)
			}
			if step == 0 {
				firsts[d] = true
			}
			base = min(2*base, maxBackoff)
		}
	}
	if len(firsts) < 10 {
		t.Errorf("20 nodes' first retries take %d distinct waits: they retry in lockstep", len(firsts))
	}
}
