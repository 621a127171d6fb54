package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// The plugin's command, built once per test binary by pluginBinary as the
// image builds it (static, without the race detector or a symbol table:
// what runs on a node, whose memory the load test measures) and removed by
// TestMain.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// pluginBinary builds ./cmd/nri-cpumanager with `go build` as the
// Dockerfile does and returns its path.
func pluginBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "nri-cpumanager-test-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "nri-cpumanager")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", binPath, "../../cmd/nri-cpumanager")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/nri-cpumanager: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// removePluginBinary removes what pluginBinary built.
func removePluginBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// sysfsTree writes spec as a sysfs tree under a test directory (the
// plugin's process reads its topology from disk).
func sysfsTree(t testing.TB, spec fakesysfs.Spec) string {
	t.Helper()
	root := filepath.Join(memDir(t), "sys")
	if err := fakesysfs.Generate(root, spec); err != nil {
		t.Fatal(err)
	}
	return root
}

// pluginProcess is the plugin's command running as its own process,
// connected to a fake runtime.
type pluginProcess struct {
	t        testing.TB
	cmd      *exec.Cmd
	stateDir string
	metrics  string // the metrics address, "" when not served
	// probeSocket is the probes' Unix socket (the probe command's), health
	// their HTTP address, "" when not served.
	probeSocket, health string
	bin                 string
	log                 *bytes.Buffer
	logMu               *sync.Mutex
	done                chan struct{}
	exitErr             error
}

// processConfig is what a plugin process is started with.
type processConfig struct {
	sysfsRoot string
	stateDir  string
	// yaml holds more configuration keys (reserved CPUs, policies).
	yaml string
	// env holds more environment variables (GOMEMLIMIT, GOGC).
	env []string
	// metrics makes the plugin serve its metrics on a free loopback port.
	metrics bool
	// healthOverHTTP serves the probes over HTTP too (healthAddress), on
	// another free loopback port; they are always on the probe socket.
	healthOverHTTP bool
}

// startProcess starts the plugin's command against rt and waits until its
// first Synchronize has been applied and the runtime delivers events to
// it.
func startProcess(t testing.TB, rt *fakeruntime.Runtime, pc processConfig) *pluginProcess {
	t.Helper()
	bin := pluginBinary(t)
	logLevel := "info"
	if testing.Verbose() {
		logLevel = "debug"
	}
	metricsAddress, healthAddress := "", ""
	if pc.metrics {
		metricsAddress = freeAddress(t)
	}
	if pc.healthOverHTTP {
		healthAddress = freeAddress(t)
	}
	probeSocket := filepath.Join(t.TempDir(), "run", "probe.sock")
	cfg := fmt.Sprintf("nriSocket: %s\nstateDir: %s\nsysfsRoot: %s\ncgroupfsRoot: %q\nmetricsAddress: %q\nprobeSocket: %s\nhealthAddress: %q\ndebugAddress: \"\"\nkubeletCheckpoint: \"\"\nlogLevel: %s\n%s\n",
		rt.Socket(), pc.stateDir, pc.sysfsRoot, rt.CgroupRoot(), metricsAddress, probeSocket, healthAddress, logLevel, pc.yaml)
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	pp := &pluginProcess{t: t, bin: bin, stateDir: pc.stateDir, metrics: metricsAddress, probeSocket: probeSocket, health: healthAddress,
		log: &bytes.Buffer{}, logMu: &sync.Mutex{}, done: make(chan struct{})}
	pp.cmd = exec.Command(bin, "run", "--config", cfgFile)
	pp.cmd.Env = append(os.Environ(), pc.env...)
	pp.cmd.Stdout = lockedWriter{pp.logMu, pp.log}
	pp.cmd.Stderr = lockedWriter{pp.logMu, pp.log}
	syncs := rt.Syncs()
	if err := pp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		pp.exitErr = pp.cmd.Wait()
		close(pp.done)
	}()
	t.Cleanup(func() {
		pp.Stop()
		if t.Failed() || testing.Verbose() {
			t.Logf("plugin process log (last 60 lines):\n%s", pp.tail(60))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for rt.Syncs() == syncs {
		select {
		case <-pp.done:
			t.Fatalf("plugin process exited before its Synchronize: %v\n%s", pp.exitErr, pp.tail(30))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin process did not synchronize within 30 s\n%s", pp.tail(30))
		}
		time.Sleep(5 * time.Millisecond)
	}
	rt.BlockPluginSync().Unblock()
	return pp
}

// freeAddress returns a loopback address with a port free at the time.
func freeAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedWriter serializes writes of the process's stdout and stderr.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// probe runs the kubelet's exec probe, the probe command, for kind (live
// or ready) against the process, and returns whether it said yes (exit
// status 0) within its timeout, and its output.
func (pp *pluginProcess) probe(kind string) (bool, string) {
	out, err := exec.Command(pp.bin, "probe", kind, "--probe-socket", pp.probeSocket, "--timeout", "1s").CombinedOutput()
	return err == nil, strings.TrimSpace(string(out))
}

// tail returns the last n lines the process logged.
func (pp *pluginProcess) tail(n int) string {
	pp.logMu.Lock()
	defer pp.logMu.Unlock()
	lines := strings.Split(strings.TrimRight(pp.log.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logLines returns the lines the process logged that contain s.
func (pp *pluginProcess) logLines(s string) []string {
	pp.logMu.Lock()
	defer pp.logMu.Unlock()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(pp.log.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// Stop ends the process with SIGTERM (SIGKILL after 10 s) and waits for
// it; idempotent.
func (pp *pluginProcess) Stop() {
	select {
	case <-pp.done:
		return
	default:
	}
	_ = pp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pp.done:
	case <-time.After(10 * time.Second):
		pp.t.Errorf("plugin process ignored SIGTERM for 10 s; killing it")
		pp.Kill()
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (pp *pluginProcess) Kill() {
	_ = pp.cmd.Process.Signal(syscall.SIGKILL)
	<-pp.done
}

// memory returns the process's peak and current resident set size
// (VmHWM and VmRSS of /proc/<pid>/status), in bytes.
func (pp *pluginProcess) memory() (peak, current int64, err error) {
	status, err := pp.status()
	if err != nil {
		return 0, 0, err
	}
	if status["VmHWM"] == 0 {
		return 0, 0, errors.New("no VmHWM in /proc/<pid>/status")
	}
	return status["VmHWM"], status["VmRSS"], nil
}

// status returns the sizes of the plugin process's /proc/<pid>/status
// (VmHWM, VmRSS, RssAnon, RssFile...), in bytes.
func (pp *pluginProcess) status() (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pp.cmd.Process.Pid))
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || !strings.HasSuffix(value, " kB") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", key, value, err)
		}
		sizes[key] = kb << 10
	}
	return sizes, nil
}

// metricSample is one sample line of the Prometheus text format.
var metricSample = regexp.MustCompile(`^([a-z_]+)(?:\{(.*)\})? ([0-9.e+-]+|\+Inf)$`)

// scrape returns the plugin's metric samples: name{labels} → value.
func (pp *pluginProcess) scrape() (map[string]float64, error) { return pp.scrapeFrom("") }

// scrapeFrom is scrape from a source address ("": any).
func (pp *pluginProcess) scrapeFrom(source string) (map[string]float64, error) {
	if pp.metrics == "" {
		return nil, errors.New("the plugin serves no metrics")
	}
	dialer := net.Dialer{Timeout: 5 * time.Second}
	if source != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	client := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	resp, err := client.Get("http://" + pp.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := metricSample.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		out[m[1]+"{"+m[2]+"}"] = v
	}
	return out, sc.Err()
}
