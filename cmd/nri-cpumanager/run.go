package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/kubeapi"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// defaultMemoryLimit is the soft memory limit of the Go runtime when
// GOMEMLIMIT is not set: far above what the plugin needs (a few MiB of
// live heap; 24 MiB of resident memory with 500 containers on 4096 CPUs),
// so that it only makes the collector work harder in a spike rather than
// let the process grow.
const defaultMemoryLimit = 32 << 20

// runPlugin runs the plugin until SIGTERM or SIGINT.
func runPlugin(args []string, _, stderr io.Writer) error {
	// The garbage collector keeps Go's default target (GOGC=100): the live
	// heap is a few MiB, and a higher target only lets garbage pile up
	// (docs/performance.md, "Load": where the memory went). The soft
	// memory limit comes from GOMEMLIMIT (the DaemonSet sets it from its
	// memory limit), else defaultMemoryLimit.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	f := newFlags("run", stderr)
	cfg, err := f.load(args)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	for _, w := range f.warnings {
		log.WithField("config", f.configPath).Warn(w)
	}

	pol, err := assemble.FromSysfs(cfg)
	if err != nil {
		return err
	}
	store, err := state.NewStore(cfg.StateDir, state.WithLogger(log))
	if err != nil {
		return fmt.Errorf("stateDir: %w", err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.WithError(err).Error("closing the state store")
		}
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	info := buildInfo()
	metrics, err := plugin.NewMetrics(reg, info)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	kube := kubernetesAPI(cfg, reg, log, info.Version)
	var api plugin.API // a nil *kubeapi.API must stay a nil interface
	if kube != nil {
		api = kube
	}
	// The runtime each connection's Configure names, for the node's
	// checks (watchNode); a send never blocks the NRI request.
	runtimes := make(chan runtimeInfo, 8)
	p, err := plugin.New(pol, store, plugin.Options{
		Name:                cfg.PluginName,
		Index:               cfg.PluginIndex,
		Socket:              cfg.NRISocket,
		CgroupfsRoot:        cfg.CgroupfsRoot,
		SysfsRoot:           cfg.SysfsRoot,
		ObserveOnly:         cfg.ObserveOnly,
		VerifyInterval:      30 * time.Second,
		KubeletCheckpoint:   cfg.KubeletCheckpoint,
		DisconnectedTimeout: cfg.DisconnectedTimeout,
		ConfigureTimeout:    configureTimeout(cfg.NRIConfigureTimeout),
		Log:                 log,
		Metrics:             metrics,
		Config:              assemble.Record(cfg, pol),
		RecordedPolicy:      assemble.RecordedPolicy(cfg, pol.Allocator().Topology()),
		ReleasedPolicy:      assemble.ReleasedPolicy(cfg, pol.Allocator().Topology()),
		API:                 api,
		OnConfigure: func(name, version string) {
			select {
			case runtimes <- runtimeInfo{name, version}:
			default:
			}
		},
	})
	if err != nil {
		return err
	}
	if kube != nil {
		kube.OnPodEnded(p.EndPod) // a pod terminal or deleted in the API gives its CPUs back
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	listening := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nri_cpumanager", Name: "endpoint_listening",
		Help: "1 while an endpoint the configuration asks for (by its key: metricsAddress, probeSocket, healthAddress, debugAddress) listens, 0 while it cannot bind its address (retried every 10 s); none is a reason not to pin."},
		[]string{"endpoint"})
	reg.MustRegister(listening)
	for _, ep := range endpoints(cfg, p, reg) {
		if ep.address == "" {
			continue
		}
		defer serveEndpoint(ctx, ep, listening.WithLabelValues(ep.key), log.WithFields(logrus.Fields{"endpoint": ep.paths, "key": ep.key}))()
	}

	if f.configPath != "" {
		r := assemble.NewReloader(log, p, pol.Allocator().Topology(), cfg)
		w, err := config.NewWatcher(f.configPath, cfg, config.WatchOptions{
			Flags:    f.overrides,
			OnChange: func(next *config.Config) { metrics.ConfigRejected(r.Apply(next) != nil) },
			OnError: func(err error) {
				metrics.ConfigRejected(true)
				log.WithError(err).Error("new configuration rejected; keeping the running one")
			},
		})
		if err != nil {
			return err
		}
		go w.Run(ctx)
	}

	log.WithFields(logrus.Fields{
		"version": info.Version, "revision": info.Revision,
		"socket": cfg.NRISocket, "stateDir": cfg.StateDir, "online": pol.Allocator().Topology().CPUs().String(),
		"reserved": pol.Options().Reserved.String(), "topologyPolicy": pol.Options().TopologyPolicy,
	}).Info("nri-cpumanager starting")
	use := assemble.DescribeCPUs(cfg, pol)
	log.WithFields(logrus.Fields{"isolated": use.Isolated.String(), "isolatedCPUs": use.Mode, "exclusiveCPUs": use.Exclusive.String(), "sharedPool": use.Pool.String()}).
		Info("CPU use")
	for _, w := range use.Warnings {
		log.Warn(w)
	}
	log.WithFields(features(cfg)).Info("features")
	if ch := config.Diff(config.Default(), cfg); ch.Empty() {
		log.Info("every configuration key has its default")
	} else {
		log.WithField("changed", ch.String()).Info("configuration keys set apart from their defaults, by when a change applies")
	}
	kubeDone := make(chan struct{})
	go func() {
		defer close(kubeDone)
		if kube != nil {
			if err := kube.Run(ctx, p.Topology); err != nil {
				log.WithError(err).Error("Kubernetes API")
			}
		}
	}()
	nodeFailures := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "nri_cpumanager", Name: "node_check_failures",
		Help: "Problems the plugin's checks of its node (nri-cpumanager doctor's) found at its first connection to the runtime (or 2 minutes after its start without one) and at each connection to another runtime version: a kubelet with its own static CPU manager, another reservation, NRI off, a containerd older than 2.x, a cgroup driver that differs, ..."})
	reg.MustRegister(nodeFailures)
	var nodeEvent func(string)
	if kube != nil {
		nodeEvent = kube.NodeCheckFailed
	}
	go watchNode(ctx, nodeCheckWait, runtimes, func(rt runtimeInfo) {
		checkNodeAtStart(cfg, startHostRoot, rt, log, nodeFailures, nodeEvent)
	})
	err = p.Run(ctx)
	stop()
	<-kubeDone // the NodeResourceTopology object is removed when asked to
	log.Info("nri-cpumanager stopped")
	return err
}

