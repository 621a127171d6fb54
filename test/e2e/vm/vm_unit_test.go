package vm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestQEMUArgs(t *testing.T) {
	got := strings.Join(Production.qemuArgs(), " ")
	want := "-cpu Skylake-Server -smp 16,sockets=2,cores=4,threads=2 -m 4096M " +
		"-object memory-backend-ram,id=m0,size=2048M -numa node,nodeid=0,cpus=0-7,memdev=m0 " +
		"-object memory-backend-ram,id=m1,size=2048M -numa node,nodeid=1,cpus=8-15,memdev=m1 " +
		"-blockdev driver=null-co,node-name=disk0,size=1048576,read-zeroes=on " +
		"-device pxb,id=pxb0,bus=pci.0,bus_nr=32,numa_node=0 -device virtio-blk-pci,drive=disk0,bus=pxb0,serial=numa-node-0 " +
		"-blockdev driver=null-co,node-name=disk1,size=1048576,read-zeroes=on " +
		"-device pxb,id=pxb1,bus=pci.0,bus_nr=64,numa_node=1 -device virtio-blk-pci,drive=disk1,bus=pxb1,serial=numa-node-1"
	if got != want {
		t.Errorf("qemuArgs =\n%s\nwant\n%s", got, want)
	}
	if Production.CPUs() != 16 {
		t.Errorf("CPUs() = %d", Production.CPUs())
	}
}

func TestAptMirror(t *testing.T) {
	deb822 := `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
`
	if got := mirrorFromDeb822(deb822, "bookworm"); got != "http://deb.debian.org/debian" {
		t.Errorf("deb822: %q", got)
	}
	if got := mirrorFromDeb822(deb822, "trixie"); got != "" {
		t.Errorf("deb822, another suite: %q", got)
	}
	oneLine := "# comment\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n"
	if got := mirrorFromOneLine(oneLine, "bookworm"); got != "http://mirror.example/debian" {
		t.Errorf("one-line: %q", got)
	}
}

func TestModuleName(t *testing.T) {
	for file, want := range map[string]string{"9pnet_virtio.ko": "9pnet_virtio", "virtio-pci.ko.xz": "virtio_pci", "dummy.ko.zst": "dummy"} {
		if got, ok := moduleName(file); !ok || got != want {
			t.Errorf("moduleName(%s) = %q, %v", file, got, ok)
		}
	}
	if _, ok := moduleName("modules.order"); ok {
		t.Error("modules.order is a module")
	}
}

func TestBootScript(t *testing.T) {
	s := bootScript(PayloadOptions{Init: SystemdInit, Env: map[string]string{"B": "it's", "A": "1"},
		Command: []string{"/vm/guest.test", "-test.run", "^(A|B)$"}})
	for _, want := range []string{
		"export A='1'\nexport B='it'\\''s'\n",
		"ip addr add 10.0.2.15/24 dev dummy0",
		`{ '/vm/guest.test' '-test.run' '^(A|B)$' 2>&1; echo "NRIVM-EXIT $?"; } | tee /vm/results/output.txt | sed -u 's/^/NRIVM| /'`,
		"sync\n/bin/busybox poweroff -f\n",
		`( while sleep 15; do echo "NRIVM-ALIVE $(cut -d' ' -f1 /proc/uptime)"; done ) &`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("boot.sh lacks %q:\n%s", want, s)
		}
	}
	if shell := bootScript(PayloadOptions{Init: BusyboxInit}); !strings.Contains(shell, "setsid -w -c /bin/bash -l") {
		t.Errorf("boot.sh without a command starts no shell:\n%s", shell)
	}
}

func TestParseOutput(t *testing.T) {
	out := `=== RUN   TestTopology
--- PASS: TestTopology (0.05s)
=== RUN   TestA
    a_test.go:1: something
    --- FAIL: TestA/sub (1.00s)
--- FAIL: TestA (2.50s)
=== RUN   TestB
--- SKIP: TestB (0.00s)
    b_test.go:3: needs isolcpus
FAIL
NRIVM-EXIT 1
`
	exit, tests := parseOutput(out)
	want := []TestOutcome{{"TestTopology", "PASS", "0.05s"}, {"TestA", "FAIL", "2.50s"}, {"TestB", "SKIP", "0.00s"}}
	if exit != 1 || !reflect.DeepEqual(tests, want) {
		t.Errorf("parseOutput = %d, %+v; want 1, %+v", exit, tests, want)
	}
	if exit, _ := parseOutput("=== RUN   TestA\n"); exit != -1 {
		t.Errorf("no exit line: %d, want -1", exit)
	}
}

