package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// TestCheckNodeAtStart: the plugin runs doctor's checks when it first
// connects to the runtime: a problem (the kubelet's own static CPU
// manager, another reservation, a runtime the plugin does not run on) is
// an error in the log, counted in node_check_failures and told in one
// event on the Node; what the pod cannot see (the kubelet's command
// line, a configuration not mounted) is a warning only.
func TestCheckNodeAtStart(t *testing.T) {
	containerd := runtimeInfo{"containerd", "v2.4.2"}
	for _, tc := range []struct {
		name         string
		kubelet      string // the kubelet's configuration file, "" for none
		dropIn       string // a drop-in of /etc/kubernetes/kubelet.conf.d, "" for none
		runtime      runtimeInfo
		wantFailures float64
		wantEvent    []string
		wantWarning  string
	}{
		{"a static kubelet", "", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0-1\"\n", containerd, 2,
			[]string{"2 problem(s) found at the plugin's start", "kubelet: cpuManagerPolicy: static", "kubelet: reserves CPUs 0-1"}, ""},
		{"a kubelet not seen", "", "", containerd, 0, nil, "unknown: the kubelet's configuration is not visible"},
		{"a kubelet as the plugin wants it", kubeletNone, "", containerd, 0, nil, "unknown: cpuManagerPolicy is none in what doctor read (/var/lib/kubelet/config.yaml), but not seen: the kubelet's command line"},
		{"a drop-in sets static over the file's none", kubeletNone, kubeletStaticDropIn, containerd, 1,
			[]string{"1 problem(s)", "kubelet: cpuManagerPolicy: static (set by /etc/kubernetes/kubelet.conf.d/20-cpu.conf"}, ""},
		{"a drop-in sets none over the file's static", kubeletNone + "cpuManagerPolicy: static\n", kubeletNoneDropIn, containerd, 0, nil,
			"unknown: cpuManagerPolicy is none in what doctor read (/var/lib/kubelet/config.yaml, /etc/kubernetes/kubelet.conf.d/20-cpu.conf), but not seen: the kubelet's command line"},
		{"containerd's socket mounted elsewhere in the pod", kubeletNone, "", containerd, 0, nil, ""},
		{"containerd 1.7", kubeletNone, "", runtimeInfo{"containerd", "v1.7.27"}, 1,
			[]string{"1 problem(s)", "containerd: containerd v1.7.27 (from NRI's Configure): the plugin needs containerd 2.x"}, ""},
		{"containerd 2.2", kubeletNone, "", runtimeInfo{"containerd", "2.2.0"}, 0, nil, "containerd 2.2.0 (from NRI's Configure): UpdatePodSandbox"},
		{"another runtime", kubeletNone, "", runtimeInfo{"cri-o", "1.34.0"}, 1,
			[]string{"containerd: cri-o 1.34.0 (from NRI's Configure): the plugin is written and tested against containerd's NRI"}, ""},
		{"no connection to the runtime", kubeletNone, "", runtimeInfo{}, 0, nil, "no connection to the runtime within 2m0s of the plugin's start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newBareDoctorNode(t)
			if tc.kubelet != "" {
				n.host("/var/lib/kubelet/config.yaml", tc.kubelet)
			}
			if strings.HasPrefix(tc.name, "containerd's socket") {
				// The host's socket elsewhere, its directory mounted at
				// the pod's nriSocket (as make e2e-kube's overlay does).
				n.host("/etc/containerd/config.toml", "version = 3\n[plugins.'io.containerd.nri.v1.nri']\n  disable = false\n  socket_path = '/tmp/ctd-1/nri/nri.sock'\n")
			}
			if tc.dropIn != "" {
				n.host("/etc/kubernetes/kubelet.conf.d/20-cpu.conf", tc.dropIn)
			}
			cfg := config.Default()
			cfg.SysfsRoot, cfg.CgroupfsRoot, cfg.NRISocket = n.sys, n.cgroups, n.ns
			log, hook := test.NewNullLogger()
			failures := prometheus.NewGauge(prometheus.GaugeOpts{Name: "node_check_failures"})
			var events []string
			checkNodeAtStart(cfg, n.root, tc.runtime, log, failures, func(note string) { events = append(events, note) })
			if got := testutil.ToFloat64(failures); got != tc.wantFailures {
				t.Errorf("node_check_failures = %v, want %v", got, tc.wantFailures)
			}
			errors := 0
			warned := false
			var lines []string
			for _, e := range hook.AllEntries() {
				lines = append(lines, e.Level.String()+": "+e.Message)
				switch e.Level {
				case logrus.ErrorLevel:
					errors++
				case logrus.WarnLevel:
					warned = warned || containsAll(e.Message, tc.wantWarning)
				}
			}
			if float64(errors) != tc.wantFailures {
				t.Errorf("%d error lines, want one per problem (%v):\n%s", errors, tc.wantFailures, strings.Join(lines, "\n"))
			}
			if tc.wantWarning != "" && !warned {
				t.Errorf("no warning saying %q:\n%s", tc.wantWarning, strings.Join(lines, "\n"))
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

// TestWatchNode: the node's checks run at the first connection with its
// runtime, not again for a reconnection to the same runtime, again for
// another version; without a connection, once when the wait is over.
func TestWatchNode(t *testing.T) {
	t.Run("connections", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runtimes := make(chan runtimeInfo)
		checked := make(chan runtimeInfo)
		done := make(chan struct{})
		go func() {
			defer close(done)
			watchNode(ctx, time.Hour, runtimes, func(rt runtimeInfo) { checked <- rt })
		}()
		first, upgraded := runtimeInfo{"containerd", "v2.3.1"}, runtimeInfo{"containerd", "v2.4.2"}
		runtimes <- first
		if got := <-checked; got != first {
			t.Errorf("checked %v, want %v", got, first)
		}
		runtimes <- first // a reconnection: nothing to check again
		runtimes <- upgraded
		if got := <-checked; got != upgraded {
			t.Errorf("checked %v after a reconnection to %v and an upgrade, want %v", got, first, upgraded)
		}
		cancel()
		<-done
	})
	t.Run("no connection", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		checked := make(chan runtimeInfo, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			watchNode(ctx, 0, nil, func(rt runtimeInfo) { checked <- rt; cancel() })
		}()
		if got := <-checked; got != (runtimeInfo{}) {
			t.Errorf("checked %v without a connection, want no runtime", got)
		}
		<-done
	})
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
