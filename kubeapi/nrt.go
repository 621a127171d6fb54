package kubeapi

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/util/wait"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The NodeResourceTopology attributes the plugin sets, named as the
// kubelet's settings and as nri-plugins and node-feature-discovery name
// them; the scheduler's NodeResourceTopologyMatch reads them.
const (
	AttrPolicy = "topologyManagerPolicy"
	AttrScope  = "topologyManagerScope"
)

// ZoneType is the type of a NUMA node's zone.
const ZoneType = "Node"

// Topology returns the NodeResourceTopology object of node: a zone of type
// Node per NUMA node, named node-<id>, with its CPUs as the plugin sees
// them (capacity: online; allocatable: not reserved; available: free for
// an exclusive container now) and its NUMA distances to every node as
// costs (as node-feature-discovery and nri-plugins write them), the topology manager's policy and scope as
// attributes, and the deprecated topologyPolicies field older schedulers
// read.
func Topology(node string, v policy.TopologyView) *NodeResourceTopology {
	nrt := &NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{managedBy: Component}},
		Attributes: []Attr{{Name: AttrPolicy, Value: v.Policy}, {Name: AttrScope, Value: v.Scope}},
		Zones:      make([]Zone, 0, len(v.Zones)),
	}
	if p := legacyPolicy(v.Policy, v.Scope); p != "" {
		nrt.TopologyPolicies = []string{p}
	}
	for _, z := range v.Zones {
		var costs []Cost
		for _, other := range slices.Sorted(maps.Keys(z.Distances)) {
			costs = append(costs, Cost{Name: "node-" + strconv.Itoa(other), Value: int64(z.Distances[other])})
		}
		nrt.Zones = append(nrt.Zones, Zone{
			Name:  "node-" + strconv.Itoa(z.Node),
			Type:  ZoneType,
			Costs: costs,
			Resources: []ResourceInfo{{
				Name:        "cpu",
				Capacity:    *resource.NewQuantity(int64(z.Capacity), resource.DecimalSI),
				Allocatable: *resource.NewQuantity(int64(z.Allocatable), resource.DecimalSI),
				Available:   *resource.NewQuantity(int64(z.Available), resource.DecimalSI),
			}},
		})
	}
	return nrt
}

// legacyPolicy is the deprecated topologyPolicies value of a policy and
// scope (the module's TopologyManagerPolicy), as node-feature-discovery
// writes it.
func legacyPolicy(policy, scope string) string {
	pod := scope == "pod"
	switch policy {
	case "none":
		return "None"
	case "best-effort":
		if pod {
			return "BestEffortPodLevel"
		}
		return "BestEffortContainerLevel"
	case "restricted":
		if pod {
			return "RestrictedPodLevel"
		}
		return "RestrictedContainerLevel"
	case "single-numa-node":
		if pod {
			return "SingleNUMANodePodLevel"
		}
		return "SingleNUMANodeContainerLevel"
	}
	return ""
}

// The export's timing: at most one write per minWriteInterval (changes in
// between are folded into the next write: a node's object is one of
// thousands the API server keeps, and the scheduler reads it at its own
// pace), a check of the object every resyncInterval (someone may have
// deleted or edited it), and a backoff between failed writes.
const (
	minWriteInterval = 2 * time.Second
	resyncInterval   = time.Minute
	maxBackoff       = time.Minute
	removeTimeout    = 5 * time.Second
	requestTimeout   = 10 * time.Second
)

// managedBy is the label that says which tool owns a NodeResourceTopology
// object; the plugin writes and deletes only objects that carry its own
// value (Component).
const managedBy = "app.kubernetes.io/managed-by"

// exporter keeps this node's NodeResourceTopology object current. It owns
// only an object it created (labelled managed-by nri-cpumanager): one
// another tool wrote (node-feature-discovery's topology updater,
// nri-plugins) is left alone, said once in the log and shown in
// noderesourcetopology_foreign, until it is gone.
type exporter struct {
	client  TopologyClient
	node    string
	view    func() policy.TopologyView
	health  *health
	metrics *metrics
	kick    chan struct{}
	// written is the object as last written or read; nil when unknown.
	written *NodeResourceTopology
	// foreign is the owner of the object another tool wrote ("" while
	// the object is the plugin's or missing).
	foreign string
	// nodes reads the Node's UID (nil: no owner reference); nodeUID is
	// it once read, nodeWarned says the failure to read it was logged.
	nodes      NodeReader
	nodeUID    types.UID
	nodeWarned bool
}

