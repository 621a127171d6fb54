package vm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// startTimeout bounds a boot until the guest's boot script runs: about 10
// to 30 s under emulation, a second or two with KVM.
const startTimeout = 2 * time.Minute

// maxBoots is how many times a run boots when the guest hangs or stalls.
const maxBoots = 3

// stallTimeout bounds a guest's silence once its boot script runs: it
// prints a heartbeat every heartbeatInterval, so that long without a line
// is an emulated machine that stopped (seen once in CI: a guest silent
// until its 45-minute timeout).
const stallTimeout = 4 * time.Minute

// defaultRunTimeout bounds a Run without its own Timeout: about four times
// the longest such boot here (the cgroupfs boot, 5 to 6 minutes).
const defaultRunTimeout = 25 * time.Minute

// guestPackage is the package of the tests that run in the guest, relative
// to the repository root.
const guestPackage = "./test/e2e/vm/guest"

// Binaries are the static binaries a boot's payload carries.
type Binaries struct {
	// Containerd, Shim and Ctr are containerd's (see harness.Install).
	Containerd, Shim, Ctr string
	// Plugin is nri-cpumanager built without cgo.
	Plugin string
	// GuestTest is the guest package's test binary built without cgo.
	GuestTest string
}

// BuildBinaries installs containerd (static, as the harness builds it)
// and builds the plugin and the guest tests without cgo into
// <assets dir>/bin.
func BuildBinaries(ctx context.Context, a *Assets, outputDir string, logf harness.Logf) (*Binaries, error) {
	tools, err := harness.Install(ctx, harness.InstallOptions{OutputDir: outputDir, Logf: logf})
	if err != nil {
		return nil, err
	}
	b := &Binaries{
		Containerd: tools.Containerd, Shim: tools.Shim, Ctr: tools.Ctr,
		Plugin:    filepath.Join(a.Dir, "bin", "nri-cpumanager"),
		GuestTest: filepath.Join(a.Dir, "bin", "guest.test"),
	}
	start := time.Now()
	if err := harness.GoBuildTo(ctx, "./cmd/nri-cpumanager", b.Plugin, harness.BuildOptions{Static: true}); err != nil {
		return nil, err
	}
	if err := harness.GoBuildTo(ctx, guestPackage, b.GuestTest, harness.BuildOptions{Static: true, Test: true, Tags: []string{"vmguest"}}); err != nil {
		return nil, err
	}
	if logf != nil {
		logf("built the plugin and the guest tests (static) in %v", time.Since(start).Round(time.Millisecond))
	}
	return b, nil
}

// Files returns the payload entries of the binaries.
func (b *Binaries) Files() map[string]string {
	return map[string]string{
		"bin/containerd":              b.Containerd,
		"bin/containerd-shim-runc-v2": b.Shim,
		"bin/ctr":                     b.Ctr,
		"bin/nri-cpumanager":          b.Plugin,
		"guest.test":                  b.GuestTest,
	}
}

// Run is one boot that runs guest tests.
type Run struct {
	// Name names the boot's directory under <assets dir>/runs.
	Name string
	// Init is the guest's init; it decides the cgroup driver: cgroupfs
	// with the busybox init, systemd with systemd.
	Init Init
	// Cmdline are extra kernel parameters.
	Cmdline []string
	// Tests is the -test.run pattern of the guest tests.
	Tests string
	// Env is added to the guest tests' environment.
	Env map[string]string
	// Files are added to the payload.
	Files map[string]string
	// Timeout bounds the boot.
	Timeout time.Duration
}

// driver returns the cgroup driver of the run's init.
func (r Run) driver() harness.CgroupDriver {
	if r.Init == SystemdInit {
		return harness.SystemdDriver
	}
	return harness.CgroupfsDriver
}

// RunResult is what a run's guest reported.
type RunResult struct {
	// Dir holds the payload, the console log and QEMU's log.
	Dir string
	// Output is the guest test binary's output (-test.v).
	Output string
	// Exit is its exit status, -1 when the guest never reported one.
	Exit int
	// Boot is QEMU's result.
	Boot *BootResult
	// Tests are the top-level guest tests' outcomes, in order.
	Tests []TestOutcome
}

// TestOutcome is a guest test's result line.
type TestOutcome struct {
	Name, Result string // PASS, FAIL or SKIP
	Elapsed      string
}

