package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/config"
	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// doctorNode is a fake node for doctor: a host root with containerd's and
// the kubelet's files (and, when a test writes them, their processes
// under /proc), a sysfs, a cgroup tree and a listening NRI socket; and,
// when a test starts it, the plugin's metrics naming the runtime.
type doctorNode struct {
	t                      *testing.T
	root, sys, cgroups, ns string
	metrics                string // the plugin's /metrics URL, "" for none
}

func newDoctorNode(t *testing.T) *doctorNode {
	t.Helper()
	n := newBareDoctorNode(t)
	if err := fakesysfs.Generate(n.sys, fakesysfs.KEP5554UseCases()); err != nil {
		t.Fatal(err)
	}
	return n
}

// newBareDoctorNode is a doctorNode with an empty sysfs, for the checks
// that do not read the CPUs (the start-up check's, containerd's, the
// kubelet's).
func newBareDoctorNode(t *testing.T) *doctorNode {
	t.Helper()
	n := &doctorNode{t: t, root: t.TempDir(), sys: t.TempDir(), cgroups: t.TempDir()}
	// A short directory: a unix socket's path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "nri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n.ns = filepath.Join(dir, "nri.sock")
	ln, err := net.Listen("unix", n.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n.write(filepath.Join(n.cgroups, "cgroup.controllers"), "cpuset cpu memory\n")
	if err := os.MkdirAll(filepath.Join(n.cgroups, "kubepods.slice"), 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *doctorNode) write(path, text string) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// host writes a file of the host, under the host root.
func (n *doctorNode) host(path, text string) { n.write(filepath.Join(n.root, path), text) }

// process writes a host process's command line under the host's /proc.
func (n *doctorNode) process(pid int, args ...string) {
	n.host(fmt.Sprintf("/proc/%d/cmdline", pid), strings.Join(args, "\x00")+"\x00")
}

// kubeadm writes the processes of a kubeadm node: the kubelet with its
// --config (and extra flags), containerd on its default configuration.
func (n *doctorNode) kubeadm(kubeletFlags ...string) {
	n.process(1, "/sbin/init")
	n.process(700, "/usr/bin/containerd")
	n.process(900, append([]string{"/usr/bin/kubelet", "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml"}, kubeletFlags...)...)
}

// pluginMetrics serves the plugin's metrics as a plugin connected to a
// runtime (ready, or not any more) shows them.
func (n *doctorNode) pluginMetrics(name, version string, ready bool) {
	n.t.Helper()
	r := 0
	if ready {
		r = 1
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# HELP nri_cpumanager_ready x\n# TYPE nri_cpumanager_ready gauge\nnri_cpumanager_ready %d\n"+
			"# TYPE nri_cpumanager_runtime_info gauge\nnri_cpumanager_runtime_info{name=%q,version=%q} 1\n", r, name, version)
	}))
	n.t.Cleanup(srv.Close)
	n.metrics = srv.URL + "/metrics"
}

// run runs doctor on the node with the plugin's config file (YAML, "" for
// none) and extra arguments, and returns its exit status and output.
func (n *doctorNode) run(pluginConfig string, args ...string) (int, string) {
	n.t.Helper()
	all := []string{"doctor", "--host-root", n.root, "--sysfs-root", n.sys, "--cgroupfs-root", n.cgroups, "--nri-socket", n.ns, "--plugin-metrics", n.metrics}
	if pluginConfig != "" {
		path := filepath.Join(n.t.TempDir(), "config.yaml")
		n.write(path, pluginConfig)
		all = append(all, "--config", path)
	}
	var out bytes.Buffer
	status := run(append(all, args...), &out, &out)
	return status, out.String()
}

// shippedDropIn returns deploy/containerd-nri.toml with its fail-closed
// lines uncommented.
func shippedDropIn(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "containerd-nri.toml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, key := range []string{"required_plugins", "tolerate_missing_plugins_annotation"} {
		if !strings.Contains(text, "  # "+key+" = ") {
			t.Fatalf("deploy/containerd-nri.toml has no commented %s line", key)
		}
		text = strings.Replace(text, "  # "+key+" = ", "  "+key+" = ", 1)
	}
	return text
}