func newExporter(client TopologyClient, node string, h *health, m *metrics) *exporter {
	return &exporter{client: client, node: node, health: h, metrics: m, kick: make(chan struct{}, 1)}
}

// changed asks for a write; it never blocks.
func (x *exporter) changed() {
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

// run writes the object at start, after changes and at every resync,
// until ctx ends; then removes it if remove is set.
func (x *exporter) run(ctx context.Context, remove bool) {
	retry := newRetryBackoff()
	backoff := time.Duration(0)
	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	force := true // read the object first: it may be there from before
	for {
		if err := x.sync(ctx, force); err != nil {
			if ctx.Err() != nil {
				break
			}
			x.health.failed(FeatureTopology, err)
			backoff = retry.Step()
		} else {
			x.health.succeeded(FeatureTopology)
			retry = newRetryBackoff()
			backoff, force = 0, false
		}
		wait := time.NewTimer(max(backoff, minWriteInterval))
		select {
		case <-ctx.Done():
		case <-wait.C:
			// Past the debounce, or the backoff: wait for work.
			select {
			case <-ctx.Done():
			case <-x.kick:
			case <-resync.C:
				force = true
			}
		}
		wait.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	if remove {
		x.remove()
	}
}

// newRetryBackoff is the export's retry after a failed write: from a
// second, doubling to maxBackoff, each wait stretched by up to half at
// random (apimachinery's wait.Backoff jitter), so that after an outage of
// the API server the nodes of a cluster do not all retry at once.
func newRetryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: maxBackoff}
}

// sync writes the object when the plugin's view differs from what was
// last written; force reads the API's copy first.
func (x *exporter) sync(ctx context.Context, force bool) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	want := Topology(x.node, x.view())
	if uid := x.ownerUID(ctx, force); uid != "" {
		want.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: x.node, UID: uid}}
	}
	if !force && (x.foreign != "" || x.written != nil && sameContent(x.written, want)) {
		return nil
	}
	api := x.client
	if force || x.written == nil {
		cur, err := api.Get(ctx, x.node)
		switch {
		case apierrors.IsNotFound(err):
			x.written = nil
		case err != nil:
			return fmt.Errorf("reading NodeResourceTopology %s: %w", x.node, err)
		default:
			x.written = cur
		}
		x.setForeign(ownerOf(x.written))
		if x.foreign != "" {
			x.written = nil
			return nil
		}
	}
	var got *NodeResourceTopology
	var err error
	switch {
	case x.written == nil:
		got, err = api.Create(ctx, want)
	case sameContent(x.written, want):
		return nil
	default:
		want.ResourceVersion = x.written.ResourceVersion
		want.Labels = mergeLabels(x.written.Labels, want.Labels)
		want.Annotations = x.written.Annotations
		got, err = api.Update(ctx, want)
	}
	x.written = nil // read it again after a failure (a conflict, a deletion)
	x.count(err)
	if err != nil {
		return fmt.Errorf("writing NodeResourceTopology %s: %w", x.node, err)
	}
	x.written = got
	return nil
}

// ownerUID returns the UID of this node's Node object, the owner of the
// NodeResourceTopology object: the garbage collector deletes the object
// with the Node. It is read again at every forced sync (reread: the
// resync every minute, a failure): a Node deleted and registered again
// has a new UID, and an object owned by the old one would be deleted by
// the garbage collector, then written again with the stale owner, over
// and over. "" while it cannot be read (said once in the log: the object
// is written without an owner meanwhile); the UID last read when it
// cannot be read again.
func (x *exporter) ownerUID(ctx context.Context, reread bool) types.UID {
	if x.nodes == nil || x.nodeUID != "" && !reread {
		return x.nodeUID
	}
	uid, err := x.nodes.UID(ctx, x.node)
	if err != nil {
		if !x.nodeWarned {
			x.nodeWarned = true
			x.health.log.WithError(err).WithField("node", x.node).Warn("cannot read this node's Node object: " +
				"its NodeResourceTopology object has no owner reference and would outlive the node until the plugin reads it")
		}
		return x.nodeUID
	}
	x.nodeUID = uid
	return uid
}