// guestGOMAXPROCS is the GOMAXPROCS of the Go programs the guest tests
// start (containerd, the plugin, etcd, the Kubernetes components): no
// more than the host's CPUs. Under emulation the guest's 16 vCPUs share
// the host's few; a Go runtime with 16 Ps spins idle threads and runs
// garbage-collection workers on every vCPU, each stealing host time from
// the vCPU doing the work (with 2, a run of make e2e-vm-kube took a
// quarter less time on the project's 2-CPU machine). It changes nothing
// the tests observe: which CPUs exist and which a container may use are
// the guest kernel's.
func guestGOMAXPROCS(vcpus, hostCPUs int) int {
	return max(1, min(vcpus, hostCPUs))
}

// Execute boots a guest for r and collects what its tests reported.
func Execute(ctx context.Context, a *Assets, accel Accel, bins *Binaries, r Run, logf harness.Logf) (*RunResult, error) {
	dir := filepath.Join(a.Dir, "runs", r.Name)
	payload := filepath.Join(dir, "payload")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := bins.Files()
	for k, v := range r.Files {
		files[k] = v
	}
	env := map[string]string{"NRIVM_GUEST": "1", "NRIVM_DRIVER": string(r.driver()),
		"GOMAXPROCS": strconv.Itoa(guestGOMAXPROCS(Production.CPUs(), runtime.NumCPU()))}
	for k, v := range r.Env {
		env[k] = v
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = defaultRunTimeout
	}
	err := WritePayload(PayloadOptions{
		Dir: payload, Init: r.Init, Files: files, Env: env,
		Command: []string{"/vm/guest.test", "-test.v", "-test.timeout=" + (timeout - 2*time.Minute).String(), "-test.run", r.Tests},
	})
	if err != nil {
		return nil, err
	}
	progress := regexp.MustCompile(`^(=== RUN   Test\S+$|--- |NRIVM-|    --- )`)
	boot := func() (*BootResult, error) {
		// A stopped boot's partial results must not pass for the next's.
		if err := os.Remove(filepath.Join(payload, filepath.FromSlash(outputFile))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return Boot(ctx, BootOptions{
			Assets: a, Accel: accel, Layout: Production, Init: r.Init, Payload: payload, Cmdline: r.Cmdline,
			Timeout: timeout, StartTimeout: startTimeout, StallTimeout: stallTimeout,
			ConsoleLog: filepath.Join(dir, "console.log"),
			OnLine: func(line string) {
				text := strings.TrimPrefix(line, linePrefix)
				if logf != nil && progress.MatchString(text) && !strings.HasPrefix(text, aliveMarker) {
					logf("guest %s: %s", r.Name, text)
				}
			},
		})
	}
	// The emulated guest has been seen to hang in the kernel's boot (here
	// 1 boot in 52 measured: none of 20 on an idle host nor of 12 right
	// after the KVM probe, 1 of 20 with two CPU hogs running) and once to
	// stop printing in the middle of a run:
	// the emulator's failure, not the plugin's (the guest's own test
	// timeout would have printed the stuck goroutines). Such a boot is run
	// again, up to maxBoots in all.
	res, err := bootAgainWhenStopped(boot, maxBoots, func(attempt int, res *BootResult) {
		stopped := filepath.Join(dir, fmt.Sprintf("console-stopped-%d.log", attempt))
		_ = os.Rename(filepath.Join(dir, "console.log"), stopped)
		if logf != nil {
			logf("guest %s: %s (console: %s); booting again", r.Name, res.stopReason(), stopped)
		}
	})
	if err != nil {
		return nil, err
	}
	out := &RunResult{Dir: dir, Boot: res, Exit: -1}
	if data, err := os.ReadFile(filepath.Join(payload, filepath.FromSlash(outputFile))); err == nil {
		out.Output = string(data)
	} else {
		// The results file did not come back: the console has the lines.
		var b strings.Builder
		for _, line := range strings.Split(res.Console, "\n") {
			if text, ok := strings.CutPrefix(line, linePrefix); ok {
				b.WriteString(text + "\n")
			}
		}
		out.Output = b.String()
	}
	out.Exit, out.Tests = parseOutput(out.Output)
	return out, nil
}

// bootAgainWhenStopped boots until a boot neither hangs, stalls nor
// crashes QEMU, at
// most maxBoots times, calling stopped after each boot it repeats.
func bootAgainWhenStopped(boot func() (*BootResult, error), maxBoots int, stopped func(attempt int, res *BootResult)) (*BootResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := boot()
		if err != nil || !res.stopped() || attempt >= maxBoots {
			return res, err
		}
		stopped(attempt, res)
	}
}

