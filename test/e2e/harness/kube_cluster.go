package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// Tools are the Kubernetes binaries (see InstallKubernetes). Required.
	Tools *KubernetesTools
	// Containerd is the running containerd the kubelet uses. Required.
	Containerd *Containerd
	// NodeName is the node's name. Default "nri-e2e".
	NodeName string
	// TempRoot is where the cluster's directory is created. Default "/tmp".
	TempRoot string
	// StartTimeout bounds StartCluster. Default 3 minutes.
	StartTimeout time.Duration
	// KubeletVerbosity is the kubelet's --v. Default 2.
	KubeletVerbosity int
	// CPUManager is the kubelet's CPU manager configuration. Default
	// cpuManagerPolicy none: the plugin's node.
	CPUManager KubeletCPUManager
	// TopologyManagerPolicy is the kubelet's topologyManagerPolicy: with
	// cpuManagerPolicy none, the device manager's hints alone are merged
	// (devices on one NUMA node with single-numa-node). Default the
	// kubelet's, none.
	TopologyManagerPolicy string
	// Logf receives progress messages; nil discards them.
	Logf Logf
}

// Cluster is a throwaway single-node Kubernetes: etcd, kube-apiserver,
// kube-controller-manager (the controllers DaemonSets, Jobs and service
// accounts need), kube-scheduler (a DaemonSet's pods are bound by it) and a kubelet
// (cpuManagerPolicy none) on the harness's containerd, with containerd's
// cgroup driver: with cgroupfs under a cgroup root of its own, with systemd
// (a kubeadm node) in kubepods.slice. Everything but the cgroups and the
// container log links lives in Dir; Close removes it all and puts back the
// kernel settings the kubelet changed.
//
// There is no CNI (pods use the
// host network; the node stays NotReady), and no node lifecycle controller,
// so nothing taints or evicts pods because of that. The API server and the
// kubelet listen on loopback only: `kubectl exec` and `logs` do not reach
// the node; read inside containers with CRI (CRI.Attach).
type Cluster struct {
	// Dir holds the cluster's configuration, state and logs.
	Dir string
	// NodeName is the node's name.
	NodeName string
	// Kubeconfig is an administrator's kubeconfig.
	Kubeconfig string
	// CgroupRoot is the kubelet's cgroup root (cgroupfs path), under which
	// it puts kubepods; "/" with the systemd driver.
	CgroupRoot string
	// CgroupDriver is the kubelet's (and containerd's) cgroup driver.
	CgroupDriver CgroupDriver
	// KubeletRootDir is the kubelet's --root-dir; it keeps
	// cpu_manager_state there.
	KubeletRootDir string

	tools      *KubernetesTools
	containerd *Containerd
	logf       Logf
	procs      []*namedProcess // in start order
	sysctls    map[string]string
	cgroupDirs []string // the cgroup root in every hierarchy
	madeDirs   []string // of kubeletHostDirs, those that did not exist
	closed     bool
	// kubeletHealthz is the kubelet's healthz URL (loopback).
	kubeletHealthz string
	// server is the API server's URL, caFile the CA it is signed by.
	server, caFile string
	// admin is a client of the API server as the administrator (GetJSON).
	admin *http.Client

	kubeletVerbosity      int
	topologyManagerPolicy string
	cpuManager            KubeletCPUManager
	// kubeletConfigFile is the kubelet's --config, written from ports.
	kubeletConfigFile string
	ports             clusterPorts
}

// KubeletCPUManager is the kubelet's CPU manager configuration.
type KubeletCPUManager struct {
	// Policy is cpuManagerPolicy: "none" (or "") on the plugin's node, or
	// "static".
	Policy string
	// ReservedSystemCPUs is reservedSystemCPUs, the CPUs the static
	// policy keeps out of exclusive use ("" none).
	ReservedSystemCPUs string
}

// policy returns cpuManagerPolicy's value.
func (m KubeletCPUManager) policy() string {
	if m.Policy == "" {
		return "none"
	}
	return m.Policy
}

