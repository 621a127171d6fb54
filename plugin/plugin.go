package plugin

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

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
	// SysfsRoot is where the host's sysfs is (/sys when ""): where the
	// NUMA nodes of containers' devices are looked up.
	SysfsRoot string
	// KubeletCheckpoint is the kubelet's cpu_manager_state to import at the
	// first Synchronize when the plugin has no checkpoint of its own ("" disables).
	KubeletCheckpoint string
	// ReconnectMin and ReconnectMax bound the backoff after a connection
	// that failed once established.
	ReconnectMin, ReconnectMax time.Duration
	// DialInterval is how often the plugin dials while nothing accepts on
	// the socket (500 ms).
	DialInterval time.Duration
	// ConfigureTimeout bounds how long a connection may take from the
	// dial to the runtime's Configure: past it the connection is dropped
	// and the plugin dials again (connect.go). 0 is the default (10 s), a
	// negative value disables the watchdog.
	ConfigureTimeout time.Duration
	// WatchdogTrips is how many connections in a row the watchdog may
	// drop before Run gives up and returns an error, so that a fresh
	// process connects (16).
	WatchdogTrips int
	// MaxAbandoned bounds the connections the watchdog gives up on over
	// the process's life (each leaves a stub's goroutines behind): past
	// it Run returns an error, so that a fresh process connects (64).
	MaxAbandoned int
	// UnsolicitedTimeout bounds an unsolicited update: a runtime that has
	// not answered it by then gets its connection closed, and the plugin
	// synchronizes again (5 s: twice containerd's request timeout, with a
	// margin).
	UnsolicitedTimeout time.Duration
	// DisconnectedTimeout is how long the plugin may go without a
	// synchronized NRI connection before /healthz fails (0: never).
	DisconnectedTimeout time.Duration
	// LendWait bounds how long a handler waits for an unsolicited update in
	// flight to return before it refuses a request that needs the CPUs that
	// update carries.
	LendWait time.Duration
	// MaintainInterval is how often the plugin looks for CPUs held for a
	// pod's resize past the hold timeout and for pods idle past the
	// orphan timeout (5 s).
	MaintainInterval time.Duration
	// SendDelay is how long the runtime must deliver no event before
	// pending updates go out as an unsolicited update (1 s); until then
	// they ride on replies. SendMaxDelay (5 s) bounds how long they wait
	// for a quiet moment.
	SendDelay, SendMaxDelay time.Duration
	// Log receives the plugin's structured logs.
	Log *logrus.Logger
	// Metrics, if not nil, receives the plugin's measurements.
	Metrics *Metrics
	// API, if not nil, is the Kubernetes API (kube.go).
	API API
	// Config records the configuration the policy was built from (the
	// checkpoint keeps it). RecordedPolicy builds the policy of a recorded
	// configuration: at start, when pinned containers of the checkpoint
	// hold CPUs the given policy does not allow, the plugin runs on the
	// checkpoint's configuration until they are free (reload.go).
	// ReleasedPolicy builds the policy of Config with some CPUs no longer
	// reserved, and its record: what the plugin runs on when the
	// checkpoint recorded no configuration (the kubelet's, imported).
	Config         state.ConfigRecord
	RecordedPolicy func(state.ConfigRecord) (*policy.Policy, error)
	ReleasedPolicy func(cpuset.CPUSet) (*policy.Policy, state.ConfigRecord, error)
	// ObserveOnly has the plugin decide, commit, log, meter and export as
	// usual while it hands the runtime nothing: no cpuset in a reply, no
	// unsolicited update, no request refused, no event on a pod. The
	// checkpoint, `state` and the metrics show what it would have done;
	// a start without it pins the running containers as decided (the
	// Synchronize sends every container its cpuset).
	ObserveOnly bool
	// OnConfigure, if not nil, is called with the runtime's name and
	// version at every Configure (each connection's first request). It
	// runs inside the request: it must return at once.
	OnConfigure func(runtime, version string)
	// OnVerified, if not nil, is called after every verification pass
	// (tests wait on it instead of sleeping).
	OnVerified func()
}

