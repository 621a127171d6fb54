package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// Options configure the API.
type Options struct {
	// NodeName is this node's name (the DaemonSet sets NODE_NAME from the
	// downward API).
	NodeName string
	// Clients make the requests; Pods and Events are required, a nil
	// Topology disables the NodeResourceTopology export.
	Clients Clients
	// RemoveTopologyOnExit deletes the node's NodeResourceTopology object
	// when Run returns.
	RemoveTopologyOnExit bool
	// GroupLabel is the node label naming the node's configuration
	// group. With OnGroupLabel, Run watches the node (Clients.Node) and
	// tells OnGroupLabel the label's value at the first read and at
	// every change; nil watches no node.
	GroupLabel   string
	OnGroupLabel func(value string)
	// Log is where the API says what it loses and regains; required.
	Log *logrus.Logger
	// Registerer gets the API's metrics; nil records none.
	Registerer prometheus.Registerer
	// Now is the clock of the events; nil is time.Now.
	Now func() time.Time
}

// API is the plugin's view of the Kubernetes API (plugin.API). Create it
// with New, hand it to the plugin, then Run it with the plugin's NUMA
// zones. Its methods never block for long, and do nothing useful before
// Run (PodSpec answers false, events are dropped).
type API struct {
	opts    Options
	log     *logrus.Entry
	health  *health
	metrics *metrics
	pods    *podWatch
	export  *exporter

	events *eventer
	node   *nodeWatch // nil: the node is not watched
}

// New creates the API for a node. It makes no request.
func New(opts Options) (*API, error) {
	if opts.Clients.Pods == nil || opts.Clients.Events == nil || opts.Log == nil {
		return nil, errors.New("kubeapi: the pods' and events' clients and a logger are required")
	}
	if opts.NodeName == "" {
		return nil, errors.New("kubeapi: the node name is not known: set NODE_NAME (the DaemonSet sets it from spec.nodeName)")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	features := []Feature{FeaturePods, FeatureEvents}
	if opts.Clients.Topology != nil {
		features = append(features, FeatureTopology)
	}
	watchNode := opts.OnGroupLabel != nil
	if watchNode {
		if opts.Clients.Node == nil || opts.GroupLabel == "" {
			return nil, errors.New("kubeapi: watching the node's group label needs the node's client and the label")
		}
		features = append(features, FeatureNode)
	}
	var m *metrics
	if opts.Registerer != nil {
		var err error
		if m, err = newMetrics(opts.Registerer, features); err != nil {
			return nil, fmt.Errorf("registering the Kubernetes API's metrics: %w", err)
		}
	}
	log := opts.Log.WithField("node", opts.NodeName)
	a := &API{opts: opts, log: log, metrics: m, health: newHealth(log, m)}
	a.pods = newPodWatch(opts.Clients.Pods, opts.NodeName, a.health, m)
	a.events = newEventer(opts.Clients.Events, opts.NodeName, a.health, m, opts.Now)
	a.pods.deleted = a.events.forget
	if opts.Clients.Topology != nil {
		a.export = newExporter(opts.Clients.Topology, opts.NodeName, a.health, m)
		a.export.nodes = opts.Clients.Nodes
	}
	if watchNode {
		a.node = &nodeWatch{client: opts.Clients.Node, node: opts.NodeName, label: opts.GroupLabel, health: a.health,
			onValue: opts.OnGroupLabel, again: time.Second}
	}
	return a, nil
}

// Run watches the pods, records events and exports the topology (view
// gives the plugin's, as plugin.Plugin.Topology) until ctx ends,
// then removes the topology object when asked to. The API server need not
// be there: every part retries in the background.
func (a *API) Run(ctx context.Context, view func() policy.TopologyView) error {
	var wg sync.WaitGroup
	wg.Go(func() { a.pods.run(ctx) })
	wg.Go(func() { a.events.run(ctx) })
	if a.export != nil {
		a.export.view = view
		wg.Go(func() { a.export.run(ctx, a.opts.RemoveTopologyOnExit) })
	}
	if a.node != nil {
		wg.Go(func() { a.node.run(ctx) })
	}
	a.log.WithFields(logrus.Fields{"topologyExport": a.export != nil, "groupLabel": a.node != nil}).Info("watching this node's pods in the Kubernetes API")
	wg.Wait()
	return nil
}

// PodSpec implements plugin.API from the watch of this node's pods.
func (a *API) PodSpec(podUID string, totalMilli int64, wait time.Duration) (policy.PodSpec, bool) {
	return a.pods.podSpec(podUID, totalMilli, wait)
}

// ContainerSpec implements plugin.API from the watch of this node's pods.
func (a *API) ContainerSpec(podUID, container string, limitMilli int64, wait time.Duration) (policy.PodSpec, bool) {
	return a.pods.containerSpec(podUID, container, limitMilli, wait)
}

// PodActive implements plugin.API from the watch's cache.
func (a *API) PodActive(podUID string) bool { return a.pods.active(podUID) }

// PodInfo implements plugin.API from the watch's cache, waiting at most
// wait for the pod to be there.
func (a *API) PodInfo(podUID string, wait time.Duration) (policy.PodInfo, bool) {
	return a.pods.podInfo(podUID, wait)
}

// OnPodEnded sets the function told of every pod of the node the watch
// sees in a terminal phase (once) or deleted (the plugin's
// Plugin.EndPod). Set it before Run.
func (a *API) OnPodEnded(fn func(podUID string)) { a.pods.onEnded(fn) }

// Refused implements plugin.API: a Warning event on the pod.
func (a *API) Refused(pod policy.Pod, container, event string, r *policy.Refusal) {
	a.events.refused(pod, container, event, r)
}

// NodeCheckFailed reports what the plugin's checks of its node at start
// found wrong (note): a Warning event on the Node.
func (a *API) NodeCheckFailed(note string) {
	a.events.nodeCheckFailed(a.opts.NodeName, note)
}

// Resized implements plugin.API: a Normal event on the pod.
func (a *API) Resized(pod policy.Pod, container string, before, after cpuset.CPUSet) {
	a.events.resized(pod, container, before, after)
}

// Changed implements plugin.API: the topology object is written again
// soon (at most a few times a second).
func (a *API) Changed() {
	if a.export != nil {
		a.export.changed()
	}
}

// NodeName returns this node's name: $NODE_NAME, else the host name (as
// node-feature-discovery does).
func NodeName() string {
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	n, _ := os.Hostname()
	return n
}

// Unavailable registers the API's metrics with each feature unavailable
// (the node's group label among them), for a plugin configured to use the
// API that has no client (not in a pod, no service account): it then
// works on NRI alone, and says so.
func Unavailable(reg prometheus.Registerer, topology bool) error {
	m, err := registerMetrics(reg, topology)
	if err != nil {
		return err
	}
	m.available.Reset()
	for _, f := range m.features {
		m.available.WithLabelValues(string(f)).Set(0)
	}
	return nil
}

// RegisterMetrics registers the API's metrics (with topology, those of
// the export too; the node's group label's always), as New does, for a
// test of what the plugin exports.
func RegisterMetrics(reg prometheus.Registerer, topology bool) error {
	_, err := registerMetrics(reg, topology)
	return err
}

func registerMetrics(reg prometheus.Registerer, topology bool) (*metrics, error) {
	features := []Feature{FeaturePods, FeatureEvents}
	if topology {
		features = append(features, FeatureTopology)
	}
	features = append(features, FeatureNode)
	m, err := newMetrics(reg, features)
	if err != nil {
		return nil, fmt.Errorf("registering the Kubernetes API's metrics: %w", err)
	}
	return m, nil
}