const kubeletNone = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
reservedSystemCPUs: "0"
`

const systemdRunc = `
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = true
`

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("doctor's output lacks %q:\n%s", l, out)
		}
	}
}

// TestDoctorHealthyNode: everything as docs/install.md sets it up, the
// drop-in imported and failing closed; nothing wrong, exit status 0.
func TestDoctorHealthyNode(t *testing.T) {
	n := newDoctorNode(t)
	n.host("/etc/containerd/config.toml", "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n"+systemdRunc)
	n.host("/etc/containerd/conf.d/nri.toml", strings.ReplaceAll(shippedDropIn(t), "/var/run/nri/nri.sock", n.ns))
	n.host("/var/lib/kubelet/config.yaml", kubeletNone)
	n.kubeadm()
	status, out := n.run("")
	if status != exitOK {
		t.Errorf("doctor on a healthy node: status %d\n%s", status, out)
	}
	wantLines(t, out,
		"/etc/containerd/config.toml (containerd's default: /proc/700/cmdline gives no --config; version 3) imports /etc/containerd/conf.d/nri.toml",
		"ok    NRI         enabled (disable = false, from /etc/containerd/conf.d/nri.toml)",
		"ok    NRI         socket "+n.ns+" exists",
		"ok    validator   containerd refuses OCI hook, namespace, sysctl and seccomp adjustments by any plugin (/etc/containerd/conf.d/nri.toml)",
		"ok    fail-closed on: containerd refuses new containers while cpumanager is away",
		"ok    kubelet     cpuManagerPolicy: none (the kubelet's default; read: /var/lib/kubelet/config.yaml)",
		"ok    kubelet     reserves CPUs 0, as the plugin does",
		"ok    cgroups     cgroup v2 (unified) at "+n.cgroups+"; the kubelet's pods are under "+n.cgroups+" (the systemd driver)",
		"info  CPUs        online 0-11; no isolated CPUs",
		"ok    plugin      CPUs for exclusive containers: 1-11",
		"no problem found.")
	if strings.Contains(out, "FAIL") || strings.Contains(out, "\nwarn") {
		t.Errorf("a healthy node has a problem:\n%s", out)
	}
}

// TestDoctorDropInNotImported: containerd 2.x has NRI on by default, so the
// socket is there even though the drop-in (fail-closed block included) is
// ignored: doctor says so, with the fix.
func TestDoctorDropInNotImported(t *testing.T) {
	n := newDoctorNode(t)
	n.host("/etc/containerd/config.toml", "version = 3\n"+systemdRunc)
	n.host("/etc/containerd/conf.d/nri.toml", shippedDropIn(t))
	n.host("/var/lib/kubelet/config.yaml", kubeletNone)
	n.kubeadm()
	n.pluginMetrics("containerd", "v2.4.2", false) // the version; not connected
	status, out := n.run("")
	if status != exitFailure {
		t.Errorf("status %d, want 1", status)
	}
	wantLines(t, out,
		"ok    containerd  containerd v2.4.2",
		"/etc/containerd/config.toml (containerd's default: /proc/700/cmdline gives no --config; version 3) imports nothing",
		"FAIL  containerd  drop-in /etc/containerd/conf.d/nri.toml is not imported by /etc/containerd/config.toml: it configures NRI but does not count",
		`fix: add imports = ["/etc/containerd/conf.d/*.toml"] at the top of /etc/containerd/config.toml (before any table) and restart containerd`,
		"ok    NRI         enabled (containerd 2.x's default: no file sets it)",
		"info  fail-closed off:",
		"FAIL  NRI         containerd listens on /var/run/nri/nri.sock, the plugin dials "+n.ns,
		"2 problem(s)")
}

// TestDoctorFindsMisconfigurations: each thing docs/install.md asks for,
// wrong, is a problem with its fix.
func TestDoctorFindsMisconfigurations(t *testing.T) {
	n := newDoctorNode(t)
	n.host("/etc/containerd/config.toml", `version = 3
[plugins.'io.containerd.nri.v1.nri']
  disable = true
  socket_path = "/run/nri/other.sock"
[plugins.'io.containerd.nri.v1.nri'.default_validator]
  enable = true
  required_plugins = ["cpumanager"]
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
`)
	n.host("/etc/kubernetes/kubelet-config.yaml", `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
reservedSystemCPUs: "0,6"
cgroupDriver: systemd
topologyManagerPolicy: single-numa-node
`)
	status, out := n.run("")
	if status != exitFailure {
		t.Errorf("status %d, want 1", status)
	}
	wantLines(t, out,
		"FAIL  NRI         disabled (disable = true, from /etc/containerd/config.toml)",
		"FAIL  NRI         containerd listens on /run/nri/other.sock, the plugin dials "+n.ns,
		`FAIL  fail-closed containerd requires cpumanager (/etc/containerd/config.toml) but tolerate_missing_plugins_annotation is ""`,
		`fix: tolerate_missing_plugins_annotation = "tolerate-missing-nri-plugins.noderesource.dev"`,
		"warn  validator   containerd does not refuse reject_oci_hook_adjustment, reject_namespace_adjustment, reject_sysctl_adjustment, "+
			"reject_runtime_default_seccomp_adjustment, reject_unconfined_seccomp_adjustment, reject_custom_seccomp_adjustment: any plugin on its NRI socket may make these adjustments",
		"FAIL  kubelet     cpuManagerPolicy: static (set by /etc/kubernetes/kubelet-config.yaml; read: /etc/kubernetes/kubelet-config.yaml)",
		"FAIL  kubelet     reserves CPUs 0,6 (reservedSystemCPUs), the plugin reserves CPUs 0 (reservedSystemCPUs)",
		`fix: reservedSystemCPUs: "0,6" and no reservedCPUCount in the plugin's ConfigMap`,
		"warn  kubelet     topologyManagerPolicy: single-numa-node places the pods' devices, the plugin's is none: pinned CPUs ignore the devices' NUMA nodes",
		"FAIL  cgroups     containerd's runc uses the cgroupfs driver (SystemdCgroup = false), the kubelet systemd",
		"6 problem(s)")
}

