package main

import (
	"fmt"
	"io"
	"strings"

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
