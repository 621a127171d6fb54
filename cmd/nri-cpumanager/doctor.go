package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cmd/nri-cpumanager/assemble"
	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// doctor checks a node for the plugin, each finding with what to do when
// it is wrong: containerd's version, NRI and its socket, whether the
// drop-in of deploy/containerd-nri.toml is imported, the validator's
// rejections on and fail-closed active, the kubelet's CPU manager policy and reservation, the
// cgroup version and driver, the isolated CPUs, what the plugin's
// configuration makes of the CPUs (as validate-config says), and with the
// topology export on, who owns the node's NodeResourceTopology object.
//
// It reads the host's files under --host-root (the DaemonSet's pod mounts
// the kubelet's and containerd's configuration read-only under /host; on
// the node itself the root is /), and what the plugin itself reads (the
// NRI socket, sysfsRoot, cgroupfsRoot) where the plugin's configuration
// says. What it cannot see is unknown, a warning, never ok. It changes
// nothing. Exit status 1 when something is wrong.
func doctor(args []string, stdout, stderr io.Writer) error {
	f := newFlags("doctor", stderr)
	d := &doctorRun{}
	f.fs.StringVar(&d.hostRoot, "host-root", "", "`directory` where the host's files are mounted (default: /host where something is mounted there, as in the plugin's pod, else /)")
	f.fs.StringVar(&d.containerdConfig, "containerd-config", "", "containerd's configuration `file` on the host (default: the --config of its process, k3s's or RKE2's, else /etc/containerd/config.toml)")
	f.fs.StringVar(&d.containerdSocket, "containerd-socket", "", "containerd's CRI `socket` on the host, asked for its version when reachable (default: the --address of its process, k3s's or RKE2's, else /run/containerd/containerd.sock)")
	f.fs.StringVar(&d.containerdBinary, "containerd-binary", "", "containerd's `binary` on the host (default: /usr/bin/containerd, /usr/local/bin/containerd)")
	f.fs.StringVar(&d.kubeletConfig, "kubelet-config", "", "the kubelet's configuration: a `file` on the host, an http(s) URL of its /configz, or - for standard input "+
		"(kubectl get --raw /api/v1/nodes/NODE/proxy/configz); default: the kubelet's --config, else where kubelets usually keep it")
	f.fs.StringVar(&d.kubeletConfigDir, "kubelet-config-dir", "", "the kubelet's drop-in `directory` on the host (default: the kubelet's --config-dir)")
	f.fs.StringVar(&d.pluginMetrics, "plugin-metrics", "auto", "`URL` of the plugin's /metrics, read for the runtime that configured it over NRI (auto: metricsAddress on 127.0.0.1, as in the plugin's pod; \"\" not to)")
	f.fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: nri-cpumanager doctor [--host-root DIR] [--config FILE] [flags]")
		f.fs.PrintDefaults()
	}
	if err := f.parse(args); err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	d.cfg = cfg
	d.out = stdout
	if d.hostRoot == "" {
		d.hostRoot = defaultHostRoot()
	}
	d.view = newHostView(d.hostRoot)
	fmt.Fprintf(stdout, "nri-cpumanager doctor %s: host root %s (%s), plugin configuration %s\n", buildInfo().Version, d.hostRoot, d.view, orDefaults(f.configPath))
	d.readPluginRuntime()
	d.checkContainerd()
	d.checkKubelet()
	d.checkCgroups()
	d.checkCPUs()
	d.checkTopology()
	return d.summary()
}

func orDefaults(path string) string {
	switch path {
	case "":
		return "(defaults and flags)"
	case "-":
		return "(standard input)"
	}
	return path
}

// Finding statuses. Only fail makes doctor exit 1.
const (
	statusOK      = "ok"
	statusInfo    = "info"
	statusWarning = "warn"
	statusFail    = "FAIL"
)

// doctorRun holds the flags of one run and what it found.
type doctorRun struct {
	hostRoot, containerdConfig, containerdSocket, containerdBinary, kubeletConfig, kubeletConfigDir, pluginMetrics string

	cfg *config.Config
	out io.Writer
	// view is what the run sees of the host's files.
	view hostView

	// runtime is the runtime that configured the plugin over NRI, as
	// NRI's Configure names it: given to the plugin's start-up check, or
	// read from the plugin's metrics; name "" when not known.
	runtime runtimeInfo
	// runtimeConnected: the plugin is connected to that runtime now (NRI
	// is on); runtimeSource says where doctor learnt it ("" for the
	// start-up check's NRI Configure).
	runtimeConnected bool
	runtimeSource    string

	// What checks learn for later ones.
	procs             []hostProcess
	distro            *distribution
	rancher           *rancherConfig
	kubeletComplete   bool  // the kubelet's whole configuration was seen
	containerdSystemd *bool // runc's SystemdCgroup, when the configuration says
	kubeletDriver     string
	treeDriver        string

	fails, warnings, unknowns int
	// findings are the findings reported so far.
	findings []finding
}

// report prints one finding, with its fix when it is not ok.
func (d *doctorRun) report(status, topic, text, fix string) {
	d.findings = append(d.findings, finding{status, topic, text, fix})
	fmt.Fprintf(d.out, "%-4s  %-11s %s\n", status, topic, text)
	if fix != "" && status != statusOK {
		for _, line := range strings.Split(fix, "\n") {
			fmt.Fprintf(d.out, "      %-11s fix: %s\n", "", line)
		}
	}
	switch status {
	case statusFail:
		d.fails++
	case statusWarning:
		d.warnings++
		if strings.HasPrefix(text, "unknown: ") {
			d.unknowns++
		}
	}
}