// TestDoctorKubeletConfigz reads the kubelet's live configuration as
// kubectl get --raw /api/v1/nodes/NODE/proxy/configz gives it, on standard
// input, and compares a systemReserved + kubeReserved reservation with the
// plugin's count.
func TestDoctorKubeletConfigz(t *testing.T) {
	n := newDoctorNode(t)
	old := stdin
	t.Cleanup(func() { stdin = old })
	configz := `{"kubeletconfig":{"cpuManagerPolicy":"none","systemReserved":{"cpu":"500m","memory":"1Gi"},"kubeReserved":{"cpu":"1"},"cgroupDriver":"systemd"}}`

	stdin = strings.NewReader(configz)
	_, out := n.run("reservedSystemCPUs: \"\"\nreservedCPUCount: 2\n", "--kubelet-config", "-")
	wantLines(t, out,
		"ok    kubelet     cpuManagerPolicy: none (standard input; read: standard input (the kubelet's /configz: its configuration as it runs))",
		"ok    kubelet     reserves 1500m CPU (systemReserved + kubeReserved), 2 CPU(s) for its static policy; the plugin reserves 2 CPU(s) (reservedCPUCount)")

	stdin = strings.NewReader(configz)
	status, out := n.run("", "--kubelet-config", "-")
	wantLines(t, out, `FAIL  kubelet     reserves 1500m CPU`, `fix: reservedSystemCPUs: "" and reservedCPUCount: 2 in the plugin's ConfigMap`)
	if status != exitFailure {
		t.Errorf("status %d, want 1", status)
	}
}

// TestDoctorKubeletConfigzURL reads the kubelet's /configz over HTTP
// (its read-only port, or a proxy), and says so when it cannot.
func TestDoctorKubeletConfigzURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/configz" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"kubeletconfig":{"cpuManagerPolicy":"static","reservedSystemCPUs":"0","cgroupDriver":"systemd"}}`)
	}))
	defer srv.Close()
	n := newDoctorNode(t)
	status, out := n.run("", "--kubelet-config", srv.URL+"/configz")
	wantLines(t, out, "FAIL  kubelet     cpuManagerPolicy: static (set by "+srv.URL+"/configz;", "ok    kubelet     reserves CPUs 0, as the plugin does")
	if status != exitFailure {
		t.Errorf("status %d, want 1", status)
	}
	status, out = n.run("", "--kubelet-config", srv.URL+"/nothing")
	if status == exitFailure {
		t.Errorf("status %d with the kubelet unseen, want no failure", status)
	}
	wantLines(t, out, "warn  kubelet     unknown: the kubelet's configuration is not visible: "+srv.URL+"/nothing: 404 Not Found")
	if strings.Contains(out, "FAIL  kubelet") {
		t.Errorf("the kubelet unseen is a problem, want unknown:\n%s", out)
	}
}

// TestDoctorOnTheNodeFindsTheKubeletsFlags reads the kubelet's --config
// and deprecated flags from its command line under the host's /proc.
func TestDoctorOnTheNodeFindsTheKubeletsFlags(t *testing.T) {
	n := newDoctorNode(t)
	n.host("/srv/kubelet.yaml", kubeletNone)
	n.host("/proc/1/cmdline", "/sbin/init\x00")
	n.host("/proc/42/cmdline", "/usr/bin/kubelet\x00--config=/srv/kubelet.yaml\x00--reserved-cpus\x000-1\x00")
	_, out := n.run("")
	wantLines(t, out, "FAIL  kubelet     reserves CPUs 0-1 (reservedSystemCPUs), the plugin reserves CPUs 0",
		"ok    kubelet     cpuManagerPolicy: none (the kubelet's default; read: /srv/kubelet.yaml, flag --reserved-cpus=0-1 (/proc/42/cmdline))")
}

// TestDoctorContainerdVersionFromBinary reads the version containerd's
// release build stamps, without running the binary.
func TestDoctorContainerdVersionFromBinary(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/fakecontainerd\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := newDoctorNode(t)
	bin := filepath.Join(n.root, "usr", "bin", "containerd")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/containerd/containerd/v2/version.Version=v2.4.2", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, out := n.run("")
	wantLines(t, out, "ok    containerd  containerd v2.4.2 (from its binary /usr/bin/containerd)\n")
	build = exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/containerd/containerd/v2/version.Version=v2.2.1", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, out = n.run("")
	wantLines(t, out, "warn  containerd  containerd v2.2.1 (from its binary /usr/bin/containerd): UpdatePodSandbox (CRI UpdatePodSandboxResources), which pod-level resize admission needs, comes with containerd 2.3")
	if major, minor := parseVersion("containerd v1.7.27"); major != 1 || minor != 7 {
		t.Errorf("parseVersion = %d.%d", major, minor)
	}
}

// healthyContainerd writes a containerd configuration at path that
// imports deploy/containerd-nri.toml's drop-in (fail-closed lines on) from
// conf.d next to it, NRI on the node's socket, runc on systemd cgroups.
func (n *doctorNode) healthyContainerd(path string) {
	dir := filepath.Dir(path)
	n.host(path, "version = 3\nimports = [\""+dir+"/conf.d/*.toml\"]\n"+systemdRunc)
	n.host(dir+"/conf.d/nri.toml", strings.ReplaceAll(shippedDropIn(n.t), "/var/run/nri/nri.sock", n.ns))
}

const kubeletStaticDropIn = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
systemReserved: {cpu: "1"}
`

const kubeletNoneDropIn = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: none
`

