package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// startHostRoot is where the DaemonSet's doctor mounts put the host's
// files (the chart's doctor.enabled, deploy/components/doctor).
const startHostRoot = "/host"

// finding is one of doctor's findings.
type finding struct{ status, topic, text, fix string }

// checkNodeAtStart runs doctor's checks of the node (containerd, the
// kubelet, cgroups) as the plugin's pod
// sees it (the host's files under startHostRoot when the doctor mounts are
// there; a kubelet configuration it cannot see is a warning here, the
// plugin goes on) and reports them: each problem and warning in the log,
// the problems' number in failures, and the problems together in one
// Warning event on the Node (event, nil without the Kubernetes API). It
// returns the findings.
func checkNodeAtStart(cfg *config.Config, hostRoot string, log *logrus.Logger, failures prometheus.Gauge, event func(note string)) []finding {
	d := &doctorRun{hostRoot: hostRoot, cfg: cfg, out: io.Discard, unseenKubelet: statusWarning,
		containerdConfig: "/etc/containerd/config.toml", containerdSocket: "/run/containerd/containerd.sock"}
	d.checkContainerd()
	d.checkKubelet()
	d.checkCgroups()
	// Not doctor's CPU checks: the plugin logged what its configuration
	// makes of the CPUs already ("CPU use"), and a second discovery of the
	// topology would cost its memory again (megabytes at 4096 CPUs).
	var problems []string
	for _, f := range d.findings {
		entry := log.WithFields(logrus.Fields{"component": "node-check", "check": f.topic})
		if f.fix != "" && f.status != statusOK {
			entry = entry.WithField("fix", f.fix)
		}
		switch f.status {
		case statusFail:
			entry.Error(f.text)
			problems = append(problems, f.topic+": "+f.text)
		case statusWarning:
			entry.Warn(f.text)
		default:
			entry.Debug(f.text)
		}
	}
	failures.Set(float64(len(problems)))
	if len(problems) > 0 && event != nil {
		event(fmt.Sprintf("%d problem(s) found at the plugin's start (nri-cpumanager doctor says the same, with the fixes): %s",
			len(problems), strings.Join(problems, "; ")))
	}
	return d.findings
}

// features says which of the plugin's features a configuration turns on
// and off, for the start-up log: an operator reads there that a
// configuration file turned off what they meant to keep.
func features(cfg *config.Config) logrus.Fields {
	onOff := func(on bool) string {
		if on {
			return "on"
		}
		return "off"
	}
	or := func(value, otherwise string) string {
		if value == "" {
			return otherwise
		}
		return value
	}
	probes := or(cfg.HealthAddress, "on metricsAddress")
	if cfg.HealthAddress == "" && cfg.MetricsAddress == "" {
		probes = "off"
	}
	return logrus.Fields{
		"kubernetesAPI":        onOff(cfg.KubernetesAPI),
		"nodeResourceTopology": onOff(cfg.KubernetesAPI && cfg.NodeResourceTopology.Enabled),
		"inPlaceResize":        onOff(cfg.InPlaceResize),
		"alignMemory":          onOff(cfg.AlignMemory),
		"observeOnly":          onOff(cfg.ObserveOnly),
		"kubeletImport":        or(cfg.KubeletCheckpoint, "off"),
		"cpusetVerification":   onOff(cfg.CgroupfsRoot != ""),
		"topologyManager":      string(cfg.TopologyManagerPolicy) + "/" + string(cfg.TopologyManagerScope),
		"metrics":              or(cfg.MetricsAddress, "off"),
		"probes":               probes,
		"debug":                or(cfg.DebugAddress, "off"),
	}
}

// newLogger returns the plugin's logger: cfg's level, lines in cfg's
// format (logFormat) with nanosecond RFC 3339 times, written to out.
func newLogger(cfg *config.Config, out io.Writer) *logrus.Logger {
	log := logrus.New()
	log.SetOutput(out)
	if cfg.LogFormat == config.LogFormatJSON {
		log.SetFormatter(&logrus.JSONFormatter{TimestampFormat: time.RFC3339Nano})
	} else {
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.RFC3339Nano})
	}
	log.SetLevel(cfg.LogLevel)
	return log
}
