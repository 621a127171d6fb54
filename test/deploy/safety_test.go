package deploy

import (
	"flag"
	"fmt"
	"io"
	"net"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// The plugin's container, the ConfigMap it mounts and where.
const (
	containerName = "nri-cpumanager"
	configMount   = "/etc/nri-cpumanager"
	enabledLabel  = "nri-cpumanager.io/enabled"
	// tolerateMissing exempts the plugin's pod from containerd's NRI
	// default validator when that requires the plugin.
	tolerateMissing = "tolerate-missing-nri-plugins.noderesource.dev"
	// memoryLimitEnv carries the container's memory limit to the plugin.
	memoryLimitEnv = "NRI_CPUMANAGER_MEMORY_LIMIT"
	// hostRoot is where the host files the node's checks read are
	// mounted.
	hostRoot = "/host"
	// guardName is the container of the validating NRI plugin
	// (components/adjustment-validator, the chart's adjustmentValidator).
	guardName = "validate-adjustments"
)

// hostFiles are the host files the plugin's check of its node and
// nri-cpumanager doctor may read, each mounted read-only at hostRoot + its
// host path, by whether it is a directory. Only these: of
// /var/lib/kubelet the kubelet's configuration file alone (the directory
// holds the pods' secrets), of /etc/kubernetes the kubelet's drop-in
// directory (the rest holds the node's credentials), of /etc/containerd
// config.toml and conf.d (the rest holds registry credentials and keys);
// k3s's and RKE2's counterparts; and the kubelet's configuration file
// where other distributions keep it (doctor.kubeletConfig). Each may be
// missing, and is then created empty (FileOrCreate, DirectoryOrCreate),
// which nothing reads as a configuration (deploy/daemonset.yaml says
// why).
var hostFiles = map[string]bool{
	"/var/lib/kubelet/config.yaml":                           false,
	"/etc/kubernetes/kubelet.conf.d":                         true,
	"/etc/containerd/config.toml":                            false,
	"/etc/containerd/conf.d":                                 true,
	"/etc/kubernetes/kubelet-config.yaml":                    false,
	"/etc/kubernetes/kubelet/config.yaml":                    false,
	"/etc/kubernetes/kubelet/config.json":                    false,
	"/home/kubernetes/kubelet-config.yaml":                   false,
	"/etc/default/kubeletconfig.json":                        false,
	"/etc/rancher/k3s/config.yaml":                           false,
	"/etc/rancher/k3s/config.yaml.d":                         true,
	"/var/lib/rancher/k3s/agent/etc/kubelet.conf.d":          true,
	"/var/lib/rancher/k3s/agent/etc/containerd/config.toml":  false,
	"/etc/rancher/rke2/config.yaml":                          false,
	"/etc/rancher/rke2/config.yaml.d":                        true,
	"/var/lib/rancher/rke2/agent/etc/kubelet.conf.d":         true,
	"/var/lib/rancher/rke2/agent/etc/containerd/config.toml": false,
}

// containerNames lists the containers' names.
func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// keys returns the keys of m, sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// deployed is the DaemonSet of a rendering with what it runs.
type deployed struct {
	ds  *appsv1.DaemonSet
	pod *corev1.PodSpec
	ctr *corev1.Container
	// guard is the validating NRI plugin's container, nil without it.
	guard *corev1.Container
	cm    *corev1.ConfigMap
	// cfg is the configuration the plugin runs with: the ConfigMap's
	// config.yaml read by the plugin's parser, then the command-line flags
	// of the container's args.
	cfg *config.Config
}

// pluginOf finds the DaemonSet's container, its ConfigMap and its
// effective configuration.
func pluginOf(t *testing.T, m *manifests) *deployed {
	t.Helper()
	p := &deployed{ds: only(t, "DaemonSet", m.daemonSets)}
	p.pod = &p.ds.Spec.Template.Spec
	if n := len(p.pod.Containers); n != 1 && (n != 2 || p.pod.Containers[1].Name != guardName) {
		t.Fatalf("containers %v, want the plugin's, and the validating plugin's (%s) only", containerNames(p.pod.Containers), guardName)
	}
	p.ctr = &p.pod.Containers[0]
	if p.ctr.Name != containerName {
		t.Errorf("container %q, want %q", p.ctr.Name, containerName)
	}
	if len(p.pod.Containers) == 2 {
		p.guard = &p.pod.Containers[1]
	}
	if len(p.pod.InitContainers) > 0 {
		t.Errorf("init containers %v: none expected", p.pod.InitContainers)
	}
	vol := volume(t, p.pod, mountAt(t, p.ctr, configMount).Name)
	if vol.ConfigMap == nil {
		t.Fatalf("%s is not mounted from a ConfigMap: %+v", configMount, vol)
	}
	for _, cm := range m.configMaps {
		if cm.Name == vol.ConfigMap.Name && cm.Namespace == p.ds.Namespace {
			p.cm = cm
		}
	}
	if p.cm == nil {
		t.Fatalf("the DaemonSet mounts ConfigMap %s/%s, which is not rendered", p.ds.Namespace, vol.ConfigMap.Name)
	}
	p.cfg = effectiveConfig(t, p)
	return p
}

// effectiveConfig parses the container's args as the plugin's run command
// does and applies them to the ConfigMap's config.yaml.
func effectiveConfig(t *testing.T, p *deployed) *config.Config {
	t.Helper()
	args := append(append([]string{}, p.ctr.Command...), p.ctr.Args...)
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("args %q: want the run command first (the image's entrypoint is the binary)", args)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "")
	overrides := config.RegisterFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("args %q: %v", args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("args %q: unexpected %q", args, fs.Args())
	}
	if path.Dir(*configPath) != configMount {
		t.Fatalf("--config %q is not in the ConfigMap's mount %s", *configPath, configMount)
	}
	text, ok := p.cm.Data[path.Base(*configPath)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s (--config %s)", p.cm.Name, path.Base(*configPath), *configPath)
	}
	cfg, warnings, err := config.ParseWithWarnings([]byte(text))
	if err != nil {
		t.Fatalf("the plugin rejects ConfigMap %s's %s:\n%v\n--- the file:\n%s", p.cm.Name, path.Base(*configPath), err, text)
	}
	for _, w := range warnings { // a shipped file is typed and current
		t.Errorf("ConfigMap %s's %s: the plugin warns: %s", p.cm.Name, path.Base(*configPath), w)
	}
	cfg, err = overrides.Apply(cfg)
	if err != nil {
		t.Fatalf("args %q: %v", args, err)
	}
	return cfg
}

