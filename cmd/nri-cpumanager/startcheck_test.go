package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// TestCheckNodeAtStart: the plugin runs doctor's checks at start: a
// problem (the kubelet's own static CPU manager, another reservation) is
// an error in the log, counted in node_check_failures and told in one
// event on the Node; a kubelet configuration the pod cannot see is a
// warning only (no mount: the plugin goes on).
func TestCheckNodeAtStart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		kubelet      string // the kubelet's configuration file, "" for none
		wantFailures float64
		wantEvent    []string
		wantWarning  string
	}{
		{"a static kubelet", "kind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0-1\"\n", 2,
			[]string{"2 problem(s) found at the plugin's start", "kubelet: cpuManagerPolicy: static", "kubelet: reserves CPUs 0-1"}, ""},
		{"a kubelet not seen", "", 0, nil, "configuration not found"},
		{"a kubelet as the plugin wants it", kubeletNone, 0, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newDoctorNode(t)
			if tc.kubelet != "" {
				n.host("/var/lib/kubelet/config.yaml", tc.kubelet)
			}
			cfg := config.Default()
			cfg.SysfsRoot, cfg.CgroupfsRoot, cfg.NRISocket = n.sys, n.cgroups, n.ns
			log, hook := test.NewNullLogger()
			failures := prometheus.NewGauge(prometheus.GaugeOpts{Name: "node_check_failures"})
			var events []string
			checkNodeAtStart(cfg, n.root, log, failures, func(note string) { events = append(events, note) })
			if got := testutil.ToFloat64(failures); got != tc.wantFailures {
				t.Errorf("node_check_failures = %v, want %v", got, tc.wantFailures)
			}
			errors := 0
			warned := false
			for _, e := range hook.AllEntries() {
				switch e.Level {
				case logrus.ErrorLevel:
					errors++
				case logrus.WarnLevel:
					warned = warned || containsAll(e.Message, tc.wantWarning)
				}
			}
			if float64(errors) != tc.wantFailures {
				t.Errorf("%d error lines, want one per problem (%v)", errors, tc.wantFailures)
			}
			if tc.wantWarning != "" && !warned {
				t.Errorf("no warning saying %q", tc.wantWarning)
			}
			switch {
			case len(tc.wantEvent) == 0 && len(events) != 0:
				t.Errorf("events %q, want none", events)
			case len(tc.wantEvent) != 0 && (len(events) != 1 || !containsAll(events[0], tc.wantEvent...)):
				t.Errorf("events %q, want one saying %q", events, tc.wantEvent)
			}
		})
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
