package vm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// Init is what the guest runs as PID 1 after the initramfs.
type Init string

const (
	// BusyboxInit runs the payload's boot.sh as PID 1 with cgroup v2
	// mounted: no systemd, containerd's cgroupfs driver.
	BusyboxInit Init = "busybox"
	// SystemdInit boots systemd from the root file system; the payload's
	// nrivm.service runs boot.sh. For the systemd cgroup driver.
	SystemdInit Init = "systemd"
)

// Accel is the QEMU accelerator a boot uses, and why it was chosen.
type Accel struct {
	// Name is "kvm" or "tcg".
	Name string
	// Why says how it was chosen.
	Why string
}

// args returns QEMU's -accel argument.
func (a Accel) args() []string {
	if a.Name == "kvm" {
		return []string{"-accel", "kvm"}
	}
	// One host thread per vCPU: the guest's 16 vCPUs share the host's CPUs.
	return []string{"-accel", "tcg,thread=multi"}
}

// BootOptions configure Boot.
type BootOptions struct {
	Assets *Assets
	Accel  Accel
	Layout Layout
	Init   Init
	// Payload is the host directory the guest mounts at /vm. Required
	// unless Probe.
	Payload string
	// Cmdline are extra kernel parameters (isolcpus=…).
	Cmdline []string
	// Timeout bounds the boot: QEMU is killed after it.
	Timeout time.Duration
	// StartTimeout, when set, bounds the time until the guest's boot
	// script says it runs (the NRIVM-BOOTED line): QEMU is killed after
	// it and the result says Hung.
	StartTimeout time.Duration
	// StallTimeout, when set, bounds the time between two console lines
	// once the boot script runs (it prints a heartbeat, NRIVM-ALIVE, every
	// heartbeatInterval): QEMU is killed after it and the result says
	// Stalled.
	StallTimeout time.Duration
	// ConsoleLog receives the guest's serial console.
	ConsoleLog string
	// OnLine, when set, is called with each console line as it arrives.
	OnLine func(string)
	// Interactive connects the console to the caller's terminal (stdin
	// and stdout) instead of reading it.
	Interactive bool
	// probe boots only to the initramfs's probe answer.
	probe bool
}

// BootResult is what a boot left on the console.
type BootResult struct {
	// Console is everything the guest printed (empty when Interactive).
	Console string
	// Elapsed is the boot's wall-clock time, QEMU start to exit.
	Elapsed time.Duration
	// TimedOut is set when QEMU was killed at Timeout.
	TimedOut bool
	// Hung is set when QEMU was killed at StartTimeout: the guest never
	// reached its boot script.
	Hung bool
	// Stalled is set when QEMU was killed at StallTimeout: the guest
	// printed nothing, not even its heartbeat, for that long.
	Stalled bool
	// Crashed is the signal QEMU itself died of (a segmentation fault of
	// the emulator, seen once here while the guest enumerated PCI
	// devices), "" when it did not.
	Crashed string
}

// stopped reports whether the boot stopped for the emulator's sake: the
// guest hung or stalled, or QEMU crashed.
func (b *BootResult) stopped() bool { return b.Hung || b.Stalled || b.Crashed != "" }