// endpoint is one HTTP listener of the plugin: its configuration key, the
// network (tcp, or unix for a socket path) and address, what it serves.
type endpoint struct {
	key, network, address, paths string
	handler                      http.Handler
	limits                       httpLimits
}

// endpoints lists the plugin's HTTP listeners. The kubelet's probes ask
// the probe socket (the probe command, inside the plugin's container),
// which nothing on the network reaches: no client of /metrics, which any
// pod the NetworkPolicy admits may be, can crowd them out. healthAddress
// serves them over HTTP too, for those who want it.
func endpoints(cfg *config.Config, p *plugin.Plugin, reg prometheus.Gatherer) []endpoint {
	return []endpoint{
		{"metricsAddress", "tcp", cfg.MetricsAddress, "/metrics", p.MetricsHandler(reg), metricsLimits},
		{"probeSocket", "unix", cfg.ProbeSocket, "/healthz, /readyz", p.ProbeHandler(), socketLimits},
		{"healthAddress", "tcp", cfg.HealthAddress, "/healthz, /readyz", p.ProbeHandler(), probeLimits},
		{"debugAddress", "tcp", cfg.DebugAddress, "/debug/state", p.DebugHandler(), metricsLimits},
	}
}

// configureTimeout is the plugin's ConfigureTimeout for nriConfigureTimeout:
// 0 turns the watchdog off.
func configureTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// kubernetesAPI returns the plugin's Kubernetes API when the config turns
// it on; nil when it is off, or when the plugin has no client for it (then
// it runs on NRI alone and says so in its log and metrics).
func kubernetesAPI(cfg *config.Config, reg prometheus.Registerer, log *logrus.Logger, version string) *kubeapi.API {
	if !cfg.KubernetesAPI {
		return nil
	}
	// client-go logs through klog, every retry of a failed request at
	// error level: into the plugin's log at debug level, since kubeapi says
	// once, itself, what the plugin loses without the API server.
	klog.LogToStderr(false)
	klog.SetOutput(klogWriter{log})
	nrt := cfg.NodeResourceTopology.Enabled
	node := kubeapi.NodeName()
	rc, err := kubeapi.Config(version)
	if err == nil {
		var clients kubeapi.Clients
		if clients, err = kubeapi.NewClients(rc, node, nrt); err == nil {
			var api *kubeapi.API
			api, err = kubeapi.New(kubeapi.Options{NodeName: node, Clients: clients, Log: log, Registerer: reg,
				RemoveTopologyOnExit: cfg.NodeResourceTopology.RemoveOnExit})
			if err == nil {
				return api
			}
		}
	}
	if kubeapi.NotInCluster(err) {
		// Run by hand, outside a pod, without a kubeconfig.
		log.Info("not in a cluster (no service account, no KUBECONFIG): working on NRI alone; kubernetesAPI: false says so quietly")
	} else {
		log.WithError(err).Error("kubernetesAPI is on but the plugin has no client for the Kubernetes API: " +
			"working on NRI alone (no exact pod resize admission, no events, no NodeResourceTopology)")
	}
	if err := kubeapi.Unavailable(reg, nrt); err != nil {
		log.WithError(err).Error("Kubernetes API metrics")
	}
	return nil
}

// klogWriter writes klog's lines to the plugin's log at debug level.
type klogWriter struct{ log *logrus.Logger }

func (w klogWriter) Write(p []byte) (int, error) {
	w.log.WithField("component", "client-go").Debug(strings.TrimSpace(string(p)))
	return len(p), nil
}
