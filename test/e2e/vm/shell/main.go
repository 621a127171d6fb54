// Command shell boots the VM suite's guest with a shell on its serial
// console, for debugging: `make vm-shell` (as root). It builds or reuses
// what the suite uses (kernel, root file system and initramfs from the build
// cache, containerd, the plugin and
// the guest tests) and puts them where the suite does: the binaries in
// /vm/bin, the guest tests as /vm/guest.test, with the suite's environment
// exported, so that inside the guest
//
//	/vm/guest.test -test.v -test.run TestRestarts
//
// runs a guest test as the suite would. `exit` powers the guest off;
// Ctrl-A X leaves QEMU at once.
//
// Environment: VM_INIT=systemd boots systemd as init (the systemd cgroup
// driver; default: busybox, cgroupfs); VM_CMDLINE adds kernel parameters
// (e.g. isolcpus=12-15, which the guest tests then expect); VM_KUBE=1
// adds the Kubernetes boot's files (building Kubernetes the first time);
// NRIVM_ACCEL=kvm|tcg forces the accelerator.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/vm"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "vm-shell: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := harness.RequireRoot(); err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "vm-shell: "+format+"\n", args...) }
	a, err := vm.EnsureAssets(ctx, vm.AssetOptions{Logf: logf})
	if err != nil {
		return err
	}
	bins, err := vm.BuildBinaries(ctx, a, "", logf)
	if err != nil {
		return err
	}
	init, driver := vm.BusyboxInit, "cgroupfs"
	if os.Getenv("VM_INIT") == "systemd" {
		init, driver = vm.SystemdInit, "systemd"
	}
	files := bins.Files()
	if os.Getenv("VM_KUBE") == "1" {
		kube, err := vm.KubernetesFiles(ctx, a, logf)
		if err != nil {
			return err
		}
		for k, v := range kube {
			files[k] = v
		}
	}
	accel := vm.DetectAccel(ctx, a, vm.Production, filepath.Join(a.Dir, "runs", "kvm-probe"), logf)
	logf("accelerator %s (%s)", accel.Name, accel.Why)
	dir := filepath.Join(a.Dir, "runs", "shell")
	payload := filepath.Join(dir, "payload")
	env := map[string]string{"NRIVM_GUEST": "1", "NRIVM_DRIVER": driver}
	cmdline := strings.Fields(os.Getenv("VM_CMDLINE"))
	for _, p := range cmdline {
		if cpus, ok := strings.CutPrefix(p, "isolcpus="); ok {
			env["NRIVM_ISOLATED"] = cpus // what the guest tests expect
		}
	}
	err = vm.WritePayload(vm.PayloadOptions{Dir: payload, Init: init, Files: files, Env: env})
	if err != nil {
		return err
	}
	logf("booting (%s init, %s driver); the guest's shell comes on this terminal; Ctrl-A X quits QEMU", init, driver)
	_, err = vm.Boot(ctx, vm.BootOptions{
		Assets: a, Accel: accel, Layout: vm.Production, Init: init, Payload: payload,
		Cmdline: cmdline, Timeout: 24 * time.Hour,
		ConsoleLog: filepath.Join(dir, "console.log"), Interactive: true,
	})
	return err
}