type namedProcess struct {
	name string
	opts ProcessOptions // what it was started with, to start it again
	*Process
}

// kubeletSysctls are the kernel settings the kubelet sets at start
// (protectKernelDefaults false); Close restores them.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// kubeletControllers are the cgroup v2 controllers the kubelet requires in
// its cgroup root.
var kubeletControllers = []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids"}

// legacyContainerLogsDir is where the kubelet links every container's log,
// whatever its podLogsDir; Close removes the cluster's links.
const legacyContainerLogsDir = "/var/log/containers"

// kubeletDevicePluginSocket is where the kubelet serves device plugins,
// whatever its --root-dir.
const kubeletDevicePluginSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// kubeletHostDirs are the directories the kubelet creates whatever its
// configuration, parents first; Close removes those it created.
var kubeletHostDirs = []string{"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", legacyContainerLogsDir}

// kubeletHostFiles are the files the kubelet leaves in a directory of
// kubeletHostDirs (beside its device plugin socket): the device manager's
// checkpoint, once a device plugin registered. Close removes them from a
// directory it removes.
var kubeletHostFiles = map[string][]string{
	"/var/lib/kubelet/device-plugins": {"kubelet_internal_checkpoint"},
}

// StartCluster starts a single-node cluster and waits until the node is
// registered and the default service account exists. On failure it
// removes what it made; the error quotes the logs.
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.Tools == nil || opts.Containerd == nil {
		return nil, errors.New("start cluster: Tools and Containerd are required")
	}
	opts.Logf = opts.Logf.orDiscard()
	if opts.NodeName == "" {
		opts.NodeName = "nri-e2e"
	}
	if opts.TempRoot == "" {
		opts.TempRoot = "/tmp"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(opts.TempRoot, "kube-")
	if err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	if opts.KubeletVerbosity == 0 {
		opts.KubeletVerbosity = 2
	}
	c := &Cluster{
		Dir:              dir,
		NodeName:         opts.NodeName,
		Kubeconfig:       filepath.Join(dir, "admin.kubeconfig"),
		CgroupRoot:       "/" + filepath.Base(dir),
		CgroupDriver:     opts.Containerd.CgroupDriver(),
		KubeletRootDir:   filepath.Join(dir, "kubelet"),
		tools:            opts.Tools,
		containerd:       opts.Containerd,
		logf:             opts.Logf,
		kubeletVerbosity: opts.KubeletVerbosity,

		topologyManagerPolicy: opts.TopologyManagerPolicy,
		cpuManager:            opts.CPUManager,
		kubeletConfigFile:     filepath.Join(dir, "kubelet.yaml"),
	}
	if c.CgroupDriver == SystemdDriver {
		// systemd's kubepods.slice, as on a kubeadm node: the kubelet's
		// slices cannot live under a cgroupfs directory of the test's.
		c.CgroupRoot = "/"
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("start cluster: %w\n%s", err, c.LogTails(30))
			if cerr := c.Close(context.Background()); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	start := time.Now()
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	c.logf("Kubernetes %s running in %s (node %s, cgroup root %s), started in %v",
		opts.Tools.Version, dir, c.NodeName, c.CgroupRoot, time.Since(start).Round(time.Millisecond))
	return c, nil
}

// clusterPorts are the loopback ports of one cluster.
type clusterPorts struct {
	etcdClient, etcdPeer, apiServer, controllerManager, scheduler, kubelet, kubeletHealthz int
}

func (c *Cluster) start(ctx context.Context) error {
	hostIP, err := hostIP()
	if err != nil {
		return err
	}
	p, err := newPKI(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return err
	}
	apiCert, apiKey, err := p.issue(certIdentity{
		file:     "apiserver",
		dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1), hostIP},
	})
	if err != nil {
		return err
	}
	saKey, saPub, err := p.serviceAccountKey()
	if err != nil {
		return err
	}
	free, err := freePorts(7)
	if err != nil {
		return err
	}
	ports := clusterPorts{free[0], free[1], free[2], free[3], free[4], free[5], free[6]}
	c.ports = ports
	server := "https://127.0.0.1:" + strconv.Itoa(ports.apiServer)
	c.server, c.caFile = server, p.caCertPath()
	kubeconfigs := map[string]certIdentity{
		c.Kubeconfig: {file: "admin", commonName: "e2e-admin", organizations: []string{"system:masters"}},
		filepath.Join(c.Dir, "controller-manager.kubeconfig"): {file: "controller-manager", commonName: "system:kube-controller-manager"},
		filepath.Join(c.Dir, "scheduler.kubeconfig"):          {file: "scheduler", commonName: "system:kube-scheduler"},
		filepath.Join(c.Dir, "kubelet.kubeconfig"):            {file: "kubelet", commonName: "system:node:" + c.NodeName, organizations: []string{"system:nodes"}},
	}
	for path, id := range kubeconfigs {
		cert, key, err := p.issue(id)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(kubeconfig(server, p.caCertPath(), cert, key)), 0o600); err != nil {
			return fmt.Errorf("write kubeconfig: %w", err)
		}
	}

	// etcd.
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports.etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports.etcdPeer)
	if err := c.run("etcd", c.tools.Etcd,
		"--name=e2e", "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL, "--unsafe-no-fsync", "--log-level=warn",
	); err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, "etcd", etcdURL+"/health", nil); err != nil {
		return err
	}

	// kube-apiserver: loopback only, no anonymous access; RBAC as a real
	// cluster has it (the plugin's service account gets only what deploy/
	// grants it; the administrator is in system:masters), and the Node
	// authorizer for the kubelet.
	if err := c.run("kube-apiserver", c.tools.APIServer,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports.apiServer),
		"--advertise-address="+hostIP.String(),
		"--tls-cert-file="+apiCert, "--tls-private-key-file="+apiKey,
		"--client-ca-file="+p.caCertPath(),
		// The controller manager and the scheduler read these to
		// authenticate requests to their own servers.
		"--requestheader-client-ca-file="+p.caCertPath(), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--anonymous-auth=false", "--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--cert-dir="+filepath.Join(c.Dir, "apiserver"),
		"--profiling=false",
	); err != nil {
		return err
	}
	adminCert, adminKey := filepath.Join(p.dir, "admin.crt"), filepath.Join(p.dir, "admin.key")
	client, err := tlsClient(p.caCertPath(), adminCert, adminKey)
	if err != nil {
		return err
	}
	if c.admin, err = tlsClient(p.caCertPath(), adminCert, adminKey); err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, "kube-apiserver", server+"/readyz", client); err != nil {
		return err
	}

	// kube-controller-manager: only the controllers the tests need. Without
	// the node lifecycle controller, the NotReady node (no CNI) is neither
	// tainted nor are its pods evicted.
	cmKubeconfig := filepath.Join(c.Dir, "controller-manager.kubeconfig")
	if err := c.run("kube-controller-manager", c.tools.ControllerManager,
		"--kubeconfig="+cmKubeconfig,
		"--authentication-kubeconfig="+cmKubeconfig, "--authorization-kubeconfig="+cmKubeconfig,
		"--controllers=daemonset,job,serviceaccount,serviceaccount-token,garbagecollector,namespace,root-ca-cert-publisher",
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports.controllerManager),
		"--cert-dir="+filepath.Join(c.Dir, "controller-manager"),
		"--service-account-private-key-file="+saKey, "--root-ca-file="+p.caCertPath(),
		// Each controller as its own service account, whose bootstrap role
		// RBAC grants (the controller manager's own role cannot create
		// pods).
		"--use-service-account-credentials=true",
	); err != nil {
		return err
	}

	schedKubeconfig := filepath.Join(c.Dir, "scheduler.kubeconfig")
	if err := c.run("kube-scheduler", c.tools.Scheduler,
		"--kubeconfig="+schedKubeconfig,
		"--authentication-kubeconfig="+schedKubeconfig, "--authorization-kubeconfig="+schedKubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports.scheduler),
		"--cert-dir="+filepath.Join(c.Dir, "scheduler"),
	); err != nil {
		return err
	}

	// The kubelet.
	if err := c.prepareKubeletHost(); err != nil {
		return err
	}
	config := c.kubeletConfigFile
	if err := c.writeKubeletConfig(); err != nil {
		return err
	}
	c.kubeletHealthz = "http://127.0.0.1:" + strconv.Itoa(ports.kubeletHealthz) + "/healthz"
	if err := c.run("kubelet", c.tools.Kubelet,
		"--config="+config,
		"--kubeconfig="+filepath.Join(c.Dir, "kubelet.kubeconfig"),
		"--root-dir="+c.KubeletRootDir, "--cert-dir="+filepath.Join(c.KubeletRootDir, "pki"),
		"--hostname-override="+c.NodeName,
		"--v="+strconv.Itoa(c.kubeletVerbosity),
	); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the node "+c.NodeName+" to register", "kubelet", "get", "node", c.NodeName); err != nil {
		return err
	}
	return c.waitFor(ctx, "the default service account", "kube-controller-manager", "get", "serviceaccount", "default")
}

