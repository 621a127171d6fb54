package kubeapi

import (
	"context"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// NodeClient reads and watches one Node: what the plugin needs of its
// own node (its labels), with the verbs get and watch only, as
// nri-plugins reads its node's configuration group.
type NodeClient interface {
	// Get reads the Node name.
	Get(ctx context.Context, name string) (*corev1.Node, error)
	// Watch watches the Node name from resourceVersion (a watch with the
	// field selector metadata.name, which needs no list).
	Watch(ctx context.Context, name, resourceVersion string) (watch.Interface, error)
}

// NodeLabel reads the value of the label of the Node node once; "" when
// the Node has no such label.
func NodeLabel(ctx context.Context, c NodeClient, node, label string) (string, error) {
	n, err := c.Get(ctx, node)
	if err != nil {
		return "", err
	}
	return n.Labels[label], nil
}

// The server-side timeout of a watch of the node, at random between the
// two so that the nodes of a cluster do not all watch again at once (a
// reflector's are 5 to 10 minutes).
const (
	minNodeWatch = 5 * time.Minute
	maxNodeWatch = 10 * time.Minute
)

// nodeWatch follows one label of this node: a read, then a watch from
// its resourceVersion, read again whenever the watch ends; a failure
// retries after a backoff with jitter.
type nodeWatch struct {
	client      NodeClient
	node, label string
	health      *health
	// onValue is told of the label's value at the first read, and of
	// every change after.
	onValue func(string)
	// again is the pause after a watch's routine end before the next
	// read, backoff the backoff after a failure (newRetryBackoff's when
	// nil).
	again   time.Duration
	backoff func() *wait.Backoff

	// Owned by run's goroutine.
	last *string
}

// run follows the label until ctx ends.
func (w *nodeWatch) run(ctx context.Context) {
	newBackoff := w.backoff
	if newBackoff == nil {
		newBackoff = newRetryBackoff
	}
	backoff := newBackoff()
	for ctx.Err() == nil {
		err := w.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		pause := w.again // after a watch's routine end: read again soon
		if err != nil && !routineWatchEnd(err) {
			w.health.failed(FeatureNode, err)
			pause = backoff.Step()
		} else {
			backoff = newBackoff()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// follow reads the node, then watches it until the watch ends.
func (w *nodeWatch) follow(ctx context.Context) error {
	getCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	n, err := w.client.Get(getCtx, w.node)
	cancel()
	if err != nil {
		return err
	}
	w.seen(n)
	wi, err := w.client.Watch(ctx, w.node, n.ResourceVersion)
	if err != nil {
		return err
	}
	defer wi.Stop()
	w.health.succeeded(FeatureNode)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if n, ok := ev.Object.(*corev1.Node); ok {
					w.seen(n)
				}
			case watch.Error:
				return apierrors.FromObject(ev.Object)
			}
		}
	}
}

// seen tells onValue of the label's value when it is new.
func (w *nodeWatch) seen(n *corev1.Node) {
	v := n.Labels[w.label]
	if w.last != nil && *w.last == v {
		return
	}
	w.last = &v
	w.onValue(v)
}

// nodeWatchTimeout is a watch's server-side timeout in seconds.
func nodeWatchTimeout() int64 {
	return int64((minNodeWatch + rand.N(maxNodeWatch-minNodeWatch)) / time.Second)
}
