package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// Options configure the plugin. They are plain values: the command builds
// them from the configuration file.
type Options struct {
	// Name and Index register the plugin with NRI.
	Name  string
	Index string
	// Socket is the NRI socket to dial.
	Socket string
	// CgroupfsRoot is the host's cgroup tree, where containers' cgroups
	// are read to verify their cpusets: cgroup v1 or v2, either cgroup
	// driver (cgroups.go). "" disables verification.
	CgroupfsRoot string
	// VerifyInterval is the period of the background verification of every
	// container's cpuset (0 disables the periodic pass; verification after
	// events still happens).
	VerifyInterval time.Duration
	// KubeletCheckpoint is the kubelet's cpu_manager_state to import at the
	// first Synchronize when the plugin has no checkpoint of its own ("" disables).
	KubeletCheckpoint string
	// ReconnectMin and ReconnectMax bound the backoff between connection
	// attempts.
	ReconnectMin, ReconnectMax time.Duration
	// LendWait bounds how long a handler waits for an unsolicited update in
	// flight to return before it refuses a request that needs the CPUs that
	// update carries.
	LendWait time.Duration
	// SendDelay is how long the runtime must deliver no event before
	// pending updates go out as an unsolicited update (1 s); until then
	// they ride on replies. SendMaxDelay (5 s) bounds how long they wait
	// for a quiet moment.
	SendDelay, SendMaxDelay time.Duration
	// Log receives the plugin's structured logs.
	Log *logrus.Logger
	// Metrics, if not nil, receives the plugin's measurements.
	Metrics *Metrics
}

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = "cpumanager"
	}
	if o.Index == "" {
		o.Index = "90"
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = 500 * time.Millisecond
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = 30 * time.Second
	}
	if o.LendWait <= 0 {
		o.LendWait = 100 * time.Millisecond
	}
	if o.SendDelay <= 0 {
		o.SendDelay = time.Second
	}
	if o.SendMaxDelay < o.SendDelay {
		o.SendMaxDelay = max(5*time.Second, o.SendDelay)
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
}

// Plugin is the NRI plugin. Its exported methods with NRI signatures are the
// event handlers the stub calls.
type Plugin struct {
	opts    Options
	log     *logrus.Entry
	store   *state.Store
	metrics *Metrics
	cgroups cgroupReader

	// kick wakes the sender, verifyKick the verifier.
	kick       chan struct{}
	verifyKick chan struct{}

	mu sync.Mutex
	// policy decides; it is swapped on a safe configuration reload.
	policy *policy.Policy
	// model is the committed model: its State is what the checkpoint holds.
	model *policy.Model
	// pods maps a sandbox id to what the policy needs of the pod.
	pods map[string]policy.Pod
	// ctrs is the plugin's own record of each container besides the model,
	// by id (see runtimeView); forgetContainersNotIn drops it.
	ctrs map[string]*runtimeView
	// pending are the containers whose cpuset must still be sent: the
	// shared growth after a confirmed shrink, updates that failed, drift
	// found by verification. They ride on the next reply, or go out as one
	// unsolicited update once the runtime is quiet (see sendLoop): a burst
	// of events leaves at most one update per container.
	pending map[string]bool
	// pendingSince is when pending last became non-empty.
	pendingSince time.Time
	// seq counts the events delivered; lastEvent is when the last one came.
	seq       uint64
	lastEvent time.Time
	// replying is set from a reply that hands the runtime cpusets until
	// the next event: the runtime may still be applying it.
	replying bool
	// sendDone is closed when the unsolicited update in flight returns; nil
	// when none is in flight.
	sendDone chan struct{}
	// importKubelet is set until the first Synchronize when the plugin
	// started without a checkpoint and should import the kubelet's.
	importKubelet bool
	// refusals remembers the refusals warned about, so that the kubelet's
	// retries of one are logged at debug.
	refusals *refusalLog
	// dirty is set when the last checkpoint write failed.
	dirty        bool
	stub         stub.Stub
	synchronized bool
	// limits bound the values taken from NRI payloads.
	limits payloadLimits
	// warned are the containers the plugin warned it cannot pin.
	warned map[string]bool
}

// view returns the record of container id, making it if needed.
func (p *Plugin) view(id string) *runtimeView {
	v := p.ctrs[id]
	if v == nil {
		v = &runtimeView{}
		p.ctrs[id] = v
	}
	return v
}