// TestDoctorFixtureNodes runs doctor on the node's files and processes of
// kubeadm, k3s and RKE2 nodes: the kubelet's configuration put together
// as the kubelet does (its --config, the drop-ins of its --config-dir in
// lexical order, maps merged and the rest replaced, files not *.conf
// skipped, its flags last), k3s's and RKE2's config.yaml with
// config.yaml.d (kubelet-arg+ appending) and their own containerd
// configuration, never /etc/containerd's.
func TestDoctorFixtureNodes(t *testing.T) {
	const kubeadmDropIns = "/etc/kubernetes/kubelet.conf.d"
	sys := t.TempDir()
	if err := fakesysfs.Generate(sys, fakesysfs.KEP5554UseCases()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		setup  func(n *doctorNode)
		want   []string
		forbid []string
		status int
	}{
		{"kubeadm: a drop-in sets static over the main file's none", func(n *doctorNode) {
			n.healthyContainerd("/etc/containerd/config.toml")
			n.host("/var/lib/kubelet/config.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"+
				"cpuManagerPolicy: none\nsystemReserved: {memory: 1Gi}\n")
			n.host(kubeadmDropIns+"/10-base.conf", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n")
			n.host(kubeadmDropIns+"/20-cpu.conf", kubeletStaticDropIn)
			n.host(kubeadmDropIns+"/30-ignored.yaml", kubeletNoneDropIn) // not *.conf: the kubelet skips it
			n.kubeadm("--config-dir=" + kubeadmDropIns)
		}, []string{
			"FAIL  kubelet     cpuManagerPolicy: static (set by /etc/kubernetes/kubelet.conf.d/20-cpu.conf; read: /var/lib/kubelet/config.yaml, " +
				"/etc/kubernetes/kubelet.conf.d/10-base.conf, /etc/kubernetes/kubelet.conf.d/20-cpu.conf): two CPU managers would fight over the same cpusets",
			// systemReserved merged key by key: the drop-in's cpu beside the main file's memory.
			"ok    kubelet     reserves 1000m CPU (systemReserved + kubeReserved), 1 CPU(s) for its static policy",
			"1 problem(s)",
		}, []string{"ok    kubelet     cpuManagerPolicy"}, exitFailure},
		{"kubeadm: a drop-in sets none over the main file's static", func(n *doctorNode) {
			n.healthyContainerd("/etc/containerd/config.toml")
			n.host("/var/lib/kubelet/config.yaml", kubeletNone+"cpuManagerPolicy: static\n")
			n.host(kubeadmDropIns+"/90-plugin.conf", kubeletNoneDropIn)
			n.kubeadm("--config-dir", kubeadmDropIns)
		}, []string{
			"ok    kubelet     cpuManagerPolicy: none (/etc/kubernetes/kubelet.conf.d/90-plugin.conf; read: /var/lib/kubelet/config.yaml, /etc/kubernetes/kubelet.conf.d/90-plugin.conf)",
			"no problem found.",
		}, nil, exitOK},
		{"kubeadm: the drop-in as shipped, failing closed not opted in", func(n *doctorNode) {
			n.host("/etc/containerd/config.toml", "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n"+systemdRunc)
			data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "containerd-nri.toml"))
			if err != nil {
				t.Fatal(err)
			}
			n.host("/etc/containerd/conf.d/nri.toml", strings.ReplaceAll(string(data), "/var/run/nri/nri.sock", n.ns))
			n.host("/var/lib/kubelet/config.yaml", kubeletNone)
			n.kubeadm()
		}, []string{
			`info  fail-closed off: the default validator is on (/etc/containerd/conf.d/nri.toml) but required_plugins [] does not name the plugin (cpumanager)`,
			"no problem found.",
		}, []string{"warn  "}, exitOK},
		{"kubeadm: --config-dir from kubeadm-flags.env through systemd, no kubelet running", func(n *doctorNode) {
			n.healthyContainerd("/etc/containerd/config.toml")
			n.process(700, "/usr/bin/containerd")
			n.host("/usr/lib/systemd/system/kubelet.service", "[Unit]\nDescription=kubelet\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n")
			n.host("/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`)
			n.host("/var/lib/kubelet/kubeadm-flags.env", `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --config-dir=/etc/kubernetes/kubelet.conf.d"`+"\n")
			n.host("/var/lib/kubelet/config.yaml", kubeletNone)
			n.host(kubeadmDropIns+"/50-cpu.conf", kubeletStaticDropIn)
		}, []string{
			"FAIL  kubelet     cpuManagerPolicy: static (set by /etc/kubernetes/kubelet.conf.d/50-cpu.conf; read: /var/lib/kubelet/config.yaml, /etc/kubernetes/kubelet.conf.d/50-cpu.conf)",
		}, []string{"ok    kubelet     cpuManagerPolicy"}, exitFailure},
		{"k3s: kubelet-arg+ of config.yaml.d sets static; its containerd turns NRI off", func(n *doctorNode) {
			n.healthyContainerd("/etc/containerd/config.toml") // not what k3s's containerd reads
			n.process(1, "/sbin/init")
			n.process(400, "/usr/local/bin/k3s", "server")
			n.process(420, "containerd", "-c", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml", "-a", "/run/k3s/containerd/containerd.sock")
			n.host("/etc/rancher/k3s/config.yaml", "write-kubeconfig-mode: \"0644\"\nkubelet-arg:\n- reserved-cpus=0\n")
			n.host("/etc/rancher/k3s/config.yaml.d/50-cpu.yaml", "kubelet-arg+:\n- cpu-manager-policy=static\n")
			n.host("/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf", kubeletNone)
			n.host("/var/lib/rancher/k3s/agent/etc/containerd/config.toml", "version = 3\n[plugins.'io.containerd.nri.v1.nri']\n  disable = true\n"+systemdRunc)
		}, []string{
			"info  containerd  /var/lib/rancher/k3s/agent/etc/containerd/config.toml (the --config of /proc/420/cmdline; version 3) imports nothing",
			"FAIL  NRI         disabled (disable = true, from /var/lib/rancher/k3s/agent/etc/containerd/config.toml)",
			"fix: put the NRI table with disable = false in k3s's containerd template",
			"FAIL  kubelet     cpuManagerPolicy: static (set by flag --cpu-manager-policy (k3s's kubelet-arg, /proc/400/cmdline); read: /etc/rancher/k3s/config.yaml, " +
				"/etc/rancher/k3s/config.yaml.d/50-cpu.yaml, /var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf, flag --reserved-cpus=0",
			"ok    kubelet     reserves CPUs 0, as the plugin does",
		}, []string{"ok    NRI         enabled", "/etc/containerd/conf.d/nri.toml"}, exitFailure},
		{"k3s: kubelet-arg config=, NRI in its template", func(n *doctorNode) {
			n.process(400, "/usr/local/bin/k3s", "agent", "--kubelet-arg=reserved-cpus=0")
			n.host("/etc/rancher/k3s/config.yaml", "kubelet-arg:\n- config=/etc/rancher/k3s/kubelet.yaml\n")
			n.host("/etc/rancher/k3s/kubelet.yaml", kubeletNoneDropIn+"cgroupDriver: systemd\n")
			n.host("/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n")
			n.healthyContainerd("/var/lib/rancher/k3s/agent/etc/containerd/config.toml")
			n.host("/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl", "{{ template \"base\" . }}\n")
		}, []string{
			"info  containerd  /var/lib/rancher/k3s/agent/etc/containerd/config.toml (k3s's; version 3) imports /var/lib/rancher/k3s/agent/etc/containerd/conf.d/nri.toml",
			"info  containerd  k3s writes /var/lib/rancher/k3s/agent/etc/containerd/config.toml from /var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl at every start",
			"ok    NRI         enabled (disable = false, from /var/lib/rancher/k3s/agent/etc/containerd/conf.d/nri.toml)",
			"ok    kubelet     cpuManagerPolicy: none (/etc/rancher/k3s/kubelet.yaml; read: /etc/rancher/k3s/config.yaml, /etc/rancher/k3s/kubelet.yaml, " +
				"/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf, flag --reserved-cpus=0 (k3s's kubelet-arg, /proc/400/cmdline))",
			"no problem found.",
		}, nil, exitOK},
		{"k3s: container-runtime-endpoint names the system's containerd", func(n *doctorNode) {
			n.process(400, "/usr/local/bin/k3s", "agent")
			n.host("/etc/rancher/k3s/config.yaml", "container-runtime-endpoint: unix:///run/containerd/containerd.sock\nkubelet-arg:\n- reserved-cpus=0\n")
			n.host("/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf", kubeletNone)
			// k3s's own containerd's configuration, unused: NRI off there.
			n.host("/var/lib/rancher/k3s/agent/etc/containerd/config.toml", "version = 3\n[plugins.'io.containerd.nri.v1.nri']\n  disable = true\n")
			n.host("/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl", "{{ template \"base\" . }}\n")
			n.healthyContainerd("/etc/containerd/config.toml")
		}, []string{
			"info  containerd  /etc/containerd/config.toml (containerd's default path, its command line not visible here; version 3) imports /etc/containerd/conf.d/nri.toml",
			"ok    NRI         enabled (disable = false, from /etc/containerd/conf.d/nri.toml)",
			"no problem found.",
		}, []string{"/var/lib/rancher/k3s/agent/etc/containerd", "FAIL"}, exitOK},
		{"RKE2: a drop-in of its kubelet.conf.d sets static", func(n *doctorNode) {
			n.process(300, "/var/lib/rancher/rke2/bin/containerd", "-c", "/var/lib/rancher/rke2/agent/etc/containerd/config.toml", "-a", "/run/k3s/containerd/containerd.sock")
			n.process(310, "kubelet", "--volume-plugin-dir=/var/lib/kubelet/volumeplugins", "--config-dir=/var/lib/rancher/rke2/agent/etc/kubelet.conf.d",
				"--containerd=/run/k3s/containerd/containerd.sock", "--reserved-cpus=0")
			n.host("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf", kubeletNone)
			n.host("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/50-cpu.conf", kubeletStaticDropIn)
			n.healthyContainerd("/var/lib/rancher/rke2/agent/etc/containerd/config.toml")
		}, []string{
			"info  containerd  /var/lib/rancher/rke2/agent/etc/containerd/config.toml (the --config of /proc/300/cmdline; version 3) imports",
			"ok    NRI         enabled (disable = false, from /var/lib/rancher/rke2/agent/etc/containerd/conf.d/nri.toml)",
			"FAIL  kubelet     cpuManagerPolicy: static (set by /var/lib/rancher/rke2/agent/etc/kubelet.conf.d/50-cpu.conf; read: /var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf, " +
				"/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/50-cpu.conf, flag --reserved-cpus=0 (/proc/310/cmdline))",
			"1 problem(s)",
		}, []string{"ok    kubelet     cpuManagerPolicy"}, exitFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newBareDoctorNode(t)
			n.sys = sys // read only: one for all
			tc.setup(n)
			status, out := n.run("")
			wantLines(t, out, tc.want...)
			for _, f := range tc.forbid {
				if strings.Contains(out, f) {
					t.Errorf("doctor's output has %q:\n%s", f, out)
				}
			}
			if status != tc.status {
				t.Errorf("status %d, want %d:\n%s", status, tc.status, out)
			}
		})
	}
}

