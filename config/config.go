package config

import (
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// Config is a validated configuration. Values are typed; use Parse, Load or
// Default to get one, and treat it as immutable once handed out (a changed
// config is a new *Config). Each field is the value of one key of keys
// (keys.go), which declares the key's name, default, validation, doc and
// when a running plugin applies it.
type Config struct {
	// NRISocket is the path of containerd's NRI socket (nriSocket).
	NRISocket string
	// PluginName is the name the plugin registers with (pluginName).
	PluginName string
	// PluginIndex is the two-digit NRI ordering index (pluginIndex).
	PluginIndex string
	// StateDir is the directory of the plugin's checkpoint (stateDir).
	StateDir string
	// SysfsRoot is where the CPU topology is read from (sysfsRoot).
	SysfsRoot string
	// CgroupfsRoot is where containers' cgroup cpusets are verified
	// (cgroupfsRoot).
	CgroupfsRoot string
	// ReservedSystemCPUs are the CPUs kept for the system
	// (reservedSystemCPUs). Empty when ReservedCPUCount is used instead.
	// They are not checked against the machine here: the caller, which
	// knows the topology, must check that they are online.
	ReservedSystemCPUs cpuset.CPUSet
	// ReservedCPUCount is a number of CPUs to reserve, placed by topology
	// (reservedCPUCount). Zero when ReservedSystemCPUs is used instead.
	ReservedCPUCount int
	// IsolatedCPUs says what the CPUs the kernel isolates (isolcpus) serve
	// (isolatedCPUs): like any other CPU (shared, the kubelet's way), or
	// exclusive containers only, taken before any other CPU (exclusive).
	IsolatedCPUs IsolatedCPUs
	// CPUManagerPolicyOptions are the static policy options
	// (cpuManagerPolicyOptions), typed by the allocator that applies them.
	CPUManagerPolicyOptions cpuallocator.StaticPolicyOptions
	// TopologyManagerPolicy is the NUMA alignment policy
	// (topologyManagerPolicy).
	TopologyManagerPolicy cpuallocator.TopologyPolicy
	// TopologyManagerScope is what one NUMA affinity is computed for:
	// each container, or all the pinned containers of a pod
	// (topologyManagerScope).
	TopologyManagerScope cpuallocator.TopologyScope
	// TopologyManagerPolicyOptions are the topology manager options
	// (topologyManagerPolicyOptions).
	TopologyManagerPolicyOptions cpuallocator.TopologyOptions
	// InPlaceResize allows changing the CPU count of exclusive containers
	// (inPlaceResize). When false such changes are refused.
	InPlaceResize bool
	// ScaleDownDelay keeps the CPUs a decrease of an exclusive container
	// releases with the container that long, so its application can move
	// its threads off them first (scaleDownDelay); 0 releases them at
	// once.
	ScaleDownDelay time.Duration
	// AlignMemory also sets cpuset.mems to the NUMA nodes of a container's
	// exclusive CPUs (alignMemory).
	AlignMemory bool
	// MetricsAddress is the listen address of /metrics; "" disables the
	// endpoint (metricsAddress).
	MetricsAddress string
	// ProbeSocket is the Unix socket the probe command asks the plugin's
	// /healthz and /readyz on; "" serves none (probeSocket).
	ProbeSocket string
	// HealthAddress is the listen address of /healthz and /readyz over
	// HTTP, apart from /metrics; "" opens none (healthAddress).
	HealthAddress string
	// DebugAddress is the listen address of /debug/state, which shows pod
	// UIDs, names and cpusets: loopback by default; "" disables it
	// (debugAddress).
	DebugAddress string
	// LogLevel is the logrus level (logLevel).
	LogLevel logrus.Level
	// LogFormat is how log lines are written (logFormat).
	LogFormat LogFormat
	// KubeletCheckpoint is the kubelet's cpu_manager_state, imported once
	// when the plugin has no checkpoint of its own; "" disables the import
	// (kubeletCheckpoint).
	KubeletCheckpoint string
	// DisconnectedTimeout is how long the plugin may go without a
	// synchronized NRI connection before /healthz fails, so that the
	// liveness probe restarts it; 0 never fails it (disconnectedTimeout).
	DisconnectedTimeout time.Duration
	// NRIConfigureTimeout bounds a new NRI connection from the dial to
	// the runtime's Configure: past it the plugin drops the connection and
	// dials again (the NRI stub waits for ever when the runtime closes the
	// connection between the registration and Configure); 0 waits for ever
	// (nriConfigureTimeout).
	NRIConfigureTimeout time.Duration
	// KubernetesAPI turns on the plugin's use of the Kubernetes API
	// (kubernetesAPI): a watch of this node's pods for exact pod-level
	// admission of a resize, and events on pods. It needs the in-cluster
	// configuration of a pod's service account and the node's name
	// (NODE_NAME).
	KubernetesAPI bool
	// ObserveOnly has the plugin decide and record without handing the
	// runtime anything (observeOnly).
	ObserveOnly bool
	// NodeResourceTopology is the export of the node's exclusive CPUs per
	// NUMA node as a NodeResourceTopology object (nodeResourceTopology);
	// it needs KubernetesAPI.
	NodeResourceTopology NodeResourceTopology
}

// NodeResourceTopology configures the NodeResourceTopology export.
type NodeResourceTopology struct {
	// Enabled writes this node's object (enabled).
	Enabled bool `json:"enabled"`
	// RemoveOnExit deletes it when the plugin stops (removeOnExit).
	RemoveOnExit bool `json:"removeOnExit"`
}

// LogFormat is how the plugin writes its log lines.
type LogFormat string

// The logFormat values.
const (
	// LogFormatText writes logfmt-like lines: time="…" level=info msg="…".
	LogFormatText LogFormat = "text"
	// LogFormatJSON writes one JSON object per line, for log pipelines.
	LogFormatJSON LogFormat = "json"
)

// IsolatedCPUs is what isolated CPUs serve: shared or exclusive.
type IsolatedCPUs string

// The isolatedCPUs modes.
const (
	// IsolatedCPUsShared treats isolated CPUs like any other: in the shared
	// pool when not exclusive, as the kubelet does.
	IsolatedCPUsShared IsolatedCPUs = "shared"
	// IsolatedCPUsExclusive keeps isolated CPUs out of the shared pool and
	// gives them to exclusive containers before any other CPU.
	IsolatedCPUsExclusive IsolatedCPUs = "exclusive"
)

// Defaults of the keys whose default is worth naming outside keys.
const (
	// KubeletCheckpointPath is where the kubelet keeps its CPU manager
	// checkpoint (what kubeletCheckpoint names to import it).
	KubeletCheckpointPath = "/var/lib/kubelet/cpu_manager_state"
	// DefaultDisconnectedTimeout is the default of disconnectedTimeout.
	DefaultDisconnectedTimeout = time.Minute
	// DefaultNRIConfigureTimeout is the default of nriConfigureTimeout:
	// the NRI registration timeout (5 s) and request timeout (2 s) of
	// containerd, with a margin.
	DefaultNRIConfigureTimeout = 10 * time.Second
)

// Default returns the configuration used for every key the file does not
// set: each key's default, as keys declares it.
func Default() *Config {
	c, err := newDocument().build()
	if err != nil {
		panic(fmt.Sprintf("config: the defaults are invalid: %v", err)) // TestDefaultValues
	}
	return c
}