func mountAt(t *testing.T, ctr *corev1.Container, dir string) corev1.VolumeMount {
	t.Helper()
	for _, m := range ctr.VolumeMounts {
		if m.MountPath == dir {
			return m
		}
	}
	t.Fatalf("nothing is mounted at %s", dir)
	return corev1.VolumeMount{}
}

func volume(t *testing.T, pod *corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %q", name)
	return corev1.Volume{}
}

// hostMount is a hostPath mount: the host path, the hostPath type and the
// container's mount.
type hostMount struct {
	hostPath string
	hostType corev1.HostPathType
	mount    corev1.VolumeMount
}

func hostMounts(t *testing.T, p *deployed) map[string]hostMount {
	t.Helper()
	out := map[string]hostMount{}
	for _, m := range p.ctr.VolumeMounts {
		v := volume(t, p.pod, m.Name)
		if v.HostPath == nil {
			continue
		}
		hm := hostMount{hostPath: v.HostPath.Path, mount: m}
		if v.HostPath.Type != nil {
			hm.hostType = *v.HostPath.Type
		}
		out[m.MountPath] = hm
	}
	return out
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// checkSafe checks, one by one, the settings that keep the plugin from
// hurting the node it runs on, and that the DaemonSet gives the plugin
// every path its configuration names.
func checkSafe(t *testing.T, p *deployed) {
	t.Helper()
	ctr, pod, cfg := p.ctr, p.pod, p.cfg

	// A pinned image: a version tag (or a digest), never latest.
	if image := ctr.Image; !strings.Contains(image, "@sha256:") {
		colon := strings.LastIndex(image, ":")
		if colon < 0 || strings.Contains(image[colon:], "/") {
			t.Errorf("image %q has no tag: the node would pull latest", ctr.Image)
		} else if tag := image[colon+1:]; tag == "latest" || tag == "" {
			t.Errorf("image %q: pin a version, not %q", ctr.Image, tag)
		}
	}
	if ctr.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy %q, want IfNotPresent (the tag is pinned)", ctr.ImagePullPolicy)
	}

	// No CPU limit (CFS throttling stalls containerd's requests); CPU and
	// memory requests; a memory limit that GOMEMLIMIT follows.
	if q, ok := ctr.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("CPU limit %s: the plugin answers inside every creation and resize; a CFS quota can stall it", q.String())
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := ctr.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	if q, ok := ctr.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Errorf("no memory limit")
	} else if req := ctr.Resources.Requests[corev1.ResourceMemory]; q.Cmp(req) < 0 {
		t.Errorf("memory limit %s below the request %s", q.String(), req.String())
	}
	// The plugin sets GOMEMLIMIT to 90 % of this (cmd/nri-cpumanager).
	memoryLimit := 0
	for _, e := range ctr.Env {
		if e.Name == "GOMEMLIMIT" {
			t.Errorf("GOMEMLIMIT %+v is set: the plugin derives it from %s", e, memoryLimitEnv)
		}
		if e.Name != memoryLimitEnv {
			continue
		}
		memoryLimit++
		ref := (*corev1.ResourceFieldSelector)(nil)
		if e.ValueFrom != nil {
			ref = e.ValueFrom.ResourceFieldRef
		}
		if e.Value != "" || ref == nil || ref.Resource != "limits.memory" ||
			(ref.ContainerName != "" && ref.ContainerName != ctr.Name) || (!ref.Divisor.IsZero() && ref.Divisor.Value() != 1) {
			t.Errorf("%s %+v: want the container's limits.memory in bytes through the downward API", memoryLimitEnv, e)
		}
	}
	if memoryLimit != 1 {
		t.Errorf("%s set %d times, want once", memoryLimitEnv, memoryLimit)
	}

	// Confinement: the runtime's seccomp profile, no capability, no
	// privilege escalation, a read-only root filesystem, not the host's
	// namespaces, no API token.
	seccomp := (*corev1.SeccompProfile)(nil)
	if pod.SecurityContext != nil {
		seccomp = pod.SecurityContext.SeccompProfile
	}
	sc := ctr.SecurityContext
	if sc == nil {
		t.Fatal("the container has no securityContext")
	}
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %+v, want RuntimeDefault", seccomp)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities %+v, want drop ALL and no add", sc.Capabilities)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("host namespaces: network %v, pid %v, ipc %v", pod.HostNetwork, pod.HostPID, pod.HostIPC)
	}
	// The API token only where the plugin uses the API, and then its own
	// service account's (whose RBAC checkRBAC checks), never the default.
	token := pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken
	if token != cfg.KubernetesAPI {
		t.Errorf("automountServiceAccountToken %v with kubernetesAPI %v: the token is for the API and only for it", token, cfg.KubernetesAPI)
	}
	if token && (pod.ServiceAccountName == "" || pod.ServiceAccountName == "default") {
		t.Errorf("serviceAccountName %q: the plugin needs its own service account", pod.ServiceAccountName)
	}

	// Opt-in nodes, and the plugin's own pod exempt from containerd's
	// fail-closed validator.
	if pod.NodeSelector[enabledLabel] != "true" {
		t.Errorf("nodeSelector %v lacks %s=true", pod.NodeSelector, enabledLabel)
	}
	if p.ds.Spec.Template.Annotations[tolerateMissing] != "true" {
		t.Errorf("pod annotation %s is not \"true\"", tolerateMissing)
	}
	if p.ds.Spec.Template.Labels == nil || !selects(p.ds.Spec.Selector.MatchLabels, p.ds.Spec.Template.Labels) {
		t.Errorf("selector %v does not select the pod labels %v", p.ds.Spec.Selector.MatchLabels, p.ds.Spec.Template.Labels)
	}

	// Host paths: exactly those the configuration names, no FileOrCreate,
	// and /sys read-only all the way down.
	mounts := hostMounts(t, p)
	want := map[string]bool{}
	expect := func(what, mountPath, hostPath string, types ...corev1.HostPathType) {
		want[mountPath] = true
		m, ok := mounts[mountPath]
		if !ok {
			t.Errorf("%s: no hostPath mounted at %s", what, mountPath)
			return
		}
		if m.hostPath != hostPath {
			t.Errorf("%s: %s is mounted from host path %s, want %s", what, mountPath, m.hostPath, hostPath)
		}
		okType := false
		for _, ty := range types {
			okType = okType || m.hostType == ty
		}
		if !okType {
			t.Errorf("%s: hostPath %s type %q, want one of %q", what, m.hostPath, m.hostType, types)
		}
	}
	expect("nriSocket's directory", path.Dir(cfg.NRISocket), path.Dir(cfg.NRISocket), corev1.HostPathDirectory)
	// The NRI socket's directory read-only: connecting to a socket needs
	// no write to its file system, and nothing else of the directory is
	// the plugin's to change (another plugin's socket, containerd's own).
	if m, ok := mounts[path.Dir(cfg.NRISocket)]; ok && !m.mount.ReadOnly {
		t.Errorf("the NRI socket's directory %s is mounted writable", m.hostPath)
	}
	expect("stateDir", cfg.StateDir, cfg.StateDir, corev1.HostPathDirectoryOrCreate)
	expect("sysfsRoot", cfg.SysfsRoot, "/sys", corev1.HostPathDirectory)
	if cfg.KubeletCheckpoint != "" {
		expect("kubeletCheckpoint", cfg.KubeletCheckpoint, cfg.KubeletCheckpoint, corev1.HostPathFile)
		if m := mounts[cfg.KubeletCheckpoint]; !m.mount.ReadOnly {
			t.Errorf("the kubelet checkpoint %s is mounted writable", cfg.KubeletCheckpoint)
		}
	}
	for mp, m := range mounts {
		if under(mp, hostRoot) && !want[mp] {
			// The host files the node's checks read: read-only, all the
			// way, where they are on the host, and only these (hostFiles).
			host := strings.TrimPrefix(mp, hostRoot)
			dir, ok := hostFiles[host]
			types := []corev1.HostPathType{corev1.HostPathFile, corev1.HostPathFileOrCreate}
			if dir {
				types = []corev1.HostPathType{corev1.HostPathDirectory, corev1.HostPathDirectoryOrCreate}
			}
			rro := m.mount.RecursiveReadOnly
			switch {
			case !ok:
				t.Errorf("hostPath %s at %s: under %s only %v may be mounted", m.hostPath, mp, hostRoot, keys(hostFiles))
			case m.hostPath != host:
				t.Errorf("%s is mounted from host path %s, want %s (where it is on the host)", mp, m.hostPath, host)
			case !slices.Contains(types, m.hostType):
				t.Errorf("hostPath %s at %s of type %q, want one of %q", m.hostPath, mp, m.hostType, types)
			case !m.mount.ReadOnly:
				t.Errorf("hostPath %s at %s is writable", m.hostPath, mp)
			case dir && (rro == nil || *rro != corev1.RecursiveReadOnlyIfPossible):
				t.Errorf("hostPath %s at %s: read-only but not recursively (%v)", m.hostPath, mp, rro)
			}
			continue
		}
		if !want[mp] {
			t.Errorf("hostPath %s mounted at %s, which the configuration does not name", m.hostPath, mp)
		}
		if m.hostType == corev1.HostPathFileOrCreate || strings.HasSuffix(m.hostPath, "cpu_manager_state") && m.hostType != corev1.HostPathFile {
			t.Errorf("hostPath %s has type %q: it would create a file on the host", m.hostPath, m.hostType)
		}
	}
	if sys, ok := mounts[cfg.SysfsRoot]; ok {
		rro := sys.mount.RecursiveReadOnly
		if !sys.mount.ReadOnly || rro == nil || *rro != corev1.RecursiveReadOnlyIfPossible {
			t.Errorf("%s mount: readOnly %v, recursiveReadOnly %v; want read-only, recursively where possible", cfg.SysfsRoot, sys.mount.ReadOnly, rro)
		}
	}
	if cfg.CgroupfsRoot != "" && !under(cfg.CgroupfsRoot, cfg.SysfsRoot) {
		t.Errorf("cgroupfsRoot %s is not under the host's /sys mounted at %s", cfg.CgroupfsRoot, cfg.SysfsRoot)
	}
	if under(cfg.StateDir, configMount) || under(configMount, cfg.StateDir) {
		t.Errorf("stateDir %s overlaps the ConfigMap's mount %s", cfg.StateDir, configMount)
	}

	checkEndpoints(t, p)
	if p.guard != nil {
		checkGuard(t, p)
	}

	// /debug/state names pods and their cpusets: the pod's loopback only,
	// reached with kubectl port-forward.
	if cfg.DebugAddress != "" {
		host, _, err := net.SplitHostPort(cfg.DebugAddress)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			t.Errorf("debugAddress %q is not on loopback: /debug/state would be open to the cluster network", cfg.DebugAddress)
		}
	}
}