// parseOutput reads a guest test binary's -test.v output: its exit status
// (the boot script's NRIVM-EXIT line; -1 without one) and the top-level
// tests' results.
func parseOutput(output string) (exit int, tests []TestOutcome) {
	exit = -1
	result := regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+) \(([^)]*)\)`)
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if code, ok := strings.CutPrefix(line, exitMarker); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(code)); err == nil {
				exit = n
			}
		}
		if m := result.FindStringSubmatch(line); m != nil {
			tests = append(tests, TestOutcome{Name: m[2], Result: m[1], Elapsed: m[3]})
		}
	}
	return exit, tests
}

// Failure describes why a run failed, or "" when it passed: the guest
// tests' exit status, a timeout, or the initramfs's complaint.
func (r *RunResult) Failure() string {
	switch {
	case r.Boot.stopped():
		return fmt.Sprintf("%s, in each of %d boots", r.Boot.stopReason(), maxBoots)
	case r.Boot.TimedOut:
		return fmt.Sprintf("the guest did not finish within its time (%v)", r.Boot.Elapsed.Round(time.Second))
	case strings.Contains(r.Boot.Console, failedMarker):
		return "the guest's initramfs failed: " + lineWith(r.Boot.Console, failedMarker)
	case r.Exit == -1:
		return "the guest powered off without its tests' exit status"
	case r.Exit != 0:
		return fmt.Sprintf("the guest tests exited with status %d", r.Exit)
	}
	return ""
}

// stopReason says why the watchdog stopped a boot.
func (b *BootResult) stopReason() string {
	if b.Hung {
		return fmt.Sprintf("the guest did not reach its boot script within %v", startTimeout)
	}
	if b.Crashed != "" {
		return fmt.Sprintf("QEMU crashed (%s) after %v", b.Crashed, b.Elapsed.Round(time.Second))
	}
	return fmt.Sprintf("the guest printed nothing, not even its heartbeat, for %v after %v", stallTimeout,
		(b.Elapsed - stallTimeout).Round(time.Second))
}

// lineWith returns the first line of s containing sub.
func lineWith(s, sub string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// KubernetesFiles builds (or reuses) what the Kubernetes boot adds to its
// payload: the Kubernetes v1.36.3 and etcd binaries of test/kubernetes
// (static; the first build takes about 20 minutes on 2 CPUs), the plugin's
// release image built by hack/image, and deploy/.
func KubernetesFiles(ctx context.Context, a *Assets, logf harness.Logf) (map[string]string, error) {
	tools, err := harness.InstallKubernetes(ctx, harness.InstallOptions{Logf: logf})
	if err != nil {
		return nil, err
	}
	files := map[string]string{
		"k8s/kube-apiserver":          tools.APIServer,
		"k8s/kube-controller-manager": tools.ControllerManager,
		"k8s/kube-scheduler":          tools.Scheduler,
		"k8s/kubelet":                 tools.Kubelet,
		"k8s/kubectl":                 tools.Kubectl,
		"k8s/etcd":                    tools.Etcd,
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	imageTool, err := harness.GoBuild(ctx, "", "./hack/image")
	if err != nil {
		return nil, err
	}
	archive := filepath.Join(a.Dir, "bin", "nri-cpumanager-image.tar")
	cmd := exec.CommandContext(ctx, imageTool, "-o", archive, "-name", "localhost/nri-cpumanager", "-tag", "e2e")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the plugin's image: %w\n%s", err, out)
	}
	files["plugin-image.tar"] = archive
	deploy := filepath.Join(root, "deploy")
	err = filepath.WalkDir(deploy, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files["repo/"+filepath.ToSlash(rel)] = path
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list deploy/: %w", err)
	}
	return files, nil
}

// DemoFiles builds what a boot that runs `make demo`'s program adds to
// its payload: the demo, static, and the scenario files it reads.
func DemoFiles(ctx context.Context, a *Assets) (map[string]string, error) {
	bin := filepath.Join(a.Dir, "bin", "demo")
	if err := harness.GoBuildTo(ctx, "./test/e2e/demo", bin, harness.BuildOptions{Static: true}); err != nil {
		return nil, err
	}
	files, err := ScenarioFiles()
	if err != nil {
		return nil, err
	}
	files["bin/demo"] = bin
	return files, nil
}

// ScenarioFiles are the payload entries of test/scenarios/*.yaml, which
// the guest's TestScenarios plays.
func ScenarioFiles() (map[string]string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	scenarios, err := filepath.Glob(filepath.Join(root, "test", "scenarios", "*.yaml"))
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, s := range scenarios {
		files["repo/test/scenarios/"+filepath.Base(s)] = s
	}
	return files, nil
}
