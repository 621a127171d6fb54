package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// PayloadOptions describe what a boot's guest finds at /vm.
type PayloadOptions struct {
	// Dir is the host directory; it is emptied first.
	Dir string
	// Init is the guest's init (decides how boot.sh ends and whether the
	// systemd unit is installed).
	Init Init
	// Files maps paths under /vm ("bin/containerd", "guest.test") to host
	// files, hard-linked (or copied) in.
	Files map[string]string
	// Env is exported by boot.sh before it runs Command.
	Env map[string]string
	// Command is what the guest runs, its output on the console (each line
	// prefixed "NRIVM| ") and in /vm/results/output.txt, followed by the
	// line "NRIVM-EXIT <status>". Empty: an interactive shell on the
	// console (make vm-shell).
	Command []string
}

// The markers the guest prints on its console. Every line of the boot
// script starts with scriptPrefix.
const (
	scriptPrefix = "NRIVM"
	linePrefix   = "NRIVM| "
	bootedMarker = "NRIVM-BOOTED"
	exitMarker   = "NRIVM-EXIT "
	failedMarker = "NRIVM-FAILED"
	// aliveMarker starts the heartbeat line the boot script prints every
	// heartbeatInterval while Command runs.
	aliveMarker = "NRIVM-ALIVE"
	// guestAddress is the dummy interface's address, the kubelet's node
	// address; the default route points into the same dummy network, so
	// nothing leaves the guest (it has no network device anyway).
	guestAddress = "10.0.2.15/24"
	guestGateway = "10.0.2.2"
	// guestHostname is the guest's host name.
	guestHostname = "nrivm"
	// outputFile is where the guest writes Command's output, under /vm.
	outputFile = "results/output.txt"
)

// heartbeatInterval is how often the guest prints its heartbeat.
const heartbeatInterval = 15 * time.Second

// maskedUnits are systemd units a test boot does not want: logins on the
// console it writes to, and periodic maintenance.
var maskedUnits = []string{
	"serial-getty@ttyS0.service", "getty@tty1.service", "apt-daily.timer", "apt-daily-upgrade.timer",
	"dpkg-db-backup.timer", "e2scrub_all.timer", "fstrim.timer", "man-db.timer", "systemd-tmpfiles-clean.timer",
}

// WritePayload fills opts.Dir: the files, boot.sh, the systemd unit that
// runs it (under etc/, which the initramfs copies over the guest's /etc)
// and an empty results directory.
func WritePayload(opts PayloadOptions) error {
	if opts.Dir == "" {
		return errors.New("payload: Dir is required")
	}
	if err := os.RemoveAll(opts.Dir); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	for _, d := range []string{"results", "bin"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o755); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
	}
	for name, src := range opts.Files {
		dst := filepath.Join(opts.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
		if err := linkOrCopy(src, dst); err != nil {
			return fmt.Errorf("payload: %s: %w", name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, "boot.sh"), []byte(bootScript(opts)), 0o755); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "etc"), 0o755); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	// What a node's /etc has and debootstrap's minimal base lacks
	// (containerd copies hosts and resolv.conf into every host-network
	// pod), with a DNS configuration that names no server: the guest has
	// no network.
	for name, content := range map[string]string{
		"hostname":    guestHostname + "\n",
		"hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" + strings.TrimSuffix(guestAddress, "/24") + "\t" + guestHostname + "\n",
		"resolv.conf": "# The VM suite's guest has no network and no DNS server.\n",
	} {
		if err := os.WriteFile(filepath.Join(opts.Dir, "etc", name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
	}
	if opts.Init == SystemdInit {
		units := filepath.Join(opts.Dir, "etc", "systemd", "system")
		if err := os.MkdirAll(filepath.Join(units, "multi-user.target.wants"), 0o755); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
		if err := os.WriteFile(filepath.Join(units, "nrivm.service"), []byte(systemdUnit(opts.Command == nil)), 0o644); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
		if err := os.Symlink("../nrivm.service", filepath.Join(units, "multi-user.target.wants", "nrivm.service")); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
		for _, u := range maskedUnits {
			if err := os.Symlink("/dev/null", filepath.Join(units, u)); err != nil {
				return fmt.Errorf("payload: %w", err)
			}
		}
	}
	return nil
}

// linkOrCopy hard-links src to dst, or copies it where a link is not
// possible (another file system).
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return copyFile(src, dst)
}

// bootScript returns /vm/boot.sh: the guest's environment and network
// (loopback, and a dummy interface for the kubelet's node address), then
// Command or a shell, then power-off.
func bootScript(opts PayloadOptions) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by the VM suite (test/e2e/vm) for one boot.\n")
	b.WriteString("export PATH=/vm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8\n")
	keys := make([]string, 0, len(opts.Env))
	for k := range opts.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(opts.Env[k]))
	}
	fmt.Fprintf(&b, `echo "`+bootedMarker+` after $(cut -d' ' -f1 /proc/uptime) s of guest uptime ($(nproc) CPUs, init %s, $(uname -r))"
hostname %s
ip link set lo up
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
ip addr add %s dev dummy0
ip link set dummy0 up
ip route add default via %s dev dummy0
cd /tmp
`, opts.Init, guestHostname, guestAddress, guestGateway)
	if opts.Command == nil {
		b.WriteString(`echo "NRIVM-SHELL: the payload is /vm; 'exit' powers the guest off"
setsid -w -c /bin/bash -l </dev/ttyS0 >/dev/ttyS0 2>&1
`)
	} else {
		quoted := make([]string, len(opts.Command))
		for i, a := range opts.Command {
			quoted[i] = shellQuote(a)
		}
		// The heartbeat tells the host's watchdog that the emulated
		// machine still runs while the tests are quiet.
		fmt.Fprintf(&b, "( while sleep %d; do echo \"%s $(cut -d' ' -f1 /proc/uptime)\"; done ) &\n",
			int(heartbeatInterval/time.Second), aliveMarker)
		fmt.Fprintf(&b, "{ %s 2>&1; echo \"%s$?\"; } | tee /vm/%s | sed -u 's/^/%s/'\n",
			strings.Join(quoted, " "), exitMarker, outputFile, linePrefix)
	}
	b.WriteString("sync\n/bin/busybox poweroff -f\n")
	return b.String()
}

// systemdUnit returns nrivm.service, which runs boot.sh once systemd and
// D-Bus are up, its output on the serial console.
func systemdUnit(interactive bool) string {
	input := "null"
	if interactive {
		input = "tty"
	}
	return fmt.Sprintf(`[Unit]
Description=nri-cpumanager VM suite (/vm/boot.sh)
After=basic.target dbus.socket
Wants=dbus.socket

[Service]
Type=oneshot
ExecStart=/bin/sh /vm/boot.sh
StandardInput=%s
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
`, input)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