// defaultMounts are the host paths the default install mounts under
// /host (deploy/daemonset.yaml, the chart).
var defaultMounts = []string{"/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet.conf.d", "/etc/containerd/config.toml", "/etc/containerd/conf.d"}

// TestDoctorHidesEachFile runs doctor's node checks as the plugin's pod
// sees a kubeadm node (only the host paths mounted under its host root,
// no process), with each file the default install mounts hidden in
// turn: what it does not see is unknown, a warning that names it, never
// ok; a runtime that is k3s's build makes /etc/containerd's files not
// containerd's.
func TestDoctorHidesEachFile(t *testing.T) {
	const (
		kubeletUnknown = "warn  kubelet     unknown: cpuManagerPolicy is none in what doctor read"
		nriUnknown     = "warn  NRI         unknown: whether NRI is enabled"
	)
	for _, tc := range []struct {
		name    string
		hide    string
		runtime runtimeInfo
		want    []string
		forbid  []string
	}{
		{"nothing hidden", "", runtimeInfo{}, []string{
			kubeletUnknown + " (/var/lib/kubelet/config.yaml, /etc/kubernetes/kubelet.conf.d/10-x.conf), but not seen: the kubelet's command line",
			"ok    NRI         enabled (disable = false, from /etc/containerd/conf.d/nri.toml)",
		}, []string{"ok    kubelet     cpuManagerPolicy"}},
		{"the kubelet's configuration file", "/var/lib/kubelet/config.yaml", runtimeInfo{}, []string{
			kubeletUnknown + " (/etc/kubernetes/kubelet.conf.d/10-x.conf), but not seen: the kubelet's configuration file (none of the usual paths visible here)",
		}, []string{"ok    kubelet"}},
		{"the kubelet's drop-in directory", "/etc/kubernetes/kubelet.conf.d", runtimeInfo{}, []string{
			kubeletUnknown + " (/var/lib/kubelet/config.yaml), but not seen: drop-ins of /etc/kubernetes/kubelet.conf.d or /etc/kubernetes/kubelet/config.json.d (not visible here)",
		}, []string{"ok    kubelet"}},
		{"containerd's config.toml", "/etc/containerd/config.toml", runtimeInfo{}, []string{
			"warn  containerd  unknown: containerd's configuration /etc/containerd/config.toml is not visible here",
			nriUnknown + ": the containerd configuration that decides it is not visible here",
		}, []string{"ok    NRI         enabled", "  fail-closed ", "  validator   "}},
		{"containerd's conf.d", "/etc/containerd/conf.d", runtimeInfo{}, []string{
			"warn  containerd  unknown: /etc/containerd/config.toml imports /etc/containerd/conf.d/*.toml, not visible here",
			nriUnknown + ": an import of containerd's configuration is not visible here",
		}, []string{"ok    NRI         enabled", "  fail-closed ", "  validator   "}},
		{"k3s's containerd, kubeadm's paths mounted", "", runtimeInfo{"containerd", "v2.1.5-k3s1"}, []string{
			"warn  containerd  containerd v2.1.5-k3s1 (from NRI's Configure), k3s's or RKE2's build: UpdatePodSandbox",
			"warn  containerd  unknown: containerd v2.1.5-k3s1 is k3s's or RKE2's build, whose configuration (/var/lib/rancher/{k3s,rke2}/agent/etc/containerd/config.toml) is not visible here",
			"ok    NRI         enabled: containerd v2.1.5-k3s1 configured the plugin over NRI",
		}, []string{"/etc/containerd/conf.d/nri.toml", "  fail-closed "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newBareDoctorNode(t)
			n.healthyContainerd("/etc/containerd/config.toml")
			n.host("/var/lib/kubelet/config.yaml", kubeletNone)
			n.host("/etc/kubernetes/kubelet.conf.d/10-x.conf", kubeletNoneDropIn)
			mounts := slices.DeleteFunc(slices.Clone(defaultMounts), func(m string) bool { return m == tc.hide })
			cfg := config.Default()
			cfg.SysfsRoot, cfg.CgroupfsRoot, cfg.NRISocket = n.sys, n.cgroups, n.ns
			var out bytes.Buffer
			d := &doctorRun{hostRoot: n.root, cfg: cfg, out: &out, view: hostView{root: n.root, mounts: mounts}, runtime: tc.runtime, runtimeConnected: tc.runtime.name != ""}
			d.checkContainerd()
			d.checkKubelet()
			wantLines(t, out.String(), tc.want...)
			for _, f := range tc.forbid {
				if strings.Contains(out.String(), f) {
					t.Errorf("doctor's output has %q:\n%s", f, out.String())
				}
			}
			if d.fails > 0 {
				t.Errorf("%d problem(s) on a healthy node, some of it hidden:\n%s", d.fails, out.String())
			}
		})
	}
}

