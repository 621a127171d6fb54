package e2etest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// Synchronized is the plugin's log line once it is registered and
// synchronized with containerd.
var Synchronized = regexp.MustCompile(`msg=synchronized`)

// CPUManager is the nri-cpumanager binary running as an external NRI
// plugin on an Env's containerd, the DaemonSet way.
type CPUManager struct {
	*harness.Process
	Env *harness.Env
	// Bin is the plugin's binary, Config its configuration file and
	// StateDir the directory of its checkpoint.
	Bin, Config, StateDir string
	// Online are the machine's online CPUs, against which the checkpoint
	// is verified.
	Online cpuset.CPUSet
	// API, when set, is the Kubernetes API the plugin watches
	// (StartCPUManagerOnAPI).
	API *harness.FakeAPIServer
}

// StartCPUManager writes the plugin's configuration into a directory of
// the test's — the suites' settings (env's NRI socket, a state directory
// of its own, no metrics, health or debug listener, no kubelet checkpoint
// to import, debug logs) followed by config, lines of the configuration
// file that may override them — starts bin with it against env's
// containerd and waits until it is synchronized.
func StartCPUManager(ctx context.Context, t testing.TB, env *harness.Env, bin string, online cpuset.CPUSet, config string) *CPUManager {
	t.Helper()
	return startCPUManager(ctx, t, env, bin, online, config, nil)
}

// StartCPUManagerOnAPI is StartCPUManager with the plugin on api, a fake
// Kubernetes API server: kubernetesAPI: true among the suites' settings,
// $KUBECONFIG naming api and $NODE_NAME its node. It waits, past the
// synchronization, until the plugin says it watches the node's pods and
// api has sent them to its watch.
func StartCPUManagerOnAPI(ctx context.Context, t testing.TB, env *harness.Env, bin string, online cpuset.CPUSet, config string, api *harness.FakeAPIServer) *CPUManager {
	t.Helper()
	return startCPUManager(ctx, t, env, bin, online, config, api)
}

