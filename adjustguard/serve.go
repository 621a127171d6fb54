package adjustguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
)

// Options are the validating plugin's.
type Options struct {
	// Rule is what it enforces.
	Rule Rule
	// Socket is containerd's NRI socket.
	Socket string
	// Name and Index are what it registers with NRI as: the name
	// containerd's required_plugins lists to make it required.
	Name, Index string
	// Log receives a line per refusal (warning) and per connection.
	Log *logrus.Entry
	// DialInterval is how long it waits before dialing again after a
	// connection ended or a dial failed (default 500 ms: while it is away,
	// containers are created unvalidated unless containerd requires it).
	DialInterval time.Duration
	// ConfigureTimeout bounds a connection from the dial to the runtime's
	// Configure (default 10 s; see serve).
	ConfigureTimeout time.Duration
}

// maxAbandoned bounds the connections in a row Run gives up on without
// their stub returning; past it Run fails, so that the process exits and
// the kubelet starts a fresh one.
const maxAbandoned = 16

// errNoConfigure is serve's error when the runtime did not configure the
// connection in time.
var errNoConfigure = errors.New("no Configure from the runtime")

// Run registers the validating plugin with NRI and answers containerd
// until ctx is cancelled. When the connection ends (containerd restarting,
// or gone) it dials again every DialInterval.
func Run(ctx context.Context, opts Options) error {
	if opts.Rule.Plugin == "" && !opts.Rule.AllPlugins {
		return errors.New("no plugin to watch: Rule.Plugin is empty")
	}
	if opts.DialInterval <= 0 {
		opts.DialInterval = 500 * time.Millisecond
	}
	if opts.ConfigureTimeout <= 0 {
		opts.ConfigureTimeout = 10 * time.Second
	}
	opts.Log.WithFields(logrus.Fields{"socket": opts.Socket, "plugin": opts.Rule.Plugin, "allPlugins": opts.Rule.AllPlugins,
		"allowUnattributedRemovals": opts.Rule.AllowUnattributedRemovals, "allowed": allowedText()}).
		Infof("validating container adjustments as NRI plugin %s-%s", opts.Index, opts.Name)
	abandoned, failures := 0, 0
	for {
		configured, err := serve(ctx, opts)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errNoConfigure) {
			if abandoned++; abandoned >= maxAbandoned {
				return fmt.Errorf("%d NRI connections in a row were not configured: %w", abandoned, err)
			}
		} else {
			abandoned = 0
		}
		switch {
		case configured:
			failures = 0
			opts.Log.WithError(err).WithField("retryIn", opts.DialInterval).Warn("NRI connection lost; containers are created unvalidated until it is back; reconnecting")
		case failures == 0:
			failures++
			opts.Log.WithError(err).WithField("retryEvery", opts.DialInterval).Warn("cannot register with NRI; trying until the runtime is back")
		default:
			opts.Log.WithError(err).Debug("still cannot register with NRI")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.DialInterval):
		}
	}
}

// validator is the NRI plugin of one connection.
type validator struct {
	rule       Rule
	log        *logrus.Entry
	configured chan struct{}
	once       sync.Once
}

// Configure subscribes to the events the stub finds handlers for: the
// validation alone.
func (v *validator) Configure(context.Context, string, string, string) (api.EventMask, error) {
	v.once.Do(func() { close(v.configured) })
	return 0, nil
}

// Synchronize ends the registration: from its reply on, the runtime asks
// the validator about every creation.
func (v *validator) Synchronize(_ context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	v.log.WithFields(logrus.Fields{"pods": len(pods), "containers": len(containers)}).Info("synchronized: validating every container creation")
	return nil, nil
}

// isConfigured reports whether the runtime configured the connection.
func (v *validator) isConfigured() bool {
	select {
	case <-v.configured:
		return true
	default:
		return false
	}
}

// ValidateContainerAdjustment refuses a creation that breaks the rule;
// NRI turns the error into the creation's.
func (v *validator) ValidateContainerAdjustment(_ context.Context, req *api.ValidateContainerAdjustmentRequest) error {
	entry := v.log.WithFields(logrus.Fields{
		"pod":       req.GetPod().GetNamespace() + "/" + req.GetPod().GetName(),
		"container": req.GetContainer().GetName(),
	})
	if err := v.rule.Check(req); err != nil {
		entry.WithError(err).Warn("refused a container's creation")
		return err
	}
	entry.Debug("adjustments validated")
	return nil
}

// serve runs one NRI connection until it ends or ctx is cancelled, and
// says whether the runtime configured it.
//
// When the runtime closes the connection after the registration and
// before Configure (containerd restarting at that moment), the NRI stub
// (containerd/nri v0.12.5) waits for ever; so a connection not configured
// within ConfigureTimeout is closed and given up (its goroutine stays
// blocked), as the plugin's own connection does (plugin/connect.go).
func serve(ctx context.Context, opts Options) (bool, error) {
	var dialed conn
	v := &validator{rule: opts.Rule, log: opts.Log, configured: make(chan struct{})}
	s, err := stub.New(v,
		stub.WithPluginName(opts.Name),
		stub.WithPluginIdx(opts.Index),
		stub.WithSocketPath(opts.Socket),
		stub.WithDialer(dialed.dial),
		stub.WithLogger(nriLogger{opts.Log.WithField("component", "nri")}),
	)
	if err != nil {
		return false, fmt.Errorf("creating NRI stub: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	watchdog := time.NewTimer(opts.ConfigureTimeout)
	defer watchdog.Stop()
	configuredC := v.configured
	for {
		select {
		case err := <-done:
			return v.isConfigured(), err
		case <-ctx.Done():
			dialed.close()
			return v.isConfigured(), ctx.Err()
		case <-configuredC:
			configuredC = nil
			watchdog.Stop()
		case <-watchdog.C:
			dialed.close()
			return false, fmt.Errorf("%w within %s of the dial", errNoConfigure, opts.ConfigureTimeout)
		}
	}
}

// conn dials the NRI socket and keeps the connection, for the watchdog
// to close.
type conn struct {
	mu sync.Mutex
	c  net.Conn
}

func (d *conn) dial(path string) (net.Conn, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.c = c
	d.mu.Unlock()
	return c, nil
}

func (d *conn) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil {
		_ = d.c.Close()
	}
}

// nriLogger routes the NRI stub's logs into logrus, its information at
// the debug level: the stub says it at every dial, and Run says what
// counts.
type nriLogger struct{ e *logrus.Entry }

func (l nriLogger) Debugf(_ context.Context, format string, args ...any) { l.e.Debugf(format, args...) }
func (l nriLogger) Infof(_ context.Context, format string, args ...any)  { l.e.Debugf(format, args...) }
func (l nriLogger) Warnf(_ context.Context, format string, args ...any)  { l.e.Warnf(format, args...) }
func (l nriLogger) Errorf(_ context.Context, format string, args ...any) { l.e.Errorf(format, args...) }