// TestHostView reads which host paths a pod sees from its mountinfo.
func TestHostView(t *testing.T) {
	mountinfo := []byte(`22 1 0:21 / / rw,relatime - overlay overlay rw
30 22 8:1 /var/lib/kubelet/config.yaml /host/var/lib/kubelet/config.yaml ro,relatime - ext4 /dev/sda1 rw
31 22 8:1 /etc/containerd/conf.d /host/etc/containerd/conf.d ro,relatime - ext4 /dev/sda1 rw
32 22 8:1 /etc/with\040space /host/etc/with\040space ro - ext4 /dev/sda1 rw
`)
	got := mountPoints(mountinfo)
	want := []string{"/", "/host/var/lib/kubelet/config.yaml", "/host/etc/containerd/conf.d", "/host/etc/with space"}
	if !slices.Equal(got, want) {
		t.Errorf("mountPoints = %q, want %q", got, want)
	}
	for root, want := range map[string]struct {
		isMount bool
		below   []string
	}{
		"/host": {false, []string{"/var/lib/kubelet/config.yaml", "/etc/containerd/conf.d", "/etc/with space"}},
		"/":     {true, []string{"/host/var/lib/kubelet/config.yaml", "/host/etc/containerd/conf.d", "/host/etc/with space"}},
		"/hos":  {false, nil},
	} {
		if isMount, below := mountsAt(mountinfo, root); isMount != want.isMount || !slices.Equal(below, want.below) {
			t.Errorf("mountsAt(%s) = %v, %q; want %v, %q", root, isMount, below, want.isMount, want.below)
		}
	}
	if v := newHostView(filepath.Join(t.TempDir(), "none")); v.visible("/etc/containerd/config.toml") {
		t.Errorf("a host root that does not exist shows %s", "/etc/containerd/config.toml")
	}
	v := hostView{root: "/host", mounts: []string{"/var/lib/kubelet/config.yaml", "/etc/containerd/conf.d"}}
	for p, visible := range map[string]bool{
		"/var/lib/kubelet/config.yaml": true, "/var/lib/kubelet/kubeadm-flags.env": false, "/etc/containerd/conf.d/nri.toml": true,
		"/etc/containerd/config.toml": false, "/proc": false,
	} {
		if v.visible(p) != visible {
			t.Errorf("visible(%s) = %v, want %v", p, !visible, visible)
		}
	}
}

