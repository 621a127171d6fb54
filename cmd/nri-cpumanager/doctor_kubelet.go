package main

import (
	"bytes"
	"context"

	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
	"sigs.k8s.io/yaml"
)

// kubeletConfig is the part of a KubeletConfiguration doctor reads.
type kubeletConfig struct {
	CPUManagerPolicy      string            `json:"cpuManagerPolicy"`
	ReservedSystemCPUs    string            `json:"reservedSystemCPUs"`
	SystemReserved        map[string]string `json:"systemReserved"`
	KubeReserved          map[string]string `json:"kubeReserved"`
	TopologyManagerPolicy string            `json:"topologyManagerPolicy"`
	CgroupDriver          string            `json:"cgroupDriver"`
}

// kubeletFlags are the deprecated command-line flags that set the same.
var kubeletFlags = map[string]func(*kubeletConfig, string){
	"--cpu-manager-policy":      func(c *kubeletConfig, v string) { c.CPUManagerPolicy = v },
	"--reserved-cpus":           func(c *kubeletConfig, v string) { c.ReservedSystemCPUs = v },
	"--topology-manager-policy": func(c *kubeletConfig, v string) { c.TopologyManagerPolicy = v },
	"--cgroup-driver":           func(c *kubeletConfig, v string) { c.CgroupDriver = v },
}

// checkKubelet reports the kubelet's CPU manager policy, its reservation
// against the plugin's, and its topology manager policy.
func (d *doctorRun) checkKubelet() {
	kc, source, err := d.loadKubeletConfig()
	if err != nil {
		// Unseen, the kubelet may run its own static CPU manager beside
		// the plugin: doctor cannot say the node is fine (the plugin's
		// own check at start says it and goes on).
		d.report(d.unseenKubelet, "kubelet", "configuration not found: "+err.Error()+": its CPU manager policy and reservation are not checked",
			"mount it (the chart's doctor.enabled with doctor.kubeletConfig, deploy/components/doctor), give --kubelet-config FILE, "+
				"or pipe its live configuration in: kubectl get --raw /api/v1/nodes/NODE/proxy/configz | kubectl exec -i POD -- nri-cpumanager doctor --kubelet-config -")
		return
	}
	d.kubeletDriver = kc.CgroupDriver
	if d.kubeletDriver == "" {
		d.kubeletDriver = "cgroupfs" // the kubelet's default
	}
	switch policy := kc.CPUManagerPolicy; policy {
	case "", "none":
		d.report(statusOK, "kubelet", fmt.Sprintf("cpuManagerPolicy: none (%s)", source), "")
	default:
		d.report(statusFail, "kubelet", fmt.Sprintf("cpuManagerPolicy: %s (%s): two CPU managers would fight over the same cpusets", policy, source),
			"set cpuManagerPolicy: none; a node with pinned pods moves with the one-time import (docs/install.md, \"Importing the kubelet's CPU assignments\")")
	}
	d.checkReservation(kc)
	if tm := kc.TopologyManagerPolicy; tm != "" && tm != "none" {
		switch plugin := string(d.cfg.TopologyManagerPolicy); plugin {
		case "", "none":
			d.report(statusWarning, "kubelet", fmt.Sprintf("topologyManagerPolicy: %s places the pods' devices, the plugin's is none: pinned CPUs ignore the devices' NUMA nodes", tm),
				fmt.Sprintf("topologyManagerPolicy: %s in the plugin's ConfigMap (docs/design.md, \"Placement with the devices\")", tm))
		case tm:
			d.report(statusOK, "kubelet", fmt.Sprintf("topologyManagerPolicy: %s places the devices, the plugin's the CPUs on their NUMA nodes", tm), "")
		default:
			d.report(statusInfo, "kubelet", fmt.Sprintf("topologyManagerPolicy: %s places the devices, the plugin's %s the CPUs: they admit differently", tm, plugin), "")
		}
	}
}

// checkReservation compares the kubelet's CPU reservation with the
// plugin's: the same list (reservedSystemCPUs), or the count the kubelet's
// static policy would reserve for systemReserved + kubeReserved CPUs.
func (d *doctorRun) checkReservation(kc *kubeletConfig) {
	plugin := d.cfg.ReservedSystemCPUs
	if kc.ReservedSystemCPUs != "" {
		want, err := cpuset.Parse(kc.ReservedSystemCPUs)
		switch {
		case err != nil:
			d.report(statusWarning, "kubelet", fmt.Sprintf("reservedSystemCPUs %q is not a CPU list: %v", kc.ReservedSystemCPUs, err), "")
		case want.Equals(plugin) && d.cfg.ReservedCPUCount == 0:
			d.report(statusOK, "kubelet", fmt.Sprintf("reserves CPUs %s, as the plugin does", want), "")
		default:
			d.report(statusFail, "kubelet", fmt.Sprintf("reserves CPUs %s (reservedSystemCPUs), the plugin %s", want, d.pluginReservation()),
				fmt.Sprintf("reservedSystemCPUs: %q and no reservedCPUCount in the plugin's ConfigMap", want.String()))
		}
		return
	}
	milli := cpuMilli(kc.SystemReserved["cpu"]) + cpuMilli(kc.KubeReserved["cpu"])
	if milli == 0 {
		d.report(statusInfo, "kubelet", fmt.Sprintf("reserves no CPU (no reservedSystemCPUs, no CPU in systemReserved or kubeReserved); the plugin %s", d.pluginReservation()), "")
		return
	}
	count := int(math.Ceil(float64(milli) / 1000))
	if d.cfg.ReservedCPUCount == count || (d.cfg.ReservedCPUCount == 0 && plugin.Size() == count) {
		d.report(statusOK, "kubelet", fmt.Sprintf("reserves %dm CPU (systemReserved + kubeReserved), %d CPU(s) for its static policy; the plugin %s", milli, count, d.pluginReservation()), "")
		return
	}
	d.report(statusFail, "kubelet", fmt.Sprintf("reserves %dm CPU (systemReserved + kubeReserved), %d CPU(s) for its static policy; the plugin %s", milli, count, d.pluginReservation()),
		fmt.Sprintf("reservedSystemCPUs: \"\" and reservedCPUCount: %d in the plugin's ConfigMap (or the kubelet's reservedSystemCPUs list in both)", count))
}

