package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// startHostRoot is where the DaemonSet mounts the host's files the
// node's checks read (the kubelet's configuration file and drop-in
// directory, containerd's config.toml and conf.d).
const startHostRoot = "/host"

// nodeCheckWait is how long the node's checks wait for the plugin's first
// connection to the runtime, whose name and version they check, before
// they run without it.
const nodeCheckWait = 2 * time.Minute

// finding is one of doctor's findings.
type finding struct{ status, topic, text, fix string }

// checkNodeAtStart runs doctor's checks of the node (containerd and the
// runtime that configured the plugin over NRI, the kubelet, cgroups) as
// the plugin's pod sees it: the host's files under hostRoot, each file
// it does not see unknown (a warning), never ok. It reports them: each
// problem and warning in the log, the problems' number in failures, and
// the problems together in one Warning event on the Node (event, nil
// without the Kubernetes API). rt is the runtime NRI's Configure named,
// zero when the plugin has not connected. It returns the findings.
func checkNodeAtStart(cfg *config.Config, hostRoot string, rt runtimeInfo, log *logrus.Logger, failures prometheus.Gauge, event func(note string)) []finding {
	d := &doctorRun{hostRoot: hostRoot, cfg: cfg, out: io.Discard, view: newHostView(hostRoot), runtime: rt, runtimeConnected: rt.name != ""}
	if rt.name == "" {
		d.report(statusWarning, "NRI", fmt.Sprintf("no connection to the runtime within %v of the plugin's start: its name and version are not checked", nodeCheckWait),
			"is NRI enabled, on the socket the plugin dials (nriSocket)? The checks run again at the first connection")
	}
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

// watchNode runs check at the plugin's first connection to the runtime,
// with the runtime NRI's Configure named, or after wait without one (with
// no runtime), and again whenever a connection brings another runtime
// (containerd upgraded under the plugin), until ctx ends.
func watchNode(ctx context.Context, wait time.Duration, runtimes <-chan runtimeInfo, check func(runtimeInfo)) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var last *runtimeInfo
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			if last == nil {
				last = &runtimeInfo{}
				check(*last)
			}
		case rt := <-runtimes:
			if last != nil && *last == rt {
				continue
			}
			last = &rt
			check(rt)
		}
	}
}
