// Package vm runs the plugin on a production-shaped node: a QEMU guest
// with 16 vCPUs in 2 sockets of 4 cores with 2 threads each and 2 NUMA
// nodes, booted from a Debian kernel on cgroup v2, with containerd, runc
// and the plugin, under either cgroup driver (cgroupfs with a busybox
// init, or systemd as the guest's init as on kubeadm nodes), and with a
// real kubelet.
//
// Everything is built on the host: the kernel, root file system and
// initramfs once per version into the build cache outside the checkout
// (harness.CacheDir), the binaries under _output/vm. The Debian
// packages it needs come from apt (qemu-system-x86, debootstrap, cpio and
// busybox-static installed; linux-image-amd64 only downloaded and unpacked,
// never installed into the host's /boot), the guest's root file system
// from debootstrap, its initramfs from busybox and the kernel's 9p and
// overlay modules; containerd, the plugin and the test program are static
// Go binaries.
//
// The guest's root is the cached file system, shared read-only over 9p
// under a tmpfs overlay, so every boot starts clean; a second 9p share
// (the "payload": binaries, the boot script, results) is its /vm. The
// guest has no network device: only its own loopback, and a dummy
// interface that gives the kubelet a node address. The tests run inside
// the guest as a statically built Go test binary (package
// test/e2e/vm/guest) that drives CRI like the kubelet; its output comes
// back on the serial console (lines prefixed "NRIVM| ") and in the
// payload's results directory, and the host-side test (vm_test.go, build
// tag e2e) fails with the guest's output when a guest test fails.
//
// KVM is used where it works; where /dev/kvm is missing or a probe boot
// does not reach the guest's init in time (as on this project's machine,
// whose nested KVM hangs), QEMU emulates the CPUs (TCG). An emulated guest
// can stop, rarely: a watchdog kills one that does not reach its boot
// script in time or goes silent (it prints a heartbeat while its tests
// run), and the run boots again, up to three times (suite.go).
package vm