func (d *doctorRun) pluginReservation() string {
	if d.cfg.ReservedCPUCount > 0 {
		return fmt.Sprintf("reserves %d CPU(s) (reservedCPUCount)", d.cfg.ReservedCPUCount)
	}
	if d.cfg.ReservedSystemCPUs.IsEmpty() {
		return "reserves none"
	}
	return fmt.Sprintf("reserves CPUs %s (reservedSystemCPUs)", d.cfg.ReservedSystemCPUs)
}

// cpuMilli reads a CPU quantity ("500m", "1", "1.5") in milli-CPUs; 0 when
// empty or unreadable.
func cpuMilli(q string) int64 {
	q = strings.TrimSpace(q)
	if q == "" {
		return 0
	}
	if m, ok := strings.CutSuffix(q, "m"); ok {
		n, _ := strconv.ParseInt(m, 10, 64)
		return n
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil {
		return 0
	}
	return int64(math.Round(f * 1000))
}

// loadKubeletConfig finds and reads the kubelet's configuration: the flag,
// else the --config of a kubelet process (on the node itself), else the
// usual file. Flags of that process override the file, as for the kubelet.
func (d *doctorRun) loadKubeletConfig() (*kubeletConfig, string, error) {
	var data []byte
	var source string
	var err error
	cmdline := d.kubeletCommandLine()
	switch path := d.kubeletConfig; {
	case path == "-":
		data, err = io.ReadAll(stdin)
		source = "standard input"
	case strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://"):
		data, err = fetch(path)
		source = path
	case path != "":
		data, err = d.readHost(path)
		source = path
	default:
		for i, arg := range cmdline {
			if v, ok := strings.CutPrefix(arg, "--config="); ok {
				path = v
			} else if arg == "--config" && i+1 < len(cmdline) {
				path = cmdline[i+1]
			}
		}
		if path == "" {
			if path, err = d.firstExisting("/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet-config.yaml", "/etc/kubernetes/kubelet/config.yaml",
				"/etc/rancher/k3s/config.yaml", "/etc/rancher/rke2/config.yaml"); err != nil {
				return nil, "", err
			}
		}
		data, err = d.readHost(path)
		source = path
	}
	if err != nil {
		return nil, "", err
	}
	kc, err := parseKubeletConfig(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	for i, arg := range cmdline {
		name, value, ok := strings.Cut(arg, "=")
		if !ok && i+1 < len(cmdline) {
			value = cmdline[i+1]
		}
		if set, known := kubeletFlags[name]; known {
			set(kc, value)
			source += ", flag " + name
		}
	}
	return kc, source, nil
}

// parseKubeletConfig reads a KubeletConfiguration (YAML or JSON), the
// kubelet's /configz answer ({"kubeletconfig": {...}}), or the
// configuration file of k3s or RKE2 (/etc/rancher/k3s/config.yaml,
// /etc/rancher/rke2/config.yaml), whose kubelet-arg list sets the
// kubelet's flags over its defaults.
func parseKubeletConfig(data []byte) (*kubeletConfig, error) {
	var wrapped struct {
		KubeletConfig *kubeletConfig `json:"kubeletconfig"`
	}
	if err := yaml.Unmarshal(data, &wrapped); err == nil && wrapped.KubeletConfig != nil {
		return wrapped.KubeletConfig, nil
	}
	var head struct {
		Kind       string    `json:"kind"`
		KubeletArg *[]string `json:"kubelet-arg"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return nil, err
	}
	if head.Kind == "" && head.KubeletArg != nil {
		kc := &kubeletConfig{}
		for _, arg := range *head.KubeletArg {
			name, value, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			if set, known := kubeletFlags["--"+name]; known {
				set(kc, value)
			}
		}
		return kc, nil
	}
	if head.Kind != "KubeletConfiguration" {
		return nil, fmt.Errorf("not a KubeletConfiguration (kind %q), the kubelet's /configz, nor a k3s or RKE2 configuration with kubelet-arg", head.Kind)
	}
	kc := &kubeletConfig{}
	if err := yaml.Unmarshal(data, kc); err != nil {
		return nil, err
	}
	return kc, nil
}

// kubeletCommandLine returns the arguments of a kubelet process found
// under the host root's /proc (on the node itself; the plugin's pod has
// its own process namespace), or nil.
func (d *doctorRun) kubeletCommandLine() []string {
	procs, _ := filepath.Glob(d.host("/proc/[0-9]*/cmdline"))
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if filepath.Base(args[0]) == "kubelet" {
			return args[1:]
		}
	}
	return nil
}

// fetch GETs url with doctor's timeout.
func fetch(url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), doctorTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := io.Copy(&body, io.LimitReader(resp.Body, 1<<20)); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return body.Bytes(), nil
}