// Boot runs QEMU until the guest powers off (or panics: -no-reboot makes
// QEMU exit) or Timeout passes. QEMU's own messages go to ConsoleLog's
// directory as qemu.log.
func Boot(ctx context.Context, opts BootOptions) (*BootResult, error) {
	if opts.Payload == "" && !opts.probe {
		return nil, errors.New("boot: Payload is required")
	}
	// The kernel's messages stay on: the console log shows where a boot
	// that hangs stopped.
	cmdline := []string{"console=ttyS0", "panic=1", "mitigations=off", "nrivm.init=" + string(opts.Init)}
	if opts.Init == SystemdInit {
		cmdline = append(cmdline, "systemd.unified_cgroup_hierarchy=1", "systemd.show_status=false")
	}
	if opts.probe {
		cmdline = append(cmdline, "nrivm.probe")
	}
	cmdline = append(cmdline, opts.Cmdline...)
	args := append(opts.Accel.args(), opts.Layout.qemuArgs()...)
	args = append(args,
		"-kernel", opts.Assets.Kernel, "-initrd", opts.Assets.Initramfs,
		"-append", strings.Join(cmdline, " "),
		// No network device: the guest has its loopback and a dummy
		// interface only.
		"-nic", "none",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
	)
	if opts.Interactive {
		args = append(args, "-serial", "mon:stdio")
	} else {
		args = append(args, "-serial", "stdio", "-monitor", "none")
	}
	if !opts.probe {
		// The shared directories go on the main PCI bus by name: QEMU
		// would put a device without a bus on the last bus made, a PCI
		// expander bridge of the layout's disks, which takes bridges only.
		args = append(args,
			"-fsdev", "local,id=rootfs,path="+opts.Assets.Rootfs+",security_model=passthrough,readonly=on",
			"-device", "virtio-9p-pci,fsdev=rootfs,mount_tag=rootfs,bus=pci.0",
			"-fsdev", "local,id=vm,path="+opts.Payload+",security_model=passthrough",
			"-device", "virtio-9p-pci,fsdev=vm,mount_tag=vm,bus=pci.0")
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, opts.Assets.QEMU, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	logDir := filepath.Dir(opts.ConsoleLog)
	qemuLog, err := os.Create(filepath.Join(logDir, "qemu.log"))
	if err != nil {
		return nil, fmt.Errorf("boot: %w", err)
	}
	defer qemuLog.Close()
	fmt.Fprintf(qemuLog, "%s %s\n", opts.Assets.QEMU, strings.Join(args, " "))
	cmd.Stderr = qemuLog
	console, err := os.Create(opts.ConsoleLog)
	if err != nil {
		return nil, fmt.Errorf("boot: %w", err)
	}
	defer console.Close()

	start := time.Now()
	res := &BootResult{}
	if opts.Interactive {
		cmd.Stdin, cmd.Stdout = os.Stdin, io.MultiWriter(os.Stdout, console)
		err = cmd.Run()
	} else {
		var out io.ReadCloser
		if out, err = cmd.StdoutPipe(); err != nil {
			return nil, fmt.Errorf("boot: %w", err)
		}
		if err = cmd.Start(); err != nil {
			return nil, fmt.Errorf("boot: start QEMU: %w", err)
		}
		var text strings.Builder
		var wg sync.WaitGroup
		var booted atomic.Bool
		var lastLine atomic.Int64 // UnixNano of the boot script's last line
		lastLine.Store(start.UnixNano())
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64*1024), 1024*1024)
			for sc.Scan() {
				line := strings.TrimRight(sc.Text(), "\r")
				if strings.HasPrefix(line, scriptPrefix) {
					// The kernel's own messages are no sign of life: a
					// guest whose vCPUs the emulator starves prints RCU
					// stall reports, and nothing else, for as long as it
					// is let.
					lastLine.Store(time.Now().UnixNano())
				}
				text.WriteString(line + "\n")
				fmt.Fprintln(console, line)
				if strings.HasPrefix(line, bootedMarker) {
					booted.Store(true)
				}
				if opts.OnLine != nil {
					opts.OnLine(line)
				}
			}
		}()
		hung, stalled := watchGuest(ctx, cancel, start, opts, &booted, &lastLine)
		wg.Wait()
		err = cmd.Wait()
		res.Console = text.String()
		res.Hung, res.Stalled = hung.Load(), stalled.Load()
	}
	res.Elapsed = time.Since(start)
	if res.Hung || res.Stalled {
		return res, nil
	}
	if ctx.Err() == context.DeadlineExceeded {
		res.TimedOut = true
		return res, nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Crashed = ws.Signal().String()
			return res, nil
		}
	}
	if err != nil && ctx.Err() == nil {
		return res, fmt.Errorf("QEMU failed: %w (its messages: %s)", err, filepath.Join(logDir, "qemu.log"))
	}
	return res, ctx.Err()
}