func (d *doctorRun) summary() error {
	switch {
	case d.fails > 0:
		fmt.Fprintf(d.out, "%d problem(s) and %d warning(s): fix the problems before labelling the node nri-cpumanager.io/enabled=true.\n", d.fails, d.warnings)
		return errProblemsFound
	case d.unknowns > 0:
		fmt.Fprintf(d.out, "no problem found in what doctor saw; %d warning(s), %d of them unknown: doctor did not see what they check (each says how to show it).\n", d.warnings, d.unknowns)
	case d.warnings > 0:
		fmt.Fprintf(d.out, "no problem, %d warning(s).\n", d.warnings)
	default:
		fmt.Fprintln(d.out, "no problem found.")
	}
	return nil
}

// checkCgroups reports the cgroup version of the tree the plugin verifies
// cpusets in, and the driver the kubelet's cgroups show, against the
// kubelet's and containerd's settings.
func (d *doctorRun) checkCgroups() {
	root := d.cfg.CgroupfsRoot
	if root == "" {
		d.report(statusWarning, "cgroups", "cgroupfsRoot is \"\": containers' cpusets are not verified, an update containerd fails to apply goes unnoticed",
			"set cgroupfsRoot to the host's cgroup tree (/sys/fs/cgroup in the DaemonSet)")
		return
	}
	exists := func(rel ...string) bool {
		_, err := os.Stat(filepath.Join(append([]string{root}, rel...)...))
		return err == nil
	}
	var version string
	switch {
	case exists("cgroup.controllers"):
		version = "v2 (unified)"
	case exists("unified", "cgroup.controllers") && exists("cpuset"):
		version = "v1 with systemd's hybrid cgroup2 mount"
	case exists("cpuset"):
		version = "v1"
	case exists("cpuset.cpus"):
		version = "v1 (a cpuset hierarchy itself)"
	default:
		d.report(statusFail, "cgroups", fmt.Sprintf("cgroupfsRoot %s is not a cgroup tree", root),
			"mount the host's /sys (the DaemonSet does) and point cgroupfsRoot at its fs/cgroup")
		return
	}
	base := root
	if !exists("cgroup.controllers") && exists("cpuset") {
		base = filepath.Join(root, "cpuset")
	}
	switch {
	case dirExists(filepath.Join(base, "kubepods.slice")):
		d.treeDriver = "systemd"
	case dirExists(filepath.Join(base, "kubepods")):
		d.treeDriver = "cgroupfs"
	}
	if d.treeDriver == "" {
		d.report(statusWarning, "cgroups", fmt.Sprintf("cgroup %s at %s, but no kubepods or kubepods.slice cgroup under %s", version, root, base),
			"is it the host's tree? run doctor where the plugin runs (kubectl exec into its pod), with the kubelet running")
	} else {
		d.report(statusOK, "cgroups", fmt.Sprintf("cgroup %s at %s; the kubelet's pods are under %s (the %s driver)", version, root, base, d.treeDriver), "")
	}
	if d.kubeletDriver != "" && d.treeDriver != "" && d.kubeletDriver != d.treeDriver {
		d.report(statusWarning, "cgroups", fmt.Sprintf("the kubelet's cgroupDriver is %s, the tree shows %s", d.kubeletDriver, d.treeDriver), "")
	}
	if d.containerdSystemd != nil && d.kubeletDriver != "" {
		cd := "cgroupfs"
		if *d.containerdSystemd {
			cd = "systemd"
		}
		if cd != d.kubeletDriver {
			d.report(statusFail, "cgroups", fmt.Sprintf("containerd's runc uses the %s driver (SystemdCgroup = %v), the kubelet %s", cd, *d.containerdSystemd, d.kubeletDriver),
				"make them agree: SystemdCgroup = true in containerd's runc options with cgroupDriver: systemd, or false with cgroupfs")
		}
	}
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// checkCPUs reports the isolated CPUs and what the plugin's configuration
// makes of the CPUs, with validate-config's description and warnings.
func (d *doctorRun) checkCPUs() {
	topo, err := cpuallocator.Discover(d.cfg.SysfsRoot)
	if err != nil {
		d.report(statusFail, "CPUs", fmt.Sprintf("reading the CPU topology under %s: %v", d.cfg.SysfsRoot, err), "mount the host's /sys at sysfsRoot")
		return
	}
	if iso := topo.Isolated(); iso.IsEmpty() {
		d.report(statusInfo, "CPUs", fmt.Sprintf("online %s; no isolated CPUs (isolcpus)", topo.CPUs()), "")
	} else {
		d.report(statusInfo, "CPUs", fmt.Sprintf("online %s; isolated (isolcpus) %s, isolatedCPUs: %s", topo.CPUs(), iso, d.cfg.IsolatedCPUs), "")
	}
	pol, err := assemble.Policy(d.cfg, topo)
	if err != nil {
		d.report(statusFail, "plugin", fmt.Sprintf("the configuration does not fit this machine: %v", err), "correct the ConfigMap (nri-cpumanager validate-config --config FILE says the same)")
		return
	}
	use := assemble.DescribeCPUs(d.cfg, pol)
	for _, line := range use.Lines() {
		if w, ok := strings.CutPrefix(line, "warning: "); ok {
			d.report(statusWarning, "plugin", w, "see docs/install.md, \"Nodes with isolated CPUs\"")
			continue
		}
		d.report(statusOK, "plugin", line, "")
	}
}

// doctorTimeout bounds each network call doctor makes (the CRI socket, a
// /configz URL).
const doctorTimeout = 3 * time.Second