// TestBootWatchdog boots a stand-in for QEMU (a shell script printing
// what a guest would) and checks the watchdog: a guest that never reaches
// its boot script is Hung, one whose boot script goes silent after it is
// Stalled (the kernel's messages, such as RCU stall reports, do not count),
// one whose QEMU dies of a signal Crashed, one that keeps printing its
// heartbeat until it powers off is none of these.
func TestBootWatchdog(t *testing.T) {
	tests := []struct {
		name                   string
		script                 string
		hung, stalled, crashed bool
	}{
		{"never boots", "echo kernel; exec sleep 30", true, false, false},
		{"silent after booting", "echo NRIVM-BOOTED; echo NRIVM-ALIVE 1; exec sleep 30", false, true, false},
		{"QEMU crashes", "echo NRIVM-BOOTED; kill -SEGV $$", false, false, true},
		{"only the kernel's stall reports after booting", `echo NRIVM-BOOTED; echo NRIVM-ALIVE 1
while :; do sleep 0.1; echo "[   40.17] rcu: INFO: rcu_preempt self-detected stall on CPU"; done`, false, true, false},
		{"heartbeat until power-off", `echo NRIVM-BOOTED
for i in 1 2 3 4 5 6 7 8; do sleep 0.1; echo "NRIVM-ALIVE $i"; done
echo "NRIVM| --- PASS: TestA (0.80s)"; echo "NRIVM| NRIVM-EXIT 0"`, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			qemu := filepath.Join(dir, "qemu")
			if err := os.WriteFile(qemu, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := Boot(context.Background(), BootOptions{
				Assets: &Assets{QEMU: qemu}, Accel: Accel{Name: "tcg"}, Layout: Production, Init: BusyboxInit,
				Payload: dir, ConsoleLog: filepath.Join(dir, "console.log"),
				Timeout: 20 * time.Second, StartTimeout: 500 * time.Millisecond, StallTimeout: 500 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Hung != tc.hung || res.Stalled != tc.stalled || (res.Crashed != "") != tc.crashed || res.TimedOut {
				t.Errorf("hung %v, stalled %v, crashed %q, timed out %v after %v; want hung %v, stalled %v, crashed %v",
					res.Hung, res.Stalled, res.Crashed, res.TimedOut, time.Since(start).Round(time.Millisecond), tc.hung, tc.stalled, tc.crashed)
			}
			if tc.stalled && !strings.Contains((&RunResult{Boot: res}).Failure(), "printed nothing, not even its heartbeat") {
				t.Errorf("failure of a stalled boot: %q", (&RunResult{Boot: res}).Failure())
			}
		})
	}
}

// TestBootAgainWhenStopped: a boot that hangs or stalls is repeated, up to
// the limit; one that ran (whatever its tests said) or failed to start
// QEMU is not.
func TestBootAgainWhenStopped(t *testing.T) {
	hung, stalled, crashed, ran := &BootResult{Hung: true}, &BootResult{Stalled: true}, &BootResult{Crashed: "segmentation fault"}, &BootResult{}
	broken := errors.New("QEMU failed")
	tests := []struct {
		name      string
		boots     []*BootResult // nil: the boot returns broken
		wantBoots int
		want      *BootResult
		wantErr   error
	}{
		{"runs at once", []*BootResult{ran}, 1, ran, nil},
		{"hangs, then runs", []*BootResult{hung, ran}, 2, ran, nil},
		{"hangs, stalls, then runs", []*BootResult{hung, stalled, ran}, 3, ran, nil},
		{"QEMU crashes, then runs", []*BootResult{crashed, ran}, 2, ran, nil},
		{"stops three times", []*BootResult{stalled, hung, stalled, ran}, 3, stalled, nil},
		{"QEMU fails", []*BootResult{nil, ran}, 1, nil, broken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			booted, reported := 0, 0
			res, err := bootAgainWhenStopped(func() (*BootResult, error) {
				b := tc.boots[booted]
				booted++
				if b == nil {
					return nil, broken
				}
				return b, nil
			}, 3, func(attempt int, res *BootResult) {
				reported++
				if attempt != reported || !res.stopped() {
					t.Errorf("stopped(%d, %+v) as report %d", attempt, res, reported)
				}
			})
			if booted != tc.wantBoots || res != tc.want || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("%d boots, result %+v, err %v; want %d boots, %+v, %v", booted, res, err, tc.wantBoots, tc.want, tc.wantErr)
			}
			if reported != booted-1 && tc.wantErr == nil {
				t.Errorf("%d stops reported for %d boots", reported, booted)
			}
		})
	}
}

func TestGuestGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct{ vcpus, host, want int }{
		{16, 2, 2},   // emulated on a small host: the host's CPUs
		{16, 64, 16}, // a big host: every vCPU
		{16, 0, 1},   // never below one
	} {
		if got := guestGOMAXPROCS(tc.vcpus, tc.host); got != tc.want {
			t.Errorf("guestGOMAXPROCS(%d vCPUs, %d host CPUs) = %d, want %d", tc.vcpus, tc.host, got, tc.want)
		}
	}
}