// KubeletConfigFile is the kubelet's --config.
func (c *Cluster) KubeletConfigFile() string { return c.kubeletConfigFile }

// writeKubeletConfig writes the kubelet's configuration file.
func (c *Cluster) writeKubeletConfig() error {
	if err := os.WriteFile(c.kubeletConfigFile, []byte(c.kubeletConfig(c.ports, c.caFile)), 0o644); err != nil {
		return fmt.Errorf("write kubelet configuration: %w", err)
	}
	return nil
}

// kubeletConfig returns the KubeletConfiguration: the CPU manager's
// (cpuManagerPolicy none, the plugin's job, by default) and topology
// manager's policies, containerd's cgroup driver (cgroupfs with the
// cluster's own cgroup root, or systemd with the default root as kubeadm
// sets it), cgroup v1 allowed only on a v1 machine (the default,
// failCgroupV1: true, on v2), a sync every 5 s and watched ConfigMaps (a
// ConfigMap edit reaches a mounted volume within seconds), no image
// garbage collection and no eviction (the test images cannot be pulled
// again), loopback servers with anonymous access.
func (c *Cluster) kubeletConfig(ports clusterPorts, caFile string) string {
	var cgroups strings.Builder
	fmt.Fprintf(&cgroups, "cgroupDriver: %s\n", c.CgroupDriver)
	if c.CgroupDriver != SystemdDriver {
		fmt.Fprintf(&cgroups, "cgroupRoot: %q\n", c.CgroupRoot)
	}
	if layout, err := machineCgroups(); err == nil && layout.version() == 1 {
		cgroups.WriteString("failCgroupV1: false\n")
	}
	if c.topologyManagerPolicy != "" {
		fmt.Fprintf(&cgroups, "topologyManagerPolicy: %s\n", c.topologyManagerPolicy)
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: %q
%scgroupsPerQOS: true
failSwapOn: false
cpuManagerPolicy: %s
reservedSystemCPUs: %q
resolvConf: %q
podLogsDir: %q
volumePluginDir: %q
syncFrequency: 5s
configMapAndSecretChangeDetectionStrategy: Watch
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", nodefs.inodesFree: "1%%", imagefs.available: "1%%"}
serializeImagePulls: false
`, ports.kubelet, ports.kubeletHealthz, caFile, "unix://"+c.containerd.Address(), cgroups.String(),
		c.cpuManager.policy(), c.cpuManager.ReservedSystemCPUs, filepath.Join(c.Dir, "resolv.conf"), filepath.Join(c.Dir, "pods"), filepath.Join(c.Dir, "volume-plugins"))
}

// prepareKubeletHost records the kernel settings the kubelet will change,
// creates its cgroup root in every hierarchy with the cgroupfs driver (a
// v1 cpuset one with all the root's CPUs and memory nodes; on v2 with the
// controllers the kubelet needs enabled for it) and the files it needs.
func (c *Cluster) prepareKubeletHost() error {
	if _, err := os.Stat(kubeletDevicePluginSocket); err == nil {
		return fmt.Errorf("%s exists: another kubelet runs on this machine, and a second one would take its device plugin socket", kubeletDevicePluginSocket)
	}
	for _, d := range kubeletHostDirs {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			c.madeDirs = append(c.madeDirs, d)
		}
	}
	c.sysctls = map[string]string{}
	for _, key := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil {
			continue // not on this kernel: the kubelet skips it too
		}
		c.sysctls[key] = strings.TrimSpace(string(v))
	}
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if c.CgroupDriver == SystemdDriver {
			break // systemd makes the kubelet's slices
		}
		if m.fsType != "cgroup" && m.fsType != "cgroup2" {
			continue
		}
		if m.fsType == "cgroup2" {
			// A new cgroup has only the controllers its parent enables.
			if err := EnableControllers(m.point, kubeletControllers...); err != nil {
				return err
			}
		}
		dir := filepath.Join(m.point, c.CgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("create the kubelet's cgroup root: %w", err)
		}
		c.cgroupDirs = append(c.cgroupDirs, dir)
		if m.fsType == "cgroup" && slices.Contains(m.options, "cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(m.point, f))
				if err != nil {
					return fmt.Errorf("read the root cpuset: %w", err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("set up the kubelet's cgroup root: %w", err)
				}
			}
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "resolv.conf"), nil, 0o644); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(c.Dir, "pods"), 0o755)
}

// run starts a component with its log in Dir.
func (c *Cluster) run(name, path string, args ...string) error {
	opts := ProcessOptions{Path: path, Args: args, LogPath: filepath.Join(c.Dir, name+".log"), Dir: c.Dir}
	p, err := StartProcess(opts)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, &namedProcess{name: name, opts: opts, Process: p})
	c.logf("%s running as pid %d", name, p.PID())
	return nil
}

// RestartKubelet stops the kubelet (SIGTERM, as `systemctl restart
// kubelet` does; SIGKILL after 15 s), starts it again with the same
// configuration and state, and waits until its healthz answers. The pods
// keep running; the restarted kubelet finds them in the runtime. Its log
// goes on in the same file.
func (c *Cluster) RestartKubelet(ctx context.Context) error {
	if err := c.restartKubelet(ctx, nil); err != nil {
		return fmt.Errorf("restart the kubelet: %w", err)
	}
	return nil
}

// SwitchKubeletCPUManager is an operator's move of the node between CPU
// managers (docs/install.md): it stops the kubelet as RestartKubelet
// does, writes its configuration with cm, calls between with the kubelet
// stopped (to move or remove its cpu_manager_state, KubeletCheckpoint),
// starts it and waits until its healthz answers.
func (c *Cluster) SwitchKubeletCPUManager(ctx context.Context, cm KubeletCPUManager, between func() error) error {
	err := c.restartKubelet(ctx, func() error {
		c.cpuManager = cm
		if err := c.writeKubeletConfig(); err != nil {
			return err
		}
		if between != nil {
			return between()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("switch the kubelet to cpuManagerPolicy %s: %w", cm.policy(), err)
	}
	return nil
}

// KubeletCheckpoint is the kubelet's CPU manager checkpoint,
// cpu_manager_state in its root directory.
func (c *Cluster) KubeletCheckpoint() string {
	return filepath.Join(c.KubeletRootDir, "cpu_manager_state")
}

// restartKubelet stops the kubelet, calls between (when not nil), starts
// it again and waits until its healthz answers.
func (c *Cluster) restartKubelet(ctx context.Context, between func() error) error {
	p := c.process("kubelet")
	if p == nil {
		return errors.New("the kubelet was never started")
	}
	if err := p.Stop(15 * time.Second); err != nil {
		return err
	}
	if between != nil {
		if err := between(); err != nil {
			return err
		}
	}
	started, err := StartProcess(p.opts)
	if err != nil {
		return err
	}
	p.Process = started
	c.logf("kubelet restarted as pid %d", started.PID())
	return c.waitHTTP(ctx, "kubelet", c.kubeletHealthz, nil)
}

// process returns the running component called name, or nil.
func (c *Cluster) process(name string) *namedProcess {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// waitHTTP waits until url answers 200, failing early when the component
// exits.
func (c *Cluster) waitHTTP(ctx context.Context, name, url string, client *http.Client) error {
	if client == nil {
		client = &http.Client{}
	}
	client.Timeout = 2 * time.Second
	var last string
	err := c.process(name).WaitUntil(ctx, func() (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s at %s (last answer: %s): %w", name, url, last, err)
	}
	return nil
}

// waitFor waits until `kubectl args…` succeeds, failing early when the
// component that should make it so exits.
func (c *Cluster) waitFor(ctx context.Context, what, component string, args ...string) error {
	var last error
	err := c.process(component).WaitUntil(ctx, func() (bool, error) {
		_, last = c.Kubectl(ctx, args...)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s (last: %v): %w", what, last, err)
	}
	return nil
}

// Kubectl runs kubectl as the administrator and returns its standard
// output; a failure quotes its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.KubectlStdin(ctx, "", args...)
}

// KubectlStdin is Kubectl with stdin as the command's standard input.
func (c *Cluster) KubectlStdin(ctx context.Context, stdin string, args ...string) (string, error) {
	return c.kubectl(ctx, c.Kubeconfig, stdin, args...)
}

// kubectl runs kubectl with kubeconfig and stdin and returns its standard
// output; a failure quotes its standard error.
func (c *Cluster) kubectl(ctx context.Context, kubeconfig, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.tools.Kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// WatchPod watches a pod of the default namespace: it reads the pod
// (GetJSON), then watches it from that version on, and sends the version
// read and each later one, until ctx ends, the pod is deleted or the API
// server ends the watch; the channel is closed then. A watch sees every
// status the kubelet writes, a state that lasts less than a poll's
// interval included; nothing written after WatchPod returns is missed.
func (c *Cluster) WatchPod(ctx context.Context, name string) (<-chan KubePod, error) {
	var first KubePod
	if err := c.GetJSON(ctx, "/api/v1/namespaces/default/pods/"+url.PathEscape(name), &first); err != nil {
		return nil, fmt.Errorf("watch pod %s: %w", name, err)
	}
	query := url.Values{"watch": {"1"}, "fieldSelector": {"metadata.name=" + name}, "resourceVersion": {first.Metadata.ResourceVersion}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.server+"/api/v1/namespaces/default/pods?"+query.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("watch pod %s: %w", name, err)
	}
	resp, err := c.admin.Do(req)
	if err != nil {
		return nil, fmt.Errorf("watch pod %s: %w", name, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("watch pod %s: %s: %s", name, resp.Status, strings.TrimSpace(string(body)))
	}
	versions := make(chan KubePod)
	go func() {
		defer close(versions)
		defer resp.Body.Close()
		send := func(p KubePod) bool {
			select {
			case versions <- p:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !send(first) {
			return
		}
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string  `json:"type"`
				Object KubePod `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil || (ev.Type != "ADDED" && ev.Type != "MODIFIED") || !send(ev.Object) {
				return
			}
		}
	}()
	return versions, nil
}

// KubectlWithToken runs kubectl as the bearer of token (a service
// account's, say) rather than the administrator, with stdin as its
// standard input.
func (c *Cluster) KubectlWithToken(ctx context.Context, token, stdin string, args ...string) (string, error) {
	path := filepath.Join(c.Dir, "token.kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority: %q}
users:
- name: bearer
  user: {token: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: bearer}
current-context: e2e
`, c.server, c.caFile, token)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	defer os.Remove(path)
	return c.kubectl(ctx, path, stdin, args...)
}

// GetJSON reads what the API server has at path (an object or a list:
// "/api/v1/namespaces/default/pods/NAME", with a query for a selector) as
// the administrator and decodes it into v: what `kubectl get -o json`
// prints, without a kubectl process, whose start costs seconds of an
// emulated guest's CPUs (more than ten under load, where a request costs
// a tenth of one).
func (c *Cluster) GetJSON(ctx context.Context, path string, v any) error {
	if c.admin == nil {
		return errors.New("get " + path + ": the cluster's API server was never started")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.server+path, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.admin.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("get %s: decode: %w", path, err)
	}
	return nil
}

// KubectlJSON runs kubectl with `-o json` appended and decodes its output
// into v.
func (c *Cluster) KubectlJSON(ctx context.Context, v any, args ...string) error {
	out, err := c.Kubectl(ctx, append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("kubectl %s: decode output: %w", strings.Join(args, " "), err)
	}
	return nil
}

// LogTails returns the last n lines of every component's log.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "--- %s (%s), last lines:\n%s\n", p.name, p.LogPath(), p.LogTail(n))
	}
	return b.String()
}

// ContainerLogTails returns the last n lines of the log of every container
// the kubelet ran in namespace, including those of deleted pods that are
// still on disk (for failure messages: kubectl logs cannot reach the node).
func (c *Cluster) ContainerLogTails(namespace string, n int) string {
	files, _ := filepath.Glob(filepath.Join(c.Dir, "pods", namespace+"_*", "*", "*.log"))
	if len(files) == 0 {
		return fmt.Sprintf("(no container log of namespace %s in %s)", namespace, filepath.Join(c.Dir, "pods"))
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "--- %s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "--- %s, last lines:\n%s\n", f, tail(string(data), n))
	}
	return b.String()
}

// Close deletes every workload through the API so that the kubelet stops
// the pods and unmounts their volumes, stops the components, removes the
// pod sandboxes that are left, the kubelet's cgroups, mounts, container log
// links and Dir, and puts back the kernel settings the kubelet changed. It
// carries on past errors and returns them all. Calls after the first do
// nothing.
func (c *Cluster) Close(ctx context.Context) error {
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	if c.running("kube-apiserver") && c.running("kubelet") {
		if err := c.deleteWorkloads(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].Stop(15 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", c.procs[i].name, err))
		}
	}
	if c.containerd.Running() {
		if err := removeAllPodSandboxes(ctx, c.containerd.Address()); err != nil {
			errs = append(errs, err)
		}
	}
	// Nothing mounts under c.Dir after this: the processes are stopped.
	unmountErr := unmountUnder(c.Dir)
	if unmountErr != nil {
		errs = append(errs, unmountErr)
	}
	if err := removeLogLinks(legacyContainerLogsDir, c.Dir); err != nil {
		errs = append(errs, err)
	}
	if c.process("kubelet") != nil {
		if err := os.Remove(kubeletDevicePluginSocket); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove the kubelet's device plugin socket: %w", err))
		}
	}
	for i := len(c.madeDirs) - 1; i >= 0; i-- {
		for _, name := range kubeletHostFiles[c.madeDirs[i]] {
			if err := os.Remove(filepath.Join(c.madeDirs[i], name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove the kubelet's %s: %w", name, err))
			}
		}
		// Only if empty (but for the kubelet's own files): something else
		// may have put files there since.
		if err := os.Remove(c.madeDirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s, which the kubelet created: %w", c.madeDirs[i], err))
		}
	}
	for _, dir := range c.cgroupDirs {
		if err := removeCgroupTree(dir); err != nil {
			errs = append(errs, err)
		}
	}
	for key, v := range c.sysctls {
		path := filepath.Join("/proc/sys", key)
		now, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(now)) == v {
			continue
		}
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s to %s: %w", key, v, err))
		}
	}
	// Never remove through a mount that is still there.
	if unmountErr == nil {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.Dir, err))
		}
	}
	return errors.Join(errs...)
}

// CheckGone returns an error naming whatever of the cluster is still on
// the machine: a component running, its cgroups, container log links,
// directories the kubelet created, kernel settings not put back, Dir. It is
// nil after a successful Close.
func (c *Cluster) CheckGone() error {
	var errs []error
	for _, p := range c.procs {
		if c.running(p.name) {
			errs = append(errs, fmt.Errorf("%s still running as pid %d", p.name, p.PID()))
		}
	}
	for _, d := range append(append([]string{c.Dir}, c.cgroupDirs...), c.madeDirs...) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s still exists (stat: %v)", d, err))
		}
	}
	if entries, err := os.ReadDir(legacyContainerLogsDir); err == nil {
		for _, e := range entries {
			if dest, err := os.Readlink(filepath.Join(legacyContainerLogsDir, e.Name())); err == nil && strings.HasPrefix(dest, c.Dir+"/") {
				errs = append(errs, fmt.Errorf("container log link %s still exists", e.Name()))
			}
		}
	}
	for key, v := range c.sysctls {
		now, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil || strings.TrimSpace(string(now)) != v {
			errs = append(errs, fmt.Errorf("%s is %q (%v), was %s before the kubelet started", key, strings.TrimSpace(string(now)), err, v))
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) running(name string) bool {
	p := c.process(name)
	if p == nil {
		return false
	}
	exited, _ := p.Exited()
	return !exited
}

// deleteWorkloads deletes every DaemonSet and pod and waits (up to two
// minutes) until the kubelet has stopped them all.
func (c *Cluster) deleteWorkloads(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var errs []error
	if _, err := c.Kubectl(ctx, "delete", "daemonsets", "--all", "--all-namespaces", "--wait=false"); err != nil {
		errs = append(errs, err)
	}
	// Pods of a DaemonSet being deleted may be made again for a moment:
	// delete again until none is left.
	var left string
	for {
		if _, err := c.Kubectl(ctx, "delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--wait=false"); err != nil {
			left = err.Error()
		} else {
			out, err := c.Kubectl(ctx, "get", "pods", "--all-namespaces", "-o", "name")
			left = strings.TrimSpace(out)
			if err == nil && left == "" {
				return errors.Join(errs...)
			}
		}
		select {
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("delete the cluster's pods (left: %s): %w", left, ctx.Err()))
			return errors.Join(errs...)
		case <-time.After(time.Second):
		}
	}
}

// removeAllPodSandboxes stops and removes every pod sandbox of the
// containerd at address (the kubelet's, once it is stopped).
func removeAllPodSandboxes(ctx context.Context, address string) error {
	cri, err := DialCRI(address, nil)
	if err != nil {
		return err
	}
	defer cri.Close()
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	resp, err := cri.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, s := range resp.GetItems() {
		if _, err := cri.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.GetId()}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("stop pod %s: %w", s.GetMetadata().GetName(), err))
			continue
		}
		if _, err := cri.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.GetId()}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove pod %s: %w", s.GetMetadata().GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// removeLogLinks removes the symbolic links in dir that point into target.