// checkEndpoints checks that the ports, the probes and the scrape
// annotation follow metricsAddress, healthAddress and probeSocket: the
// probes are exec probes that run the probe command against the probe
// socket (nothing on the network reaches it), in a volume mounted where
// the socket is; without a socket, HTTP probes of healthAddress's port at
// the pod's address, which a loopback healthAddress does not serve; none
// without either.
func checkEndpoints(t *testing.T, p *deployed) {
	t.Helper()
	ctr, ann := p.ctr, p.ds.Spec.Template.Annotations
	ports := map[string]string{}
	for _, cp := range ctr.Ports {
		ports[cp.Name] = fmt.Sprint(cp.ContainerPort)
	}
	portOf := func(address string) string {
		if address == "" {
			return ""
		}
		_, port, err := net.SplitHostPort(address)
		if err != nil {
			t.Fatal(err)
		}
		return port
	}
	metricsPort, healthPort := portOf(p.cfg.MetricsAddress), portOf(p.cfg.HealthAddress)
	if ports["metrics"] != metricsPort || ports["health"] != healthPort {
		t.Errorf("container ports %v, want metrics %q (metricsAddress %q) and health %q (healthAddress %q)",
			ports, metricsPort, p.cfg.MetricsAddress, healthPort, p.cfg.HealthAddress)
	}
	switch {
	case p.cfg.ProbeSocket == "" && healthPort != "":
		// HTTP probes on the health port: the kubelet connects to the
		// pod's address, which a loopback healthAddress does not serve.
		if config.IsLoopback(p.cfg.HealthAddress) {
			t.Errorf("the probes ask healthAddress %q over HTTP at the pod's address, where a loopback listener is not", p.cfg.HealthAddress)
		}
		for _, pr := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"readiness", ctr.ReadinessProbe, "/readyz"}, {"liveness", ctr.LivenessProbe, "/healthz"}} {
			if pr.probe == nil || pr.probe.HTTPGet == nil || pr.probe.Exec != nil || pr.probe.HTTPGet.Path != pr.path ||
				pr.probe.HTTPGet.Port.String() != "health" || pr.probe.HTTPGet.Host != "" {
				t.Errorf("%s probe %+v, want an HTTP GET of %s on the port health at the pod's address", pr.name, pr.probe, pr.path)
			}
		}
	case p.cfg.ProbeSocket == "":
		if ctr.ReadinessProbe != nil || ctr.LivenessProbe != nil {
			t.Errorf("no probe socket nor health address, yet readiness %v, liveness %v", ctr.ReadinessProbe, ctr.LivenessProbe)
		}
	default:
		for _, pr := range []struct {
			name  string
			probe *corev1.Probe
			kind  string
		}{{"readiness", ctr.ReadinessProbe, "ready"}, {"liveness", ctr.LivenessProbe, "live"}} {
			want := []string{"/usr/bin/nri-cpumanager", "probe", pr.kind, "--config", "/etc/nri-cpumanager/config.yaml"}
			if pr.probe == nil || pr.probe.Exec == nil || !slices.Equal(pr.probe.Exec.Command, want) || pr.probe.HTTPGet != nil {
				t.Errorf("%s probe %+v, want exec %q", pr.name, pr.probe, want)
			}
		}
		mounted := false
		for _, m := range ctr.VolumeMounts {
			mounted = mounted || strings.HasPrefix(p.cfg.ProbeSocket, strings.TrimSuffix(m.MountPath, "/")+"/") && !m.ReadOnly
		}
		if !mounted {
			t.Errorf("probe socket %s: no writable volume mounted where it is (a read-only root file system cannot hold it)", p.cfg.ProbeSocket)
		}
	}
	if metricsPort == "" {
		if ann["prometheus.io/scrape"] != "" {
			t.Errorf("metrics are off, yet the scrape annotation is %q", ann["prometheus.io/scrape"])
		}
	} else if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != metricsPort {
		t.Errorf("scrape annotations %v, want port %s", ann, metricsPort)
	}
	// /healthz fails once the plugin has gone disconnectedTimeout without
	// a synchronized connection; the probe must then restart it soon, not
	// after minutes more, nor on one slow answer.
	if lp := ctr.LivenessProbe; lp != nil {
		window := time.Duration(lp.PeriodSeconds*lp.FailureThreshold) * time.Second
		if window > 30*time.Second || lp.FailureThreshold < 2 || lp.TimeoutSeconds < 2 {
			t.Errorf("liveness probe every %ds, %d failures, %ds timeout: a wedge is restarted %v after /healthz fails; want at most 30s, 2 failures and a 2s timeout at least",
				lp.PeriodSeconds, lp.FailureThreshold, lp.TimeoutSeconds, window)
		}
	}
}

