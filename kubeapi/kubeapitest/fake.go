// Package kubeapitest gives kubeapi.Clients from client-go's fake
// clientsets, for tests (the plugin's binary does not link it).
package kubeapitest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Pods lists and watches the pods of node through client (a fake
// clientset ignores the field selector; it is sent all the same).
func Pods(client kubernetes.Interface, node string) cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	// A fake clientset cannot stream the initial list; it says so.
	return cache.ToListWatcherWithWatchListSemantics(lw, client)
}

// Events writes events through client.
type Events struct{ Client kubernetes.Interface }

// Create creates an event.
func (e Events) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return e.Client.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

// Patch merge-patches an event.
func (e Events) Patch(ctx context.Context, namespace, name string, data []byte) (*eventsv1.Event, error) {
	return e.Client.EventsV1().Events(namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
}

// Node reads and watches the Nodes of client (kubeapi.NodeClient; a fake
// clientset ignores the field selector and the resourceVersion).
type Node struct{ Client kubernetes.Interface }

// Get reads a Node.
func (n Node) Get(ctx context.Context, name string) (*corev1.Node, error) {
	return n.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// Watch watches the Node name.
func (n Node) Watch(ctx context.Context, name, resourceVersion string) (watch.Interface, error) {
	return n.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: resourceVersion})
}