// ownerOf returns the tool that owns obj when it is not the plugin ("a
// tool that does not say" for an object without the label), "" for the
// plugin's own object or none.
func ownerOf(obj *NodeResourceTopology) string {
	if obj == nil {
		return ""
	}
	switch owner := obj.Labels[managedBy]; owner {
	case Component:
		return ""
	case "":
		return "a tool that does not say (no " + managedBy + " label)"
	default:
		return owner
	}
}

// ExportOwner reads node's NodeResourceTopology object and returns the
// tool that owns it when it is not the plugin ("" for the plugin's own);
// found is false when there is none.
func ExportOwner(ctx context.Context, c TopologyClient, node string) (owner string, found bool, err error) {
	obj, err := c.Get(ctx, node)
	switch {
	case apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("reading NodeResourceTopology %s: %w", node, err)
	}
	return ownerOf(obj), true, nil
}

// setForeign records who owns this node's object when it is not the
// plugin, and says so when that changes.
func (x *exporter) setForeign(owner string) {
	if owner == x.foreign {
		return
	}
	log := x.health.log.WithField("node", x.node)
	if owner != "" {
		log.WithField("owner", owner).Warn("this node's NodeResourceTopology object belongs to another tool: leaving it alone, " +
			"exporting nothing until it is gone (run one NodeResourceTopology exporter per node)")
	} else {
		log.Info("this node's NodeResourceTopology object is no longer another tool's: exporting")
	}
	x.foreign = owner
	if x.metrics != nil {
		x.metrics.nrtForeign.Set(map[bool]float64{true: 1, false: 0}[owner != ""])
	}
}

// remove deletes the object (the plugin leaves the node), if it is the
// plugin's.
func (x *exporter) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	cur, err := x.client.Get(ctx, x.node)
	if apierrors.IsNotFound(err) {
		return
	}
	if err == nil && ownerOf(cur) != "" {
		x.health.log.WithField("owner", ownerOf(cur)).Info("this node's NodeResourceTopology object is another tool's: not removing it")
		return
	}
	err = x.client.Delete(ctx, x.node)
	if err != nil && !apierrors.IsNotFound(err) {
		x.health.log.WithError(err).Warn("removing this node's NodeResourceTopology object on exit")
		return
	}
	x.health.log.WithField("node", x.node).Info("removed this node's NodeResourceTopology object")
}

func (x *exporter) count(err error) {
	if x.metrics == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	x.metrics.nrtUpdates.WithLabelValues(result).Inc()
}

// sameContent reports whether two objects say the same about the node.
func sameContent(a, b *NodeResourceTopology) bool {
	if !reflect.DeepEqual(a.Attributes, b.Attributes) || !reflect.DeepEqual(a.TopologyPolicies, b.TopologyPolicies) || len(a.Zones) != len(b.Zones) {
		return false
	}
	for k, v := range b.Labels {
		if a.Labels[k] != v {
			return false
		}
	}
	for _, want := range b.OwnerReferences {
		if !slices.ContainsFunc(a.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == want.UID }) {
			return false
		}
	}
	for i := range a.Zones {
		za, zb := a.Zones[i], b.Zones[i]
		if za.Name != zb.Name || za.Type != zb.Type || za.Parent != zb.Parent || len(za.Resources) != len(zb.Resources) ||
			!reflect.DeepEqual(za.Costs, zb.Costs) || !reflect.DeepEqual(za.Attributes, zb.Attributes) {
			return false
		}
		for j := range za.Resources {
			ra, rb := za.Resources[j], zb.Resources[j]
			if ra.Name != rb.Name || ra.Capacity.Cmp(rb.Capacity) != 0 || ra.Allocatable.Cmp(rb.Allocatable) != 0 || ra.Available.Cmp(rb.Available) != 0 {
				return false
			}
		}
	}
	return true
}

func mergeLabels(old, ours map[string]string) map[string]string {
	out := make(map[string]string, len(old)+len(ours))
	for k, v := range old {
		out[k] = v
	}
	for k, v := range ours {
		out[k] = v
	}
	return out
}