func removeLogLinks(dir, target string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list container log links: %w", err)
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		dest, err := os.Readlink(path)
		if err != nil || !strings.HasPrefix(dest, target+"/") {
			continue
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, fmt.Errorf("remove container log link: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroupTree removes a cgroup directory and every cgroup below it,
// deepest first. A cgroup that still has processes cannot be removed.
func removeCgroupTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list cgroups under %s: %w", root, err)
	}
	slices.Reverse(dirs) // children after parents in walk order
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// kubeconfig returns a kubeconfig for server with a client certificate.
func kubeconfig(server, ca, cert, key string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority: %q}
users:
- name: e2e
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
`, server, ca, cert, key)
}

// tlsClient returns an HTTPS client trusting ca and presenting cert.
func tlsClient(ca, cert, key string) (*http.Client, error) {
	pemCA, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("no certificate in %s", ca)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("load client certificate: %w", err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}, nil
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// hostIP returns the address of the interface of the default route (the
// one the kubelet reports as the node's InternalIP), else the first
// non-loopback IPv4 address.
func hostIP() (net.IP, error) {
	// Connecting a UDP socket sends nothing; it only picks the route.
	if conn, err := net.Dial("udp4", "192.0.2.1:9"); err == nil {
		defer conn.Close()
		return conn.LocalAddr().(*net.UDPAddr).IP, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("find the host's address: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP, nil
		}
	}
	return nil, errors.New("find the host's address: no non-loopback IPv4 address (the kubelet needs one)")
}
