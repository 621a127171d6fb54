package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// TestKubernetesAPIOutsideACluster: kubernetesAPI is on by default, as
// deploy/ ships it; a plugin run by hand outside a cluster (no service
// account, no KUBECONFIG) says once, at info, that it works on NRI alone,
// and logs no error.
func TestKubernetesAPIOutsideACluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("KUBECONFIG", "")
	cfg := config.Default()
	if !cfg.KubernetesAPI {
		t.Fatal("kubernetesAPI is off by default: a configuration file naming only what it changes would turn off what deploy/ ships")
	}
	log, hook := test.NewNullLogger()
	rc, err := restConfig(cfg, log, "test")
	if api := kubernetesAPI(cfg, rc, err, prometheus.NewRegistry(), log, nil); api != nil {
		t.Fatal("an API client outside a cluster")
	}
	var info bool
	for _, e := range hook.AllEntries() {
		if e.Level <= logrus.WarnLevel {
			t.Errorf("%s: %s", e.Level, e.Message)
		}
		info = info || e.Level == logrus.InfoLevel && e.Message == "not in a cluster (no service account, no KUBECONFIG): working on NRI alone; kubernetesAPI: false says so quietly"
	}
	if !info {
		t.Errorf("no info line saying the plugin works on NRI alone outside a cluster")
	}
}

// TestFeaturesAtStart: the start-up log's features line says what a
// configuration turns off, the way an operator would not guess from a
// file that names only some keys.
func TestFeaturesAtStart(t *testing.T) {
	on := features(config.Default())
	for key, want := range map[string]string{"kubernetesAPI": "on", "nodeResourceTopology": "off", "observeOnly": "off", "kubeletImport": "off",
		"inPlaceResize": "on", "cpusetVerification": "on", "probes": "/run/nri-cpumanager/probe.sock", "topologyManager": "none/container"} {
		if on[key] != want {
			t.Errorf("defaults: %s = %v, want %s", key, on[key], want)
		}
	}
	cfg, err := config.Parse([]byte("kubernetesAPI: false\nnodeResourceTopology: {enabled: false}\nobserveOnly: true\nprobeSocket: \"\"\nmetricsAddress: \"\"\ncgroupfsRoot: \"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	off := features(cfg)
	for key, want := range map[string]string{"kubernetesAPI": "off", "observeOnly": "on", "probes": "off", "metrics": "off", "cpusetVerification": "off"} {
		if off[key] != want {
			t.Errorf("%s = %v, want %s", key, off[key], want)
		}
	}
}

// TestLogFormat: logFormat json writes one JSON object per line with the
// time, level, message and fields; text, the logfmt-like default.
func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format config.LogFormat
		want   func(line string) bool
	}{
		{config.LogFormatJSON, func(line string) bool {
			var v map[string]any
			return json.Unmarshal([]byte(line), &v) == nil && v["msg"] == "started" && v["level"] == "info" && v["pod"] == "ns/a" && v["time"] != nil
		}},
		{config.LogFormatText, func(line string) bool {
			return strings.Contains(line, `level=info msg=started pod=ns/a`) && strings.HasPrefix(line, "time=")
		}},
	} {
		cfg := config.Default()
		cfg.LogFormat = tc.format
		var out bytes.Buffer
		newLogger(cfg, &out).WithField("pod", "ns/a").Info("started")
		if line := strings.TrimSpace(out.String()); !tc.want(line) {
			t.Errorf("logFormat %s wrote %q", tc.format, line)
		}
	}
}
