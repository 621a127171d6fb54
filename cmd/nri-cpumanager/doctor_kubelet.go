package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
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
	"--system-reserved":         func(c *kubeletConfig, v string) { c.SystemReserved = flagMap(v) },
	"--kube-reserved":           func(c *kubeletConfig, v string) { c.KubeReserved = flagMap(v) },
}

// flagMap reads a map flag's value (cpu=500m,memory=1Gi).
func flagMap(v string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		if k, val, ok := strings.Cut(kv, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
	}
	return out
}

// checkKubelet reports the kubelet's CPU manager policy, its reservation
// against the plugin's, and its topology manager policy, from the
// kubelet's configuration as the kubelet puts it together (loadKubelet).
// A policy of none is ok only when doctor saw everything the kubelet
// reads; otherwise it is unknown, a warning that says what it did not
// see and how to show it.
func (d *doctorRun) checkKubelet() {
	v := d.loadKubelet()
	d.kubeletComplete = v.complete
	for _, p := range v.problems {
		d.report(statusFail, "kubelet", p, "correct it: the kubelet refuses to start with it (or is not started the way doctor reads)")
	}
	if v.config == nil {
		d.report(statusWarning, "kubelet", "unknown: the kubelet's configuration is not visible: "+strings.Join(v.unseen, "; ")+
			": its CPU manager policy and reservation are not checked", d.unseenKubeletFix())
		return
	}
	kc := v.config
	d.kubeletDriver = kc.CgroupDriver
	if d.kubeletDriver == "" {
		d.kubeletDriver = "cgroupfs" // the kubelet's default
	}
	read := strings.Join(v.read, ", ")
	if read == "" {
		read = "nothing but the command line"
	}
	from := v.policyFrom
	if from == "" {
		from = "the kubelet's default"
	}
	switch policy := kc.CPUManagerPolicy; {
	case policy != "" && policy != "none":
		d.report(statusFail, "kubelet", fmt.Sprintf("cpuManagerPolicy: %s (set by %s; read: %s): two CPU managers would fight over the same cpusets", policy, from, read),
			"set cpuManagerPolicy: none where it is set; a node with pinned pods moves with the one-time import (docs/install.md, \"Importing the kubelet's CPU assignments\")")
	case v.complete:
		d.report(statusOK, "kubelet", fmt.Sprintf("cpuManagerPolicy: none (%s; read: %s)", from, read), "")
	default:
		d.report(statusWarning, "kubelet", fmt.Sprintf("unknown: cpuManagerPolicy is none in what doctor read (%s), but not seen: %s", read, strings.Join(v.unseen, "; ")),
			d.unseenKubeletFix())
	}
	d.checkReservation(kc)
	if tm := kc.TopologyManagerPolicy; tm != "" && tm != "none" {
		switch plugin := string(d.cfg.TopologyManagerPolicy); plugin {
		case "", "none":
			d.report(statusWarning, "kubelet", fmt.Sprintf("topologyManagerPolicy: %s places the pods' devices, the plugin's is none: pinned CPUs ignore the devices' NUMA nodes", tm),
				fmt.Sprintf("topologyManagerPolicy: %s in the plugin's ConfigMap (docs/design.md, \"Placement with the devices\")", tm))
		case tm:
			d.report(d.kubeletOK(), "kubelet", fmt.Sprintf("topologyManagerPolicy: %s places the devices, the plugin's the CPUs on their NUMA nodes", tm), "")
		default:
			d.report(statusInfo, "kubelet", fmt.Sprintf("topologyManagerPolicy: %s places the devices, the plugin's %s the CPUs: they admit differently", tm, plugin), "")
		}
	}
}

// unseenKubeletFix is how to show doctor the kubelet's configuration:
// its /configz, doctor on the node, or the mounts of the node's layout.
func (d *doctorRun) unseenKubeletFix() string {
	mounts := "the DaemonSet mounts /var/lib/kubelet/config.yaml and /etc/kubernetes/kubelet.conf.d " +
		"(the chart's doctor.kubeletConfig, doctor.kubeletConfigDir for other paths; doctor.distribution for k3s and RKE2)"
	if r := d.distribution(); r.name != "" {
		mounts = fmt.Sprintf("on %s the DaemonSet mounts %s and %s.d, %s/agent/etc/kubelet.conf.d with the chart's doctor.distribution: %s "+
			"(kustomize: components/%s), and a kubelet-arg config= file with doctor.kubeletConfig",
			r.name, r.config, r.config, r.dataDir, strings.ToLower(r.name), strings.ToLower(r.name))
	}
	return "pipe the kubelet's live configuration in: kubectl get --raw /api/v1/nodes/NODE/proxy/configz | " +
		"kubectl exec -i POD -- nri-cpumanager doctor --config /etc/nri-cpumanager/config.yaml --host-root /host --kubelet-config -\n" +
		"or run doctor on the node (sudo nri-cpumanager doctor), where it reads the kubelet's command line; " + mounts
}

// kubeletOK is the status of a kubelet setting that agrees with the
// plugin's: ok when doctor saw all of the kubelet's configuration, info
// (what the files read say) otherwise.
func (d *doctorRun) kubeletOK() string {
	if d.kubeletComplete {
		return statusOK
	}
	return statusInfo
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
			d.report(d.kubeletOK(), "kubelet", fmt.Sprintf("reserves CPUs %s, as the plugin does", want), "")
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
		d.report(d.kubeletOK(), "kubelet", fmt.Sprintf("reserves %dm CPU (systemReserved + kubeReserved), %d CPU(s) for its static policy; the plugin %s", milli, count, d.pluginReservation()), "")
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
