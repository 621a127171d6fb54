package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
)

// doctorNode is a fake node for doctor: a host root with containerd's and
// the kubelet's files, a sysfs, a cgroup tree and a listening NRI socket.
type doctorNode struct {
	t                      *testing.T
	root, sys, cgroups, ns string
}

func newDoctorNode(t *testing.T) *doctorNode {
	t.Helper()
	n := &doctorNode{t: t, root: t.TempDir(), sys: t.TempDir(), cgroups: t.TempDir()}
	if err := fakesysfs.Generate(n.sys, fakesysfs.KEP5554UseCases()); err != nil {
		t.Fatal(err)
	}
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

// run runs doctor on the node with the plugin's config file (YAML, "" for
// none) and extra arguments, and returns its exit status and output.
func (n *doctorNode) run(pluginConfig string, args ...string) (int, string) {
	n.t.Helper()
	all := []string{"doctor", "--host-root", n.root, "--sysfs-root", n.sys, "--cgroupfs-root", n.cgroups, "--nri-socket", n.ns}
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
	status, out := n.run("")
	if status != exitOK {
		t.Errorf("doctor on a healthy node: status %d\n%s", status, out)
	}
	wantLines(t, out,
		"imports /etc/containerd/conf.d/nri.toml",
		"ok    NRI         enabled (disable = false, from /etc/containerd/conf.d/nri.toml)",
		"ok    NRI         socket "+n.ns+" exists",
		"ok    validator   containerd refuses OCI hook, namespace, sysctl and seccomp adjustments by any plugin (/etc/containerd/conf.d/nri.toml)",
		"ok    fail-closed on: containerd refuses new containers while cpumanager is away",
		"ok    kubelet     cpuManagerPolicy: none (/var/lib/kubelet/config.yaml)",
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
	status, out := n.run("")
	if status != exitFailure {
		t.Errorf("status %d, want 1", status)
	}
	wantLines(t, out,
		"/etc/containerd/config.toml (version 3) imports nothing",
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
	n.host("/etc/kubernetes/kubelet-config.yaml", `kind: KubeletConfiguration
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
		"FAIL  kubelet     cpuManagerPolicy: static (/etc/kubernetes/kubelet-config.yaml)",
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
		"ok    kubelet     cpuManagerPolicy: none (standard input)",
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
	wantLines(t, out, "FAIL  kubelet     cpuManagerPolicy: static ("+srv.URL+"/configz)", "ok    kubelet     reserves CPUs 0, as the plugin does")
	if status != exitFailure {
		t.Errorf("status %d, want 1", status)
	}
	_, out = n.run("", "--kubelet-config", srv.URL+"/nothing")
	wantLines(t, out, "FAIL  kubelet     configuration not found: "+srv.URL+"/nothing: 404 Not Found")
}

// TestDoctorOnTheNodeFindsTheKubeletsFlags reads the kubelet's --config
// and deprecated flags from its command line under the host's /proc.
func TestDoctorOnTheNodeFindsTheKubeletsFlags(t *testing.T) {
	n := newDoctorNode(t)
	n.host("/srv/kubelet.yaml", kubeletNone)
	n.host("/proc/1/cmdline", "/sbin/init\x00")
	n.host("/proc/42/cmdline", "/usr/bin/kubelet\x00--config=/srv/kubelet.yaml\x00--reserved-cpus\x000-1\x00")
	_, out := n.run("")
	wantLines(t, out, "FAIL  kubelet     reserves CPUs 0-1 (reservedSystemCPUs), the plugin reserves CPUs 0", "(/srv/kubelet.yaml, flag --reserved-cpus)")
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
	wantLines(t, out, "ok    containerd  containerd v2.4.2 (from its binary /usr/bin/containerd)")
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

// TestDoctorWithoutTheHostsFiles: in the plugin's pod without the doctor's
// mounts, containerd's files are not visible: doctor says so rather than
// concluding containerd runs with its defaults, and checks the rest; the
// kubelet's configuration not visible is a failure: doctor cannot tell
// whether the kubelet's own static CPU manager runs beside the plugin.
func TestDoctorWithoutTheHostsFiles(t *testing.T) {
	n := newDoctorNode(t)
	status, out := n.run("")
	wantLines(t, out,
		"warn  containerd  /etc/containerd is not visible under host root "+n.root,
		"ok    NRI         socket "+n.ns+" exists",
		"ok    cgroups     cgroup v2 (unified)",
		"FAIL  kubelet     configuration not found: none of /var/lib/kubelet/config.yaml",
		"fix: mount it (the chart's doctor.enabled with doctor.kubeletConfig, deploy/components/doctor)")
	if strings.Contains(out, "runs with its defaults") || status != exitFailure {
		t.Errorf("status %d, want 1:\n%s", status, out)
	}
}

// TestDoctorReadsRancherKubeletArgs: on k3s and RKE2 the kubelet's
// settings are kubelet-arg entries of /etc/rancher/{k3s,rke2}/config.yaml;
// doctor reads them as the kubelet's flags.
func TestDoctorReadsRancherKubeletArgs(t *testing.T) {
	for _, tc := range []struct {
		path, doc string
		want      []string
		status    int
	}{
		{"/etc/rancher/k3s/config.yaml", "write-kubeconfig-mode: \"0644\"\nkubelet-arg:\n- cpu-manager-policy=static\n- reserved-cpus=0-1\n",
			[]string{"FAIL  kubelet     cpuManagerPolicy: static (/etc/rancher/k3s/config.yaml)", "FAIL  kubelet     reserves CPUs 0-1 (reservedSystemCPUs), the plugin reserves CPUs 0"}, exitFailure},
		{"/etc/rancher/rke2/config.yaml", "kubelet-arg: [\"--reserved-cpus=0\", \"cgroup-driver=systemd\"]\n",
			[]string{"ok    kubelet     cpuManagerPolicy: none (/etc/rancher/rke2/config.yaml)", "ok    kubelet     reserves CPUs 0, as the plugin does"}, exitOK},
	} {
		n := newDoctorNode(t)
		n.host(tc.path, tc.doc)
		status, out := n.run("")
		wantLines(t, out, tc.want...)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d:\n%s", tc.path, status, tc.status, out)
		}
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
