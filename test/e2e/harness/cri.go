package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cleanupTimeout bounds Cleanup when it is given a context without deadline.
const cleanupTimeout = 2 * time.Minute

// CRI is a kubelet-like CRI client. It remembers the pods it creates so
// that Cleanup can remove them, whatever happened in between.
type CRI struct {
	conn *grpc.ClientConn
	// Runtime and Images are the raw CRI services, for calls the helpers
	// do not cover.
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	logf    Logf
	// CgroupDriver decides the cgroup parents of the pods RunPodSandbox
	// makes; it must be the runtime's (Containerd.CgroupDriver). Default
	// CgroupfsDriver.
	CgroupDriver CgroupDriver

	mu   sync.Mutex
	pods []*Pod // created and not yet removed, oldest first
}

// DialCRI returns a client of the CRI service on the unix socket at
// address. The connection is made lazily and re-made after a containerd
// restart; WaitReady waits for the service to answer.
func DialCRI(address string, logf Logf) (*CRI, error) {
	conn, err := grpc.NewClient("unix://"+address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Reconnect quickly after a containerd restart.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("dial CRI at %s: %w", address, err)
	}
	return &CRI{
		conn:         conn,
		Runtime:      runtimeapi.NewRuntimeServiceClient(conn),
		Images:       runtimeapi.NewImageServiceClient(conn),
		logf:         logf.orDiscard(),
		CgroupDriver: CgroupfsDriver,
	}, nil
}

// Close closes the connection. It does not remove any pod: see Cleanup.
func (c *CRI) Close() error {
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("close CRI connection: %w", err)
	}
	return nil
}

// WaitReady waits until the runtime answers and reports RuntimeReady.
func (c *CRI) WaitReady(ctx context.Context) error {
	var lastErr error
	err := Poll(ctx, func() (bool, error) {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		lastErr = c.ready(callCtx)
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for CRI runtime (last answer: %v): %w", lastErr, err)
	}
	return nil
}

// ready returns nil when the runtime answers Version and Status with the
// RuntimeReady condition true. (NetworkReady stays false without CNI; pods
// on the host network do not need it.)
func (c *CRI) ready(ctx context.Context) error {
	if _, err := c.Runtime.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	st, err := c.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.GetType() == runtimeapi.RuntimeReady {
			if cond.GetStatus() {
				return nil
			}
			return fmt.Errorf("runtime not ready: %s: %s", cond.GetReason(), cond.GetMessage())
		}
	}
	return errors.New("status has no RuntimeReady condition")
}

// WaitForImages waits until CRI lists every image in refs (an import
// through ctr reaches CRI's image store asynchronously).
func (c *CRI) WaitForImages(ctx context.Context, refs ...string) error {
	var missing string
	err := Poll(ctx, func() (bool, error) {
		for _, ref := range refs {
			resp, err := c.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			if err != nil || resp.GetImage() == nil {
				missing = ref
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for image %s in CRI: %w", missing, err)
	}
	return nil
}

// Cleanup stops and removes every pod this client created and has not
// removed yet, newest first, with their containers and pod cgroups. It goes
// on after errors and returns them all. A ctx without deadline is bounded
// by two minutes.
func (c *CRI) Cleanup(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cleanupTimeout)
		defer cancel()
	}
	c.mu.Lock()
	pods := slices.Clone(c.pods)
	c.mu.Unlock()
	var errs []error
	for i := len(pods) - 1; i >= 0; i-- {
		if err := pods[i].Remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Pods returns the pods this client created and has not removed.
func (c *CRI) Pods() []*Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.pods)
}

func (c *CRI) track(p *Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = append(c.pods, p)
}

func (c *CRI) untrack(p *Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = slices.DeleteFunc(c.pods, func(q *Pod) bool { return q == p })
}