func (o *Options) setDefaults() {
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
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
	if o.MaxAbandoned <= 0 {
		o.MaxAbandoned = defaultMaxAbandoned
	}
	if o.UnsolicitedTimeout <= 0 {
		o.UnsolicitedTimeout = defaultUnsolicitedTimeout
	}
	if o.WatchdogTrips <= 0 {
		o.WatchdogTrips = defaultWatchdogTrips
	}
	if o.DialInterval <= 0 {
		o.DialInterval = defaultDialInterval
	}
	if o.ConfigureTimeout == 0 {
		o.ConfigureTimeout = defaultConfigureTimeout
	}
	if o.LendWait <= 0 {
		o.LendWait = 100 * time.Millisecond
	}
	if o.MaintainInterval <= 0 {
		o.MaintainInterval = 5 * time.Second
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
// event handlers the stub calls (handlers.go): they turn the runtime's
// payloads into the policy's values, hand them to the policy, commit the
// model it decides once its state is on disk (commit.go), record what they
// hand the runtime in the ledger and turn the decision into the reply. The
// sender (sender.go) delivers what replies could not carry, the verifier
// (verify.go) reads what the runtime applied.
type Plugin struct {
	opts  Options
	log   *logrus.Entry
	store *state.Store
	// save writes a state to the checkpoint: store.Save (a test's seam).
	save    func(*state.State) error
	metrics *Metrics
	cgroups cgroupReader
	// verifier is the verification passes' (verify), under verifierMu.
	verifierMu sync.Mutex
	verifier   verifier
	// limits bound the values taken from NRI payloads.
	limits payloadLimits

	// kick wakes the sender, verifyKick the verifier.
	kick       chan struct{}
	verifyKick chan struct{}

	mu sync.Mutex
	// policy decides; it is swapped on a configuration reload. record
	// says which configuration it was built from, and pendingConfig is a
	// configuration waiting for pinned containers to leave (reload.go).
	policy        *policy.Policy
	record        state.ConfigRecord
	pendingConfig *pendingConfig
	// model is the committed model: its State is what the checkpoint holds.
	model *policy.Model
	// dirty is set when the last checkpoint write failed.
	dirty bool
	// pods maps a sandbox id to what the policy needs of the pod.
	pods map[string]policy.Pod
	// ledger records what was handed to the runtime and what is pending.
	ledger *ledger
	// reporter tells what came of each request.
	reporter *reporter
	// warned are the containers the plugin warned it cannot pin.
	warned map[string]bool
	// resized are the containers whose update was decided with their
	// pod's spec, until the runtime confirms it (PostUpdateContainer):
	// the pod and spec its confirmation decides with.
	resized map[string]resizedWith
	// specLagged are the pods whose last UpdatePodSandbox was decided on
	// the totals alone, the API's view lagging behind the runtime: the
	// maintenance loop settles their holds with the spec once the API has
	// it (settleHoldsWithSpec).
	specLagged map[string]bool
	// importKubelet is set until the first Synchronize when the plugin
	// started without a checkpoint and should import the kubelet's.
	importKubelet bool
	// conn is the connection to the runtime.
	conn connection
	// link is what the probes read of the connection, without mu.
	link *linkState
	// writes times the checkpoint write in progress, read without mu.
	writes *writeClock
	// writeErrors limits the log of failed checkpoint writes.
	writeErrors *onceAMinute
	// configured is fired by Configure on the current connection (the
	// watchdog's signal, connect.go).
	configured atomic.Pointer[signal]
}

// New returns a plugin deciding with pol and keeping its checkpoint in
// store. It loads the checkpoint: a missing one starts empty (or from the
// kubelet's checkpoint at the first Synchronize), a corrupt one is moved
// aside by the store and the state is rebuilt from the runtime's view at the
// first Synchronize; one the plugin cannot read (written by a newer
// version, or an I/O error) is an error.
func New(pol *policy.Policy, store *state.Store, opts Options) (*Plugin, error) {
	if pol == nil || store == nil {
		return nil, errors.New("plugin: a policy and a state store are required")
	}
	opts.setDefaults()
	p := &Plugin{
		opts:        opts,
		log:         opts.Log.WithField("component", "plugin"),
		store:       store,
		save:        store.Save,
		metrics:     opts.Metrics,
		cgroups:     cgroupReader{root: opts.CgroupfsRoot},
		limits:      limitsFor(pol.Allocator().Topology().CPUs()),
		kick:        make(chan struct{}, 1),
		verifyKick:  make(chan struct{}, 1),
		policy:      pol,
		pods:        map[string]policy.Pod{},
		ledger:      newLedger(),
		warned:      map[string]bool{},
		resized:     map[string]resizedWith{},
		specLagged:  map[string]bool{},
		link:        newLinkState(nil),
		writes:      newWriteClock(),
		writeErrors: newOnceAMinute(time.Now),
	}
	p.metrics.linkFrom(linkReader{ready: p.Ready, writing: p.writes.age})
	p.reporter = &reporter{log: p.log, metrics: opts.Metrics, api: opts.API, refusals: opts.Metrics.refusalMemory()}
	if opts.ObserveOnly {
		// Nothing is applied: the log says so on every line, a pod gets
		// no event of a refusal or a resize that did not happen.
		p.log = p.log.WithField("observeOnly", true)
		p.reporter.log, p.reporter.api = p.log, nil
		p.log.Warn("observeOnly: deciding and recording as usual, handing the runtime nothing (no cpuset changes, no request refused)")
	}
	p.metrics.setObserveOnly(opts.ObserveOnly)
	p.logCgroupTree()
	st, err := p.loadState()
	if err != nil {
		return nil, err
	}
	p.model = policy.NewModel(st)
	p.policy, p.record = pol, opts.Config
	p.startOn(st)
	p.metrics.setTopology(pol.Allocator().Topology())
	p.metrics.setPolicy(p.policy)
	// The first commit (at Synchronize) writes the checkpoint even if
	// nothing changed, so that the file always reflects the running plugin.
	p.dirty = true
	p.metrics.setModel(p.model)
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

// Ready reports whether the plugin is registered with NRI and
// synchronized. It does not wait for the plugin's lock.
func (p *Plugin) Ready() bool { return p.link.isSynchronized() }

// Healthy reports whether the plugin has been connected to NRI and
// synchronized within the last DisconnectedTimeout (always, when it is 0):
// a plugin that keeps failing to synchronize is restarted by its liveness
// probe. It measures the link to the runtime, nothing else: not the
// disk, not the Kubernetes API. It does not wait for the plugin's lock.
func (p *Plugin) Healthy() bool {
	return p.opts.DisconnectedTimeout <= 0 || p.link.downFor() < p.opts.DisconnectedTimeout
}

// connection is the plugin's current connection to the runtime; whether
// it is synchronized is link's.
type connection struct {
	// stub is the NRI stub of the connection; nil between connections.
	stub stub.Stub
	// drop closes the connection (the runtime then sees the plugin gone,
	// and the plugin dials again); nil between connections.
	drop func()
}