// watchGuest kills QEMU (cancel) when the guest does not reach its boot
// script within opts.StartTimeout (hung) or, after it did, prints nothing
// for opts.StallTimeout (stalled). It watches until ctx ends.
func watchGuest(ctx context.Context, cancel context.CancelFunc, start time.Time, opts BootOptions,
	booted *atomic.Bool, lastLine *atomic.Int64) (hung, stalled *atomic.Bool) {
	hung, stalled = &atomic.Bool{}, &atomic.Bool{}
	if opts.StartTimeout == 0 && opts.StallTimeout == 0 {
		return hung, stalled
	}
	interval := time.Second
	for _, d := range []time.Duration{opts.StartTimeout, opts.StallTimeout} {
		if d > 0 && d/4 < interval {
			interval = d / 4
		}
	}
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				silent := now.Sub(time.Unix(0, lastLine.Load()))
				switch {
				case !booted.Load() && opts.StartTimeout > 0 && now.Sub(start) > opts.StartTimeout:
					hung.Store(true)
					cancel()
					return
				case booted.Load() && opts.StallTimeout > 0 && silent > opts.StallTimeout:
					stalled.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	return hung, stalled
}

// probeTimeout bounds the KVM probe boot: a KVM guest reaches its
// initramfs in a second or two; a hung one never does.
const probeTimeout = 20 * time.Second

// DetectAccel chooses the accelerator: "kvm" when /dev/kvm can be opened
// and a probe boot of the guest kernel with the layout reaches the
// initramfs within probeTimeout, else "tcg" (emulation). NRIVM_ACCEL=kvm
// or tcg forces the choice. The probe's verdict is kept in logDir for the
// rest of the host's boot (the next suite does not wait for a hung probe
// again), for the same QEMU, kernel and layout.
func DetectAccel(ctx context.Context, a *Assets, layout Layout, logDir string, logf harness.Logf) Accel {
	switch forced := os.Getenv("NRIVM_ACCEL"); forced {
	case "kvm", "tcg":
		return Accel{Name: forced, Why: "forced by NRIVM_ACCEL"}
	}
	key := probeKey(a, layout)
	verdict := filepath.Join(logDir, "verdict")
	if data, err := os.ReadFile(verdict); err == nil && key != "" {
		if k, rest, ok := strings.Cut(string(data), "\n"); ok && k == key {
			if name, why, ok := strings.Cut(strings.TrimSuffix(rest, "\n"), "\n"); ok && (name == "kvm" || name == "tcg") {
				return Accel{Name: name, Why: why + " (probed earlier since the host booted)"}
			}
		}
	}
	accel, definite := probeAccel(ctx, a, layout, logDir)
	if key != "" && definite {
		if err := os.WriteFile(verdict, []byte(key+"\n"+accel.Name+"\n"+accel.Why+"\n"), 0o644); err != nil {
			logf("keep the KVM probe's verdict: %v", err)
		}
	}
	return accel
}

// probeKey names what a probe's verdict holds for: the host's boot, QEMU,
// the guest kernel and the layout; "" when the boot has no id.
func probeKey(a *Assets, layout Layout) string {
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return fmt.Sprintf("boot %s qemu %s kernel %s layout %v", strings.TrimSpace(string(id)), a.QEMU, a.Kernel, layout)
}

// probeAccel boots the KVM probe (see DetectAccel); definite says whether
// the probe boot reached the initramfs or hung: a verdict on KVM, not on
// this attempt.
func probeAccel(ctx context.Context, a *Assets, layout Layout, logDir string) (accel Accel, definite bool) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return Accel{Name: "tcg", Why: fmt.Sprintf("no usable /dev/kvm (%v)", err)}, false
	}
	f.Close()
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return Accel{Name: "tcg", Why: err.Error()}, false
	}
	res, err := Boot(ctx, BootOptions{
		Assets: a, Accel: Accel{Name: "kvm"}, Layout: layout, Init: BusyboxInit,
		Timeout: probeTimeout, ConsoleLog: filepath.Join(logDir, "console.log"), probe: true,
	})
	switch {
	case err != nil:
		return Accel{Name: "tcg", Why: fmt.Sprintf("a KVM probe boot failed: %v", err)}, false
	case strings.Contains(res.Console, "NRIVM-PROBE ok"):
		return Accel{Name: "kvm", Why: fmt.Sprintf("a KVM probe boot reached the initramfs in %v", res.Elapsed.Round(100*time.Millisecond))}, true
	case res.TimedOut:
		return Accel{Name: "tcg", Why: fmt.Sprintf("a KVM probe boot did not reach the initramfs within %v (this host's KVM hangs the guest)", probeTimeout)}, true
	}
	return Accel{Name: "tcg", Why: fmt.Sprintf("a KVM probe boot ended without reaching the initramfs (QEMU's messages: %s)", filepath.Join(logDir, "qemu.log"))}, false
}
