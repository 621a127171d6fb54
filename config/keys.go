package config

import (
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// key declares one configuration key. It is the one place a key is
// written: the parser, Diff, the flags, the checkpoint's record and the
// generated documents (config/example.yaml, the reference table of
// docs/install.md, the chart's values.schema.json: go generate ./config)
// read it.
type key struct {
	// name is the key as the file writes it.
	name string
	// doc says what the key does, for operators: paragraphs separated by
	// blank lines, with lines wrapped anyhow.
	doc string
	// when says when a running plugin applies a change of the key.
	when applyWhen
	// value binds the key to its field of Config: the value's type in the
	// file, its default, its validation and its JSON schema.
	value value
	// flag is the command-line flag overriding the key; nil for none.
	flag *flagSpec
	// checkLast reports the key's problems after those of the other keys
	// (before the option maps'), where they have always been reported.
	checkLast bool
	// commonOnly, when not empty, is why only the common file may set the
	// key, not a group's file (groups.go): the key names what the
	// DaemonSet mounts or listens on for every node, or what commands
	// reading the common file alone must find.
	commonOnly string
}

// applyWhen says when a changed key can take effect in a running plugin.
type applyWhen int

const (
	// applyLive: safe at any time; affects only what the plugin does next.
	applyLive applyWhen = iota
	// applyWithoutExclusive: changes which CPUs are free or how they are
	// placed, so it can only take effect while no exclusive container holds
	// CPUs. The checkpoint records these keys (AllocationKeys).
	applyWithoutExclusive
	// applyAtRestart: fixed for the life of the process.
	applyAtRestart
)

// String is how logs (Changes.String) and the documents name it.
func (w applyWhen) String() string {
	switch w {
	case applyLive:
		return "live"
	case applyWithoutExclusive:
		return "without exclusive containers"
	default:
		return "at restart"
	}
}

// Why a key is the common file's alone (key.commonOnly).
const (
	commonMounted    = "it names a host path the DaemonSet mounts on every node"
	commonListener   = "it is an address the DaemonSet's ports, Service and NetworkPolicy expect on every node"
	commonProbe      = "the probes (nri-cpumanager probe) read the common file alone"
	commonStateDir   = "nri-cpumanager state and export-kubelet read the common file alone, and the plugin records its group there"
	commonPluginName = "containerd's required_plugins and the validating plugin beside the plugin (validate-adjustments) know one name"
	commonAPI        = "the plugin reads its node's group through the Kubernetes API"
	commonExport     = "the export's RBAC, CRD and admission policy are installed for every node (the chart's config value, components/noderesourcetopology's flag)"
)

// keys declares every configuration key, in the order the file, the
// documents and the messages list them. It is read-only.
var keys = []key{
	{
		name: "nriSocket", when: applyAtRestart, commonOnly: commonMounted,
		doc:   `containerd's NRI socket.`,
		value: text(func(c *Config) *string { return &c.NRISocket }, "/var/run/nri/nri.sock", pathText),
		flag:  &flagSpec{name: "nri-socket", usage: "`path` of containerd's NRI socket"},
	},
	{
		name: "pluginName", when: applyAtRestart, commonOnly: commonPluginName,
		doc: `The name the plugin registers with NRI (containerd's required_plugins
			names it): letters, digits and _.+-.`,
		value: text(func(c *Config) *string { return &c.PluginName }, "cpumanager", pluginNameText),
		flag:  &flagSpec{name: "plugin-name", usage: "`name` the plugin registers with NRI"},
	},
	{
		name: "pluginIndex", when: applyAtRestart,
		doc: `The two-digit index the plugin registers with NRI. It orders plugins:
			a lower index sees each event first. Quote it ("09", not 09).`,
		value: text(func(c *Config) *string { return &c.PluginIndex }, "90", pluginIndexText),
		flag:  &flagSpec{name: "plugin-index", usage: "two-digit NRI plugin `index`"},
	},
	{
		name: "stateDir", when: applyAtRestart, commonOnly: commonStateDir,
		doc: `Directory of the plugin's checkpoint, <stateDir>/cpu_manager_state. It
			must survive plugin restarts (a hostPath in the DaemonSet) and must
			not be the kubelet's directory.`,
		value: text(func(c *Config) *string { return &c.StateDir }, "/var/lib/nri-cpumanager", pathText),
		flag:  &flagSpec{name: "state-dir", usage: "`directory` of the plugin's checkpoint"},
	},
	{
		name: "sysfsRoot", when: applyAtRestart, commonOnly: commonMounted,
		doc: `Where the CPU topology is read from. Change it only for tests on
			fixture trees, or when the host's /sys is mounted elsewhere.`,
		value: text(func(c *Config) *string { return &c.SysfsRoot }, "/sys", pathText),
		flag:  &flagSpec{name: "sysfs-root", usage: "`path` the CPU topology is read from"},
	},
	{
		name: "cgroupfsRoot", when: applyAtRestart, commonOnly: commonMounted,
		doc: `Where containers' cgroup cpusets are checked after an update. "" turns
			the verification of containers' cpusets off (pinning works without
			it, but an update containerd failed to apply goes unnoticed).`,
		value: text(func(c *Config) *string { return &c.CgroupfsRoot }, "/sys/fs/cgroup", optionalPathText),
		flag:  &flagSpec{name: "cgroupfs-root", usage: "`path` of the host's cgroup tree, \"\" turns the verification of cpusets off"},
	},
	{
		name: "reservedSystemCPUs", when: applyWithoutExclusive,
		doc: `CPUs kept for the system and never given to a container exclusively,
			as the kubelet's --reserved-cpus: a CPU list ("0", "0,32", "0-1");
			"" reserves no CPU at all.`,
		value: cpuList(func(c *Config) *cpuset.CPUSet { return &c.ReservedSystemCPUs }, "0"),
		flag: &flagSpec{name: "reserved-cpus", usage: "CPU `list` reserved for the system, e.g. 0,2-3; replaces reservedCPUCount",
			set: reservedCPUsFlag},
	},
	{
		name: "reservedCPUCount", when: applyWithoutExclusive,
		doc: `A count of CPUs to reserve instead of a list, placed by topology as
			the kubelet's static policy places its systemReserved + kubeReserved
			CPUs. Writing only reservedCPUCount replaces the default list "0";
			another list with a count is an error.`,
		value: count(func(c *Config) *int { return &c.ReservedCPUCount }, 0),
	},
	{
		name: "isolatedCPUs", when: applyWithoutExclusive,
		doc: `What the CPUs the kernel isolates (isolcpus=, listed in
			/sys/devices/system/cpu/isolated) serve.

			shared: like any other CPU, as the kubelet does; shared containers
			run on them too (the kernel does not balance load onto them).

			exclusive: only exclusive containers, which get them before any
			other CPU where the topology rules allow; the shared pool is the
			other CPUs and must keep at least one.

			nri-cpumanager validate-config shows what the choice makes of them.`,
		value: text(func(c *Config) *IsolatedCPUs { return &c.IsolatedCPUs }, string(IsolatedCPUsShared), isolatedCPUsText),
	},
	{
		name: "cpuManagerPolicyOptions", when: applyWithoutExclusive,
		doc: `The kubelet's static CPU manager policy options, each "true" or
			"false". full-pcpus-only cannot be combined with
			distribute-cpus-across-cores, nor distribute-cpus-across-cores with
			distribute-cpus-across-numa. strict-cpu-reservation keeps the
			reserved CPUs out of the shared pool too.`,
		value: options(func(c *Config) *cpuallocator.StaticPolicyOptions { return &c.CPUManagerPolicyOptions },
			cpuallocator.ParseStaticPolicyOptions, cpuallocator.StaticPolicyOptions.Map,
			cpuallocator.StaticPolicyOptionNames(), nil),
	},
	{
		name: "topologyManagerPolicy", when: applyWithoutExclusive,
		doc: `NUMA alignment of exclusive CPUs: none, best-effort, restricted or
			single-numa-node. single-numa-node refuses a container (or a resize)
			whose CPUs do not fit in one NUMA node; restricted refuses an
			affinity wider than the narrowest possible.`,
		value: text(func(c *Config) *cpuallocator.TopologyPolicy { return &c.TopologyManagerPolicy },
			string(cpuallocator.TopologyNone), topologyPolicyText),
	},
	{
		name: "topologyManagerScope", when: applyWithoutExclusive,
		doc: `What one NUMA affinity is computed for, as the kubelet's
			topologyManagerScope: container (each pinned container on its own)
			or pod (all the pinned containers of a pod share one affinity, sized
			for the pod's total; growths keep to it or widen it for the whole
			pod).`,
		value: text(func(c *Config) *cpuallocator.TopologyScope { return &c.TopologyManagerScope },
			string(cpuallocator.ScopeContainer), topologyScopeText),
	},
	{
		name: "topologyManagerPolicyOptions", when: applyWithoutExclusive,
		doc: `The kubelet's topology manager policy options.

			prefer-closest-numa-nodes: "true" prefers, among affinities of equal
			width, the NUMA nodes closest to each other.

			max-allowable-numa-nodes: the widest affinity considered, an integer
			≥ 1.`,
		value: options(func(c *Config) *cpuallocator.TopologyOptions { return &c.TopologyManagerPolicyOptions },
			cpuallocator.ParseTopologyOptions, cpuallocator.TopologyOptions.Map,
			cpuallocator.TopologyOptionNames(), map[string]Schema{"max-allowable-numa-nodes": positiveIntegerSchema}),
	},
	{
		name: "inPlaceResize", when: applyLive,
		doc: `false: refuse any change of the CPU count of a container with
			exclusive CPUs (the resize fails with reason featureDisabledError).`,
		value: boolean(func(c *Config) *bool { return &c.InPlaceResize }, true),
	},
	{
		name: "scaleDownDelay", when: applyLive, checkLast: true,
		doc: `How long a container that shrinks keeps the CPUs its decrease
			releases, so that its application can move its threads off them
			first (KEP-6122's scale-delay-time): its cpuset changes only then.
			"0s" releases them at once; at most 10m. A growth in the meantime
			takes them back first; a restart of the container ends the delay.`,
		value: text(func(c *Config) *time.Duration { return &c.ScaleDownDelay }, "0s", scaleDownDelayText),
	},
	{
		name: "alignMemory", when: applyLive,
		doc: `true: also set a container's cpuset.mems to the NUMA nodes of its
			exclusive CPUs.`,
		value: boolean(func(c *Config) *bool { return &c.AlignMemory }, false),
	},
	{
		name: "metricsAddress", when: applyAtRestart, commonOnly: commonListener,
		doc:   `Listen address of /metrics; "" disables it.`,
		value: text(func(c *Config) *string { return &c.MetricsAddress }, ":9101", addressText),
		flag:  &flagSpec{name: "metrics-address", usage: "host:port `address` of /metrics, \"\" disables it"},
	},
	{
		name: "probeSocket", when: applyAtRestart, commonOnly: commonProbe,
		doc: `Unix socket the probes ask: the kubelet's exec probes
			(nri-cpumanager probe live|ready) connect to it inside the plugin's
			container, where nothing on the network can reach it or crowd it
			out. "" serves no probe socket.`,
		value: text(func(c *Config) *string { return &c.ProbeSocket }, "/run/nri-cpumanager/probe.sock", optionalPathText),
		flag:  &flagSpec{name: "probe-socket", usage: "`path` of the probes' Unix socket, \"\" serves none"},
	},
	{
		name: "healthAddress", when: applyAtRestart, commonOnly: commonListener,
		doc: `Listen address of /healthz and /readyz over HTTP, for probes that
			must come over the network (keep-alive off, a short header
			timeout). "" (the default) opens no port: the shipped probes ask the
			probe socket (probeSocket). The kubelet's HTTP probes connect to the
			pod's address, so a loopback address (127.0.0.1:P, [::1]:P,
			localhost:P) serves only clients inside the plugin's pod:
			validate-config and the start-up log warn of it, and the chart, whose
			probes use healthAddress when probeSocket is "", refuses it then.`,
		value: text(func(c *Config) *string { return &c.HealthAddress }, "", addressText),
		flag: &flagSpec{name: "health-address",
			usage: "host:port `address` of /healthz and /readyz over HTTP, \"\" (the default) opens none"},
	},
	{
		name: "debugAddress", when: applyAtRestart, commonOnly: commonListener,
		doc: `Listen address of /debug/state (pod UIDs and names, cpusets, the
			invariant check, as JSON). Loopback by default: inside the plugin's
			pod, reach it with kubectl port-forward. "" disables it.`,
		value: text(func(c *Config) *string { return &c.DebugAddress }, "127.0.0.1:9102", addressText),
		flag:  &flagSpec{name: "debug-address", usage: "host:port `address` of /debug/state, \"\" disables it"},
	},
	{
		name: "logLevel", when: applyLive,
		doc:   `The log level: trace, debug, info, warn or error.`,
		value: text(func(c *Config) *logrus.Level { return &c.LogLevel }, "info", logLevelText),
		flag:  &flagSpec{name: "log-level", usage: "`level`: trace, debug, info, warn or error"},
	},
	{
		name: "logFormat", when: applyAtRestart,
		doc: `How log lines are written: text (time="…" level=info msg="…"
			field=value) or json (one JSON object per line, for log pipelines
			that parse fields: time, level, msg and the fields).`,
		value: text(func(c *Config) *LogFormat { return &c.LogFormat }, string(LogFormatText), logFormatText),
		flag:  &flagSpec{name: "log-format", usage: "`format` of the log lines: text or json"},
	},
	{
		name: "kubeletCheckpoint", when: applyAtRestart, commonOnly: commonMounted,
		doc: `The kubelet's own CPU manager checkpoint
			(/var/lib/kubelet/cpu_manager_state), imported once when the plugin
			has no checkpoint of its own, so pods pinned by the kubelet's static
			policy keep their CPUs. "" (the default) imports nothing: a node
			moves from the kubelet's static policy with the component
			deploy/components/kubelet-checkpoint (docs/install.md).`,
		value: text(func(c *Config) *string { return &c.KubeletCheckpoint }, "", optionalPathText),
		flag: &flagSpec{name: "kubelet-checkpoint",
			usage: "`path` of the kubelet's cpu_manager_state to import once, \"\" disables it"},
	},
	{
		name: "disconnectedTimeout", when: applyAtRestart,
		doc: `How long the plugin may go without a synchronized NRI connection
			(while containerd is away, or hangs the connection) before /healthz
			fails, so that the DaemonSet's liveness probe restarts it. "0s"
			never fails it.`,
		value: text(func(c *Config) *time.Duration { return &c.DisconnectedTimeout }, DefaultDisconnectedTimeout.String(), durationText),
	},
	{
		name: "nriConfigureTimeout", when: applyAtRestart,
		doc: `How long a new NRI connection may take from the dial to the
			runtime's Configure before the plugin drops it and dials again: the
			NRI stub waits for ever when the runtime closes the connection
			between the plugin's registration and Configure (containerd
			restarting at that moment). Once configured, a connection waits for
			its Synchronize as long as containerd takes. "0s" turns this
			watchdog off.`,
		value: text(func(c *Config) *time.Duration { return &c.NRIConfigureTimeout }, DefaultNRIConfigureTimeout.String(), durationText),
	},
	{
		name: "kubernetesAPI", when: applyAtRestart, commonOnly: commonAPI,
		doc: `true: use the Kubernetes API (the DaemonSet of deploy/ and the chart
			set it, with a service account whose RBAC allows just this): one
			watch of the pods on this node, so that a resize of a pod with
			several exclusive containers is decided whole, from the pod's spec,
			before any container changes; and events on pods for refusals and
			resizes (kubectl describe pod). The node's name comes from
			$NODE_NAME (the DaemonSet sets it from the downward API), else the
			host name.

			It is the default, as deploy/ and the chart ship it: a plugin run by
			hand outside a cluster (no service account, no $KUBECONFIG) says so
			once and works on NRI alone. false: NRI alone, no API client at all.
			Without the API server (down, slow, forbidden) the plugin keeps
			working on NRI alone and says so in its log and in the metric
			nri_cpumanager_kubernetes_api_available.`,
		value: boolean(func(c *Config) *bool { return &c.KubernetesAPI }, true),
		flag: &flagSpec{name: "kubernetes-api",
			usage: "`true` uses the Kubernetes API (pod watch, events), false NRI alone"},
	},
	{
		name: "nodeResourceTopology", when: applyAtRestart, commonOnly: commonExport,
		doc: `Export this node's exclusive CPUs per NUMA node as the
			NodeResourceTopology object named after the node
			(topology.node.k8s.io/v1alpha2, read by the scheduler plugin
			NodeResourceTopologyMatch).

			enabled: true needs kubernetesAPI: true, the CRD installed and the
			RBAC of deploy/components/noderesourcetopology (chart:
			config.nodeResourceTopology.enabled, which adds them).

			removeOnExit: true deletes the object whenever the plugin stops
			(uninstall, but also every restart and rolling update, while the
			scheduler then sees no object for the node); false leaves it to
			kubectl delete noderesourcetopology NODE.`,
		value: mapping(func(c *Config) *NodeResourceTopology { return &c.NodeResourceTopology }),
		flag: &flagSpec{name: "node-resource-topology",
			usage: "`true` exports the NodeResourceTopology object (nodeResourceTopology.enabled)",
			set:   nodeResourceTopologyFlag},
	},
	{
		name: "observeOnly", when: applyAtRestart,
		doc: `true: a safe first step on a production node. The plugin decides,
			records (checkpoint, nri-cpumanager state), logs, meters and exports
			as usual, and hands the runtime nothing: no cpuset is changed, no
			request refused, no event written on a pod; its log lines carry
			observeOnly=true and nri_cpumanager_observe_only is 1. Restarted with
			false, it pins the running containers as it decided.`,
		value: boolean(func(c *Config) *bool { return &c.ObserveOnly }, false),
		flag:  &flagSpec{name: "observe-only", usage: "`true` decides and records without changing any cpuset"},
	},
}

// keyNamed returns the declaration of the key name, and whether there is
// one.
func keyNamed(name string) (key, bool) {
	for _, k := range keys {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

// schemaKeys returns the names of the keys, in the table's order.
func schemaKeys() []string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return names
}
