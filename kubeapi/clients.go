package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients are the requests the plugin makes of the API server, each
// behind the smallest interface, so that tests can give fakes and the
// plugin's binary links no more of client-go than it uses: not the
// generated clientset of every API group, whose scheme alone would double
// the plugin's resident memory (docs/performance.md).
type Clients struct {
	// Pods lists and watches the pods bound to this node.
	Pods cache.ListerWatcher
	// Events writes events.k8s.io/v1 events.
	Events EventWriter
	// Topology reads and writes NodeResourceTopology objects; nil turns
	// the export off.
	Topology TopologyClient
	// Nodes reads a Node's UID, the owner of its NodeResourceTopology
	// object (which the garbage collector then deletes with the Node);
	// nil leaves the object without an owner.
	Nodes NodeReader
	// Node reads and watches this node's labels (its configuration
	// group); nil reads none.
	Node NodeClient
}

// NodeReader reads a Node's UID.
type NodeReader interface {
	UID(ctx context.Context, name string) (types.UID, error)
}

// restNodes is NodeReader and NodeClient over the core API.
type restNodes struct {
	c      rest.Interface
	params runtime.ParameterCodec
}

func (r restNodes) UID(ctx context.Context, name string) (types.UID, error) {
	node, err := r.Get(ctx, name)
	if err != nil {
		return "", err
	}
	return node.UID, nil
}

func (r restNodes) Get(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	if err := r.c.Get().Resource("nodes").Name(name).Do(ctx).Into(node); err != nil {
		return nil, err
	}
	return node, nil
}

func (r restNodes) Watch(ctx context.Context, name, resourceVersion string) (watch.Interface, error) {
	timeout := nodeWatchTimeout()
	o := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: resourceVersion, Watch: true, TimeoutSeconds: &timeout, AllowWatchBookmarks: true}
	return r.c.Get().Resource("nodes").VersionedParams(&o, r.params).Timeout(time.Duration(timeout) * time.Second).Watch(ctx)
}

// EventWriter creates events and patches an event's series.
type EventWriter interface {
	Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error)
	Patch(ctx context.Context, namespace, name string, mergePatch []byte) (*eventsv1.Event, error)
}

// Config returns the configuration of the cluster the plugin runs in: its
// pod's service account (rest.InClusterConfig), or the kubeconfig file
// $KUBECONFIG names when set (a plugin run by hand, outside a pod). The
// user agent is the plugin's. No client-wide timeout: it would cut the
// watch; requests that must not hang carry a context with a deadline.
func Config(version string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path := os.Getenv("KUBECONFIG"); path != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, fmt.Errorf("the Kubernetes API's configuration from KUBECONFIG %s: %w", path, err)
		}
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		return nil, fmt.Errorf("the Kubernetes API's in-cluster configuration: %w", err)
	}
	cfg.UserAgent = Component + "/" + version
	return cfg, nil
}

// NotInCluster reports whether Config failed because the plugin runs
// outside a pod (no service account) without $KUBECONFIG: run by hand.
func NotInCluster(err error) bool { return errors.Is(err, rest.ErrNotInCluster) }

// NewClients returns the clients of node's plugin on cfg. topology false
// leaves Topology and Nodes nil.
func NewClients(cfg *rest.Config, node string, topology bool) (Clients, error) {
	codecs, params, err := codecs()
	if err != nil {
		return Clients{}, err
	}
	coreClient, err := newCoreClient(cfg, codecs)
	if err != nil {
		return Clients{}, err
	}
	ev := rest.CopyConfig(cfg)
	ev.APIPath, ev.GroupVersion, ev.NegotiatedSerializer = "/apis", &eventsv1.SchemeGroupVersion, codecs
	evClient, err := rest.RESTClientFor(ev)
	if err != nil {
		return Clients{}, fmt.Errorf("the events API's client: %w", err)
	}
	nodes := restNodes{coreClient, params}
	c := Clients{Pods: nodePods(coreClient, params, node), Events: restEvents{evClient}, Node: nodes}
	if topology {
		nrt := rest.CopyConfig(cfg)
		nrt.APIPath, nrt.GroupVersion, nrt.NegotiatedSerializer = "/apis", &schema.GroupVersion{Group: "topology.node.k8s.io", Version: "v1alpha2"}, codecs
		nrtClient, err := rest.RESTClientFor(nrt)
		if err != nil {
			return Clients{}, fmt.Errorf("the NodeResourceTopology API's client: %w", err)
		}
		c.Topology = restTopology{nrtClient}
		c.Nodes = nodes
	}
	return c, nil
}

// NewNodeClient returns a client of the Nodes on cfg, to read the
// plugin's node before the other clients are made.
func NewNodeClient(cfg *rest.Config) (NodeClient, error) {
	codecs, params, err := codecs()
	if err != nil {
		return nil, err
	}
	core, err := newCoreClient(cfg, codecs)
	if err != nil {
		return nil, err
	}
	return restNodes{core, params}, nil
}

// codecs returns the codecs of the objects the plugin reads and writes.
func codecs() (runtime.NegotiatedSerializer, runtime.ParameterCodec, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, eventsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, nil, fmt.Errorf("the API client's scheme: %w", err)
		}
	}
	return serializer.NewCodecFactory(scheme).WithoutConversion(), runtime.NewParameterCodec(scheme), nil
}

// newCoreClient returns a client of the core API, in protobuf: smaller
// and cheaper to decode than JSON.
func newCoreClient(cfg *rest.Config, codecs runtime.NegotiatedSerializer) (*rest.RESTClient, error) {
	core := rest.CopyConfig(cfg)
	core.APIPath, core.GroupVersion, core.NegotiatedSerializer = "/api", &corev1.SchemeGroupVersion, codecs
	core.ContentType, core.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON
	c, err := rest.RESTClientFor(core)
	if err != nil {
		return nil, fmt.Errorf("the core API's client: %w", err)
	}
	return c, nil
}

// nodePods lists and watches the pods whose spec.nodeName is node.
func nodePods(c rest.Interface, params runtime.ParameterCodec, node string) cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	timeout := func(r *rest.Request, o metav1.ListOptions) *rest.Request {
		if o.TimeoutSeconds != nil {
			r = r.Timeout(time.Duration(*o.TimeoutSeconds) * time.Second)
		}
		return r
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			list := &corev1.PodList{}
			err := timeout(c.Get().Resource("pods").VersionedParams(&o, params), o).Do(ctx).Into(list)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector, o.Watch = selector, true
			return timeout(c.Get().Resource("pods").VersionedParams(&o, params), o).Watch(ctx)
		},
	}
}

// restEvents writes events through the events.k8s.io/v1 REST API.
type restEvents struct{ c rest.Interface }

func (r restEvents) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	err := r.c.Post().Namespace(e.Namespace).Resource("events").Body(e).Do(ctx).Into(out)
	return out, err
}

func (r restEvents) Patch(ctx context.Context, namespace, name string, data []byte) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	err := r.c.Patch(types.MergePatchType).Namespace(namespace).Resource("events").Name(name).Body(data).Do(ctx).Into(out)
	return out, err
}