// checkWedgeRestart checks that, as shipped, a plugin left without a
// synchronized NRI connection is restarted within two minutes:
// disconnectedTimeout, then the liveness probe's failures.
func checkWedgeRestart(t *testing.T, p *deployed) {
	t.Helper()
	lp := p.ctr.LivenessProbe
	if lp == nil || p.cfg.DisconnectedTimeout <= 0 {
		t.Fatalf("liveness probe %v, disconnectedTimeout %v: a wedged plugin is never restarted", lp, p.cfg.DisconnectedTimeout)
	}
	window := time.Duration(lp.PeriodSeconds*lp.FailureThreshold) * time.Second
	if total := p.cfg.DisconnectedTimeout + window; total > 2*time.Minute {
		t.Errorf("a wedged plugin is restarted after %v (disconnectedTimeout %v + the probe's %v)", total, p.cfg.DisconnectedTimeout, window)
	}
}

// selects reports whether every label of selector is in labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// guardFlags are the flags of nri-cpumanager validate-adjustments the
// packaging may give besides --config.
var guardFlags = []string{"--all-plugins", "--allow-unattributed-removals"}

// checkGuard checks the validating NRI plugin's container: the plugin's
// image, the command on the plugin's own configuration file, the same
// confinement as the plugin (root only for the NRI socket's directory, no
// capability, read-only root file system), no CPU limit and a memory
// limit GOMEMLIMIT follows, and nothing of the host but the NRI socket's
// directory, read-only.
func checkGuard(t *testing.T, p *deployed) {
	t.Helper()
	g := p.guard
	if g.Image != p.ctr.Image || g.ImagePullPolicy != p.ctr.ImagePullPolicy {
		t.Errorf("%s runs %s (%s), the plugin %s (%s): want the same image", guardName, g.Image, g.ImagePullPolicy, p.ctr.Image, p.ctr.ImagePullPolicy)
	}
	if len(g.Command) > 0 || len(g.Args) < 3 || !slices.Equal(g.Args[:3], []string{"validate-adjustments", "--config", configMount + "/config.yaml"}) {
		t.Errorf("%s: command %q args %q, want validate-adjustments --config %s/config.yaml", guardName, g.Command, g.Args, configMount)
	} else {
		for _, a := range g.Args[3:] {
			if !slices.Contains(guardFlags, a) {
				t.Errorf("%s: argument %q, not one of %q", guardName, a, guardFlags)
			}
		}
	}
	if q, ok := g.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("%s: CPU limit %s: it answers inside every creation; a CFS quota can stall it", guardName, q.String())
	}
	limit, ok := g.Resources.Limits[corev1.ResourceMemory]
	if req := g.Resources.Requests[corev1.ResourceMemory]; !ok || limit.Cmp(req) < 0 || req.IsZero() || g.Resources.Requests.Cpu().IsZero() {
		t.Errorf("%s: resources %+v, want CPU and memory requests and a memory limit", guardName, g.Resources)
	}
	var memoryLimit bool
	for _, e := range g.Env {
		if e.Name == memoryLimitEnv && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" && e.ValueFrom.ResourceFieldRef.ContainerName == guardName {
			memoryLimit = true
		}
	}
	if !memoryLimit {
		t.Errorf("%s: env %+v, want %s from its own limits.memory", guardName, g.Env, memoryLimitEnv)
	}
	sc := g.SecurityContext
	if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: securityContext %+v, want no privilege, no escalation, a read-only root file system, every capability dropped", guardName, sc)
	}
	if len(g.Ports) > 0 || len(g.VolumeDevices) > 0 {
		t.Errorf("%s: ports %v, devices %v: want none", guardName, g.Ports, g.VolumeDevices)
	}
	want := map[string]bool{configMount: false, path.Dir(p.cfg.NRISocket): true} // mount path: from the host
	if len(g.VolumeMounts) != len(want) {
		t.Errorf("%s mounts %+v, want %v only", guardName, g.VolumeMounts, keys(want))
	}
	for _, m := range g.VolumeMounts {
		host, ok := want[m.MountPath]
		v := volume(t, p.pod, m.Name)
		switch {
		case !ok:
			t.Errorf("%s mounts %s at %s", guardName, m.Name, m.MountPath)
		case !m.ReadOnly:
			t.Errorf("%s mounts %s writable", guardName, m.MountPath)
		case host && (v.HostPath == nil || v.HostPath.Path != m.MountPath):
			t.Errorf("%s: %s is not the host's NRI socket directory: %+v", guardName, m.MountPath, v)
		case !host && (v.ConfigMap == nil || v.ConfigMap.Name != p.cm.Name):
			t.Errorf("%s: %s is not the plugin's ConfigMap: %+v", guardName, m.MountPath, v)
		}
	}
}