func startCPUManager(ctx context.Context, t testing.TB, env *harness.Env, bin string, online cpuset.CPUSet, config string, api *harness.FakeAPIServer) *CPUManager {
	t.Helper()
	dir := t.TempDir()
	m := &CPUManager{Env: env, Bin: bin, Config: filepath.Join(dir, "config.yaml"), StateDir: filepath.Join(dir, "state"), Online: online, API: api}
	cfg := fmt.Sprintf("nriSocket: %s\nstateDir: %s\nmetricsAddress: \"\"\nhealthAddress: \"\"\ndebugAddress: \"\"\nkubeletCheckpoint: \"\"\nlogLevel: debug\n",
		env.Containerd.NRISocket(), m.StateDir)
	if api != nil {
		cfg += "kubernetesAPI: true\n"
	}
	cfg += config + "\n"
	if err := os.WriteFile(m.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Start(ctx, t)
	return m
}

// Reserve returns the configuration line that reserves cpus for the
// system.
func Reserve(cpus cpuset.CPUSet) string {
	return fmt.Sprintf("reservedSystemCPUs: %q", cpus.String())
}

// Start starts the plugin (again, after Kill or Stop) and waits until it
// is synchronized, and on its API server until it watches the node's pods.
func (m *CPUManager) Start(ctx context.Context, t testing.TB) {
	t.Helper()
	opts := harness.ProcessOptions{Path: m.Bin, Args: []string{"run", "--config", m.Config}}
	if m.API != nil {
		opts.Env = []string{"KUBECONFIG=" + m.API.Kubeconfig, "NODE_NAME=" + m.API.Node}
	}
	p, err := m.Env.StartPlugin(opts)
	if err != nil {
		t.Fatal(err)
	}
	m.Process = p
	if _, err := p.WaitForLog(ctx, Synchronized); err != nil {
		t.Fatalf("the plugin did not synchronize: %v; its log:\n%s", err, p.LogTail(30))
	}
	if m.API == nil {
		return
	}
	if _, err := p.WaitForLog(ctx, WatchingPods); err != nil {
		t.Fatalf("the plugin does not watch the Kubernetes API's pods: %v; its log:\n%s", err, p.LogTail(30))
	}
	wctx, cancel := context.WithTimeout(ctx, Wait)
	defer cancel()
	if err := m.API.WaitWatched(wctx); err != nil {
		t.Fatalf("the plugin's watch: %v; its log:\n%s", err, p.LogTail(30))
	}
}

// WatchingPods is the plugin's log line once it runs its watch of the
// node's pods in the Kubernetes API.
var WatchingPods = regexp.MustCompile(`msg="watching this node's pods in the Kubernetes API"`)

// apiTrouble are the plugin's log lines when it works without the
// Kubernetes API, or loses it.
var apiTrouble = regexp.MustCompile(`Kubernetes API unavailable|not in a cluster|has no client for the Kubernetes API`)

// OnAPI checks that the plugin worked with its Kubernetes API all along:
// its log says it watches the node's pods and never that it lost the API
// server or works without it, and the API server was asked for nothing it
// does not serve.
func (m *CPUManager) OnAPI(t testing.TB) {
	t.Helper()
	log, err := m.Log()
	if err != nil {
		t.Error(err)
		return
	}
	if !WatchingPods.MatchString(log) {
		t.Errorf("the plugin's log does not say it watches the node's pods in the Kubernetes API")
	}
	for _, line := range strings.Split(log, "\n") {
		if apiTrouble.MatchString(line) {
			t.Errorf("the plugin worked without the Kubernetes API: %s", line)
		}
	}
	if m.API != nil {
		for _, r := range m.API.Unserved() {
			t.Errorf("the plugin asked the Kubernetes API for what the fake does not serve: %s", r)
		}
	}
}

// Checkpoint reads and verifies the checkpoint the plugin keeps.
func (m *CPUManager) Checkpoint(t testing.TB) *state.State {
	t.Helper()
	return ReadCheckpoint(t, m.StateDir, m.Online)
}

// ReadCheckpoint reads and verifies the checkpoint in a plugin's state
// directory.
func ReadCheckpoint(t testing.TB, dir string, online cpuset.CPUSet) *state.State {
	t.Helper()
	st, err := state.Inspect(dir, online)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return st
}

// WantAssignment checks a container's checkpoint entry: its original
// CPUs and the CPUs it is assigned now.
func (m *CPUManager) WantAssignment(t testing.TB, c *harness.Container, original, assigned cpuset.CPUSet) {
	t.Helper()
	a, ok := m.Checkpoint(t).Assignment(c.Pod.Spec.UID, c.Name)
	if !ok || !a.Baseline.Equals(original) || !a.Assigned().Equals(assigned) {
		t.Errorf("checkpoint entry of %s: %+v (present %v), want original %s, assigned %s", c, a, ok, original, assigned)
	}
}

// verificationWarnings are the plugin's warnings when it finds a
// container's cgroup cpuset different from what the runtime was given
// (drift), or cannot read or parse it.
var verificationWarnings = []string{
	"differs from what the runtime was given",
	"cannot read the container's cpuset",
	"cannot parse the container's cgroup cpuset",
}

// VerificationWarning reports whether a line of the plugin's log is one
// of its warnings about a container's cgroup cpuset: different from what
// it had the runtime apply (drift), unreadable or unparsable. None is
// tolerated: a cpuset.cpus read between a cgroup's creation and runc
// writing it (empty on cgroup v2) must not be one either.
func VerificationWarning(line string) bool {
	for _, w := range verificationWarnings {
		if strings.Contains(line, w) {
			return true
		}
	}
	return false
}

// NoDrift checks that the plugin read every container's cpuset from its
// cgroup and found what it had the runtime apply.
func (m *CPUManager) NoDrift(t testing.TB) {
	t.Helper()
	log, err := m.Log()
	if err != nil {
		t.Error(err)
		return
	}
	for _, line := range strings.Split(log, "\n") {
		if VerificationWarning(line) {
			t.Errorf("warning in the plugin's log: %s", line)
		}
	}
}
