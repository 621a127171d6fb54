package main

import (
	"io"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

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
	var where []string
	if cfg.ProbeSocket != "" {
		where = append(where, cfg.ProbeSocket)
	}
	if cfg.HealthAddress != "" {
		where = append(where, cfg.HealthAddress)
	}
	probes := or(strings.Join(where, " "), "off")
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
	configureLogger(log, cfg)
	return log
}

// configureLogger sets log's level and format to cfg's.
func configureLogger(log *logrus.Logger, cfg *config.Config) {
	if cfg.LogFormat == config.LogFormatJSON {
		log.SetFormatter(&logrus.JSONFormatter{TimestampFormat: time.RFC3339Nano})
	} else {
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.RFC3339Nano})
	}
	log.SetLevel(cfg.LogLevel)
}