// TestSystemdParsing reads the kubelet's command line from unit files as
// systemd makes it.
func TestSplitQuotedAndEnvFile(t *testing.T) {
	if got, want := splitQuoted(`/usr/bin/kubelet "a b" $X c='d e'`), []string{"/usr/bin/kubelet", "a b", "$X", "c=d e"}; !slices.Equal(got, want) {
		t.Errorf("splitQuoted = %q, want %q", got, want)
	}
	env := envFile([]byte("# comment\nKUBELET_EXTRA_ARGS=\"--config-dir=/d --v=2\"\nexport X='y'\n"))
	if env["KUBELET_EXTRA_ARGS"] != "--config-dir=/d --v=2" || env["X"] != "y" {
		t.Errorf("envFile = %q", env)
	}
}

// TestMergePatch merges as the kubelet merges a drop-in.
func TestMergePatch(t *testing.T) {
	got := mergePatch(map[string]any{"a": map[string]any{"x": 1.0, "y": 2.0}, "l": []any{1.0, 2.0}, "d": "gone"},
		map[string]any{"a": map[string]any{"y": 3.0}, "l": []any{9.0}, "d": nil})
	want := map[string]any{"a": map[string]any{"x": 1.0, "y": 3.0}, "l": []any{9.0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mergePatch = %v, want %v", got, want)
	}
}

func TestCPUMilli(t *testing.T) {
	for q, want := range map[string]int64{"": 0, "500m": 500, "1": 1000, "1.5": 1500, "2500m": 2500, "x": 0} {
		if got := cpuMilli(q); got != want {
			t.Errorf("cpuMilli(%q) = %d, want %d", q, got, want)
		}
	}
}

// TestDoctorTopologyOwner: with the export on, doctor reads this node's
// NodeResourceTopology object from the API server (as $KUBECONFIG says)
// and tells whose it is: another tool's is a warning with the fix.
func TestDoctorTopologyOwner(t *testing.T) {
	const path = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/worker-1"
	object := func(managedBy string) string {
		return `{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","metadata":{"name":"worker-1","labels":{"app.kubernetes.io/managed-by":"` + managedBy + `"}},"zones":[]}`
	}
	status := func(code int, reason string) string {
		return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":"noderesourcetopologies \"worker-1\" %s"}`, reason, code, reason)
	}
	for _, tc := range []struct {
		name string
		code int
		body string
		want string
	}{
		{"another tool's", http.StatusOK, object("node-feature-discovery"),
			"warn  topology    NodeResourceTopology worker-1 belongs to node-feature-discovery: the plugin leaves it alone and exports nothing"},
		{"the plugin's", http.StatusOK, object("nri-cpumanager"), "ok    topology    NodeResourceTopology worker-1 is the plugin's (nri-cpumanager)"},
		{"none yet", http.StatusNotFound, status(http.StatusNotFound, "NotFound"), "info  topology    no NodeResourceTopology worker-1 yet"},
		{"forbidden", http.StatusForbidden, status(http.StatusForbidden, "Forbidden"), "warn  topology    reading NodeResourceTopology worker-1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != path {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.code)
				io.WriteString(w, tc.body)
			}))
			defer api.Close()
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("KUBECONFIG", kubeconfig)
			t.Setenv("NODE_NAME", "worker-1")
			_, out := newDoctorNode(t).run("kubernetesAPI: true\nnodeResourceTopology: {enabled: true}\n")
			wantLines(t, out, tc.want)
		})
	}
}

// TestHintsNameWhatExists: every kustomize component and chart value the
// command's messages name (their fixes) is there: components/NAME under
// deploy/components, doctor.* and the chart's other values in its
// values.yaml.
func TestHintsNameWhatExists(t *testing.T) {
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "nri-cpumanager", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart map[string]any
	if err := yaml.Unmarshal(values, &chart); err != nil {
		t.Fatal(err)
	}
	hasValue := func(path string) bool {
		var cur any = chart
		for _, k := range strings.Split(path, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			if cur, ok = m[k]; !ok {
				return false
			}
		}
		return true
	}
	components := regexp.MustCompile(`components/([a-z0-9-]+)`)
	chartValues := regexp.MustCompile(`\b(doctor\.[a-zA-Z]+|installNodeResourceTopologyCRD|config\.nodeResourceTopology\.enabled)\b`)
	found := map[string]int{}
	for _, src := range sources {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range components.FindAllStringSubmatch(string(data), -1) {
			found["components"]++
			if !dirExists(filepath.Join("..", "..", "deploy", "components", m[1])) {
				t.Errorf("%s names components/%s, which deploy/components does not have", src, m[1])
			}
		}
		for _, m := range chartValues.FindAllStringSubmatch(string(data), -1) {
			found["values"]++
			if !hasValue(m[1]) {
				t.Errorf("%s names the chart's value %s, which its values.yaml does not have", src, m[1])
			}
		}
	}
	if found["components"] < 3 || found["values"] < 3 {
		t.Fatalf("found %v names in the command's messages: the patterns are stale", found)
	}
}

// TestDoctorHidesEachRancherFile runs the node checks as the plugin's pod
// sees a k3s or RKE2 node installed with components/k3s or
// components/rke2 (their files mounted under the host root, no
// process), each of those files hidden in turn: what is not seen is
// unknown, never ok, and /etc/containerd's files (a kubeadm layout's)
// never stand in for theirs.
func TestDoctorHidesEachRancherFile(t *testing.T) {
	for _, r := range []distribution{k3s, rke2} {
		data := r.dataDir
		mounts := []string{r.config, r.config + ".d", data + "/agent/etc/kubelet.conf.d", data + "/agent/etc/containerd/config.toml"}
		for _, tc := range []struct {
			hide   string
			want   []string
			forbid []string
		}{
			{"", []string{
				"info  containerd  " + data + "/agent/etc/containerd/config.toml (" + r.name + "'s; version 3)",
				"FAIL  NRI         disabled (disable = true, from " + data + "/agent/etc/containerd/config.toml)",
				"warn  kubelet     unknown: cpuManagerPolicy is none in what doctor read (" + r.config + ", " + r.config + ".d/10-extra.yaml, " + data +
					"/agent/etc/kubelet.conf.d/00-defaults.conf, flag --reserved-cpus=0 (" + r.name + "'s kubelet-arg)), but not seen: the kubelet's command line (no " + r.name + " process visible here",
			}, []string{"ok    kubelet     cpuManagerPolicy", "  NRI         enabled", "/var/lib/kubelet/config.yaml", "/etc/containerd/conf.d"}},
			{r.config, []string{
				"warn  kubelet     unknown: cpuManagerPolicy is none in what doctor read (" + r.config + ".d/10-extra.yaml, " + data + "/agent/etc/kubelet.conf.d/00-defaults.conf), but not seen: " + r.config + ";",
			}, []string{"ok    kubelet     cpuManagerPolicy"}},
			{r.config + ".d", []string{
				"but not seen: " + r.config + ".d;",
				"on " + r.name + " the DaemonSet mounts " + r.config + " and " + r.config + ".d, " + data + "/agent/etc/kubelet.conf.d with the chart's doctor.distribution: " +
					strings.ToLower(r.name) + " (kustomize: components/" + strings.ToLower(r.name) + ")",
			}, []string{"ok    kubelet     cpuManagerPolicy"}},
			{data + "/agent/etc/kubelet.conf.d", []string{
				"but not seen: drop-ins of " + data + "/agent/etc/kubelet.conf.d (not visible here);",
			}, []string{"ok    kubelet     cpuManagerPolicy"}},
			{data + "/agent/etc/containerd/config.toml", []string{
				"warn  containerd  unknown: containerd's configuration " + data + "/agent/etc/containerd/config.toml is not visible here",
				"warn  NRI         unknown: whether NRI is enabled",
			}, []string{"/etc/containerd/conf.d", "  NRI         enabled", "FAIL  NRI"}},
		} {
			t.Run(r.name+": "+cmp.Or(tc.hide, "nothing hidden"), func(t *testing.T) {
				n := newBareDoctorNode(t)
				// kubeadm's files too: not what this node's containerd and kubelet read.
				n.healthyContainerd("/etc/containerd/config.toml")
				n.host("/var/lib/kubelet/config.yaml", kubeletNone)
				n.host(r.config, "write-kubeconfig-mode: \"0644\"\nkubelet-arg:\n- reserved-cpus=0\n")
				n.host(r.config+".d/10-extra.yaml", "node-label+:\n- pool=a\n")
				n.host(data+"/agent/etc/kubelet.conf.d/00-defaults.conf", kubeletNone)
				n.host(data+"/agent/etc/containerd/config.toml", "version = 3\n[plugins.'io.containerd.nri.v1.nri']\n  disable = true\n  socket_path = '"+n.ns+"'\n"+systemdRunc)
				visible := slices.DeleteFunc(slices.Clone(mounts), func(m string) bool { return m == tc.hide })
				cfg := config.Default()
				cfg.SysfsRoot, cfg.CgroupfsRoot, cfg.NRISocket = n.sys, n.cgroups, n.ns
				var out bytes.Buffer
				d := &doctorRun{hostRoot: n.root, cfg: cfg, out: &out, view: hostView{root: n.root, mounts: visible},
					runtime: runtimeInfo{"containerd", "v2.1.5-k3s1"}} // from the plugin's metrics, not connected
				d.checkContainerd()
				d.checkKubelet()
				wantLines(t, out.String(), tc.want...)
				for _, f := range tc.forbid {
					if strings.Contains(out.String(), f) {
						t.Errorf("doctor's output has %q:\n%s", f, out.String())
					}
				}
			})
		}
	}
}