// New returns a plugin deciding with pol and keeping its checkpoint in
// store. It loads the checkpoint: a missing one starts empty (or from the
// kubelet's checkpoint at the first Synchronize), a corrupt one is moved
// aside by the store and the state is rebuilt from the runtime's view at the
// first Synchronize.
func New(pol *policy.Policy, store *state.Store, opts Options) (*Plugin, error) {
	if pol == nil || store == nil {
		return nil, errors.New("plugin: a policy and a state store are required")
	}
	opts.setDefaults()
	p := &Plugin{
		opts:       opts,
		log:        opts.Log.WithField("component", "plugin"),
		store:      store,
		metrics:    opts.Metrics,
		cgroups:    cgroupReader{root: opts.CgroupfsRoot},
		kick:       make(chan struct{}, 1),
		policy:     pol,
		pods:       map[string]policy.Pod{},
		ctrs:       map[string]*runtimeView{},
		pending:    map[string]bool{},
		verifyKick: make(chan struct{}, 1),
		refusals:   newRefusalLog(),
		limits:     limitsFor(pol.Allocator().Topology().CPUs()),
		warned:     map[string]bool{},
	}
	p.logCgroupTree()
	st, err := p.loadState()
	if err != nil {
		return nil, err
	}
	p.model = policy.NewModel(st)
	p.metrics.setTopology(pol.Allocator().Topology())
	// The first commit (at Synchronize) writes the checkpoint even if
	// nothing changed, so that the file always reflects the running plugin.
	p.dirty = true
	p.observeModel()
	return p, nil
}

// loadState reads the checkpoint, deciding what to do when there is none
// or it cannot be trusted. Any other error stops the start: a file that
// cannot be read, or one a newer nri-cpumanager wrote
// (*state.NewerFormatError), which the store leaves in place.
func (p *Plugin) loadState() (*state.State, error) {
	online := p.policy.Allocator().Topology().CPUs()
	st, err := p.store.Load(online)
	var corrupt *state.CorruptError
	switch {
	case err == nil:
		p.log.WithFields(logrus.Fields{"checkpoint": p.store.Path(), "entries": st.NumAssignments()}).Info("loaded checkpoint")
		return st, nil
	case errors.Is(err, state.ErrNoCheckpoint):
		p.importKubelet = p.opts.KubeletCheckpoint != ""
		p.log.WithField("checkpoint", p.store.Path()).Info("no checkpoint yet; starting empty")
		return p.policy.NewState(), nil
	case errors.As(err, &corrupt):
		p.log.WithError(err).Error("checkpoint not trusted; the state will be rebuilt from the runtime's view at Synchronize")
		p.metrics.checkpointCorrupt()
		return p.policy.NewState(), nil
	default:
		return nil, fmt.Errorf("loading checkpoint: %w", err)
	}
}

// Run connects to NRI and serves events until ctx is cancelled. When
// containerd goes away it keeps running and re-dials with exponential
// backoff; every (re)connection starts with a Synchronize.
func (p *Plugin) Run(ctx context.Context) error {
	go p.sendLoop(ctx)
	go p.verifyLoop(ctx)
	backoff := p.opts.ReconnectMin
	for {
		started := time.Now()
		err := p.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		p.metrics.reconnect()
		if time.Since(started) > p.opts.ReconnectMax {
			backoff = p.opts.ReconnectMin
		}
		p.log.WithError(err).WithField("retryIn", backoff).Warn("NRI connection lost or failed; reconnecting")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.opts.ReconnectMax)
	}
}

// failurePolicy returns the NRI failure policy the plugin registers. It
// asks a runtime that honours failure policies (NRI v0.12.5 and later) to
// fail a request the plugin cannot answer (it died, or hung past the
// request timeout) instead of going on without it: a container created
// then would run unpinned over pinned CPUs until the plugin's next
// Synchronize. The kubelet retries the failed call. A plugin that timed out
// is still disconnected (KeepConnected unset), so one hang costs one
// request. Runtimes with an older NRI (containerd 2.4.2 carries v0.12.3)
// do not know the field and ignore it.
func failurePolicy() *api.FailurePolicy { return &api.FailurePolicy{FailRequest: true} }

// serve runs one NRI connection until it ends.
func (p *Plugin) serve(ctx context.Context) error {
	s, err := stub.New(p,
		stub.WithPluginName(p.opts.Name),
		stub.WithPluginIdx(p.opts.Index),
		stub.WithSocketPath(p.opts.Socket),
		stub.WithLogger(nriLogger{p.log.WithField("component", "nri")}),
		stub.WithFailurePolicy(failurePolicy()),
	)
	if err != nil {
		return fmt.Errorf("creating NRI stub: %w", err)
	}
	p.mu.Lock()
	p.stub = s
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.stub = nil
		p.synchronized = false
		p.mu.Unlock()
		p.metrics.setReady(false)
	}()
	return s.Run(ctx)
}

// Ready reports whether the plugin is registered with NRI and synchronized.
func (p *Plugin) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synchronized
}
