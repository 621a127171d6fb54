package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// Assets are what a boot needs: the kernel, root file system and
// initramfs come from the build cache (harness.CacheDir), built once per
// version for every checkout on the machine; a run's files go under Dir.
type Assets struct {
	// Dir is <output>/vm: the binaries built from this checkout and each
	// boot's files.
	Dir string
	// QEMU is qemu-system-x86_64.
	QEMU string
	// Kernel is the guest kernel (vmlinuz), KernelRelease its release
	// (uname -r).
	Kernel, KernelRelease string
	// Initramfs is the guest's initramfs (an uncompressed newc cpio).
	Initramfs string
	// Rootfs is the guest's root file system, a debootstrap tree.
	Rootfs string
}

// AssetOptions configure EnsureAssets.
type AssetOptions struct {
	// OutputDir is the project-local directory for tools and caches.
	// Default: <repository root>/_output.
	OutputDir string
	// Logf receives progress messages; nil discards them.
	Logf harness.Logf
}

// ErrUnsupported marks what the host cannot provide at all: the guest is
// built from the host's Debian packages (a test skips on it).
var ErrUnsupported = errors.New("this host cannot build the VM suite's guest")

// hostPackages are the Debian packages installed on the host: QEMU, the
// root file system's builder, the initramfs's packer and the busybox of
// the initramfs.
var hostPackages = []struct{ pkg, binary string }{
	{"qemu-system-x86", "qemu-system-x86_64"},
	{"debootstrap", "debootstrap"},
	{"cpio", "cpio"},
}

// rootfsPackages are what debootstrap adds to the minimal base: runc (the
// OCI runtime containerd runs), busybox-static (the test images are built
// from it in the guest), systemd as init with D-Bus (the systemd cgroup
// driver talks to systemd over D-Bus), kmod, iproute2 and procps, and
// mount/umount from util-linux (in the base), which the kubelet calls.
var rootfsPackages = []string{"runc", "busybox-static", "systemd-sysv", "dbus", "kmod", "iproute2", "procps"}

// guestModules are the kernel modules the initramfs loads (with the
// modules they depend on): virtio PCI and 9p for the shared directories,
// overlay for the root, dummy for the kubelet's node address, virtio_blk
// for the disks on the NUMA nodes (Layout.NodeDisks).
var guestModules = []string{"virtio_pci", "9pnet_virtio", "9p", "overlay", "dummy", "virtio_blk"}

// EnsureAssets installs the host packages if needed and builds, or reuses
// from the build cache, the kernel, the root file system and the
// initramfs. It is serialised across processes by lock files.
func EnsureAssets(ctx context.Context, opts AssetOptions) (*Assets, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	out, err := harness.OutputDir(opts.OutputDir)
	if err != nil {
		return nil, err
	}
	a := &Assets{Dir: filepath.Join(out, "vm")}
	unlock, err := harness.LockFile(filepath.Join(a.Dir, "assets.lock"))
	if err != nil {
		return nil, fmt.Errorf("VM assets: %w", err)
	}
	defer unlock()

	start := time.Now()
	suite, mirror, err := debianSource()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, p := range hostPackages {
		if _, err := exec.LookPath(p.binary); err != nil {
			if _, err := os.Stat(filepath.Join("/usr/sbin", p.binary)); err != nil {
				missing = append(missing, p.pkg)
			}
		}
	}
	if harness.StaticBusybox() == "" {
		missing = append(missing, "busybox-static")
	}
	if len(missing) > 0 {
		if !harness.AptKnows(ctx, missing...) {
			if err := harness.AptGet(ctx, logf, "", "update"); err != nil {
				return nil, err
			}
			if !harness.AptKnows(ctx, missing...) {
				return nil, fmt.Errorf("%w: apt offers no %s", ErrUnsupported, strings.Join(missing, ", "))
			}
		}
		if err := harness.AptInstall(ctx, logf, missing...); err != nil {
			return nil, err
		}
	}
	if a.QEMU, err = exec.LookPath("qemu-system-x86_64"); err != nil {
		return nil, fmt.Errorf("VM assets: %w", err)
	}
	kernelDir, err := ensureKernel(ctx, logf)
	if err != nil {
		return nil, err
	}
	release, err := os.ReadFile(filepath.Join(kernelDir, "release"))
	if err != nil {
		return nil, fmt.Errorf("VM kernel: %w", err)
	}
	a.Kernel, a.KernelRelease = filepath.Join(kernelDir, "vmlinuz"), strings.TrimSpace(string(release))
	if a.Rootfs, err = ensureRootfs(ctx, suite, mirror, logf); err != nil {
		return nil, err
	}
	if a.Initramfs, err = ensureInitramfs(ctx, kernelDir, logf); err != nil {
		return nil, err
	}
	logf("VM assets ready in %v: kernel %s, root file system %s (Debian %s), initramfs %s",
		time.Since(start).Round(time.Millisecond), a.KernelRelease, a.Rootfs, suite, a.Initramfs)
	return a, nil
}

// debianSource returns the host's Debian release (its codename) and the
// URI of its Debian mirror, which debootstrap uses for the guest.
func debianSource() (suite, mirror string, err error) {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "", "", fmt.Errorf("VM assets: %w", err)
	}
	var id string
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, "=")
		v = strings.Trim(v, `"`)
		switch k {
		case "ID":
			id = v
		case "VERSION_CODENAME":
			suite = v
		}
	}
	if id != "debian" || suite == "" {
		return "", "", fmt.Errorf("%w: the guest is built from the host's Debian packages, and this host is %q (release %q), not Debian", ErrUnsupported, id, suite)
	}
	return suite, aptMirror(suite), nil
}

// defaultMirror is used when the host's apt sources name none.
const defaultMirror = "http://deb.debian.org/debian"

// aptMirror returns the URI of the host's apt source for suite (deb822
// .sources files or the one-line format), else defaultMirror.
func aptMirror(suite string) string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if uri := mirrorFromDeb822(string(data), suite); uri != "" {
			return uri
		}
	}
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	for _, f := range append([]string{"/etc/apt/sources.list"}, lists...) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if uri := mirrorFromOneLine(string(data), suite); uri != "" {
			return uri
		}
	}
	return defaultMirror
}

// mirrorFromDeb822 returns the first URI of a "Types: deb" stanza listing
// suite.
func mirrorFromDeb822(text, suite string) string {
	for _, stanza := range strings.Split(text, "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
				fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		if containsField(fields["Types"], "deb") && containsField(fields["Suites"], suite) {
			if uris := strings.Fields(fields["URIs"]); len(uris) > 0 {
				return uris[0]
			}
		}
	}
	return ""
}

// mirrorFromOneLine returns the URI of the first "deb URI suite …" line.
func mirrorFromOneLine(text, suite string) string {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "deb" {
			if strings.HasPrefix(f[1], "[") { // options
				for len(f) > 1 && !strings.HasSuffix(f[1], "]") {
					f = append(f[:1], f[2:]...)
				}
				f = append(f[:1], f[2:]...)
			}
			if len(f) >= 3 && f[2] == suite {
				return f[1]
			}
		}
	}
	return ""
}

func containsField(list, word string) bool {
	for _, f := range strings.Fields(list) {
		if f == word {
			return true
		}
	}
	return false
}

// vmAssetsRecipe names how the guest's kernel, root file system and
// initramfs are made; change it with the code that makes them so that
// cached ones made otherwise are not reused.
const vmAssetsRecipe = "v1"

// ensureKernel returns the build cache's entry vm-kernel/<release>-…:
// the kernel of the host's linux-image-amd64 (vmlinuz) and the guest's
// modules, from the package downloaded and unpacked without installing
// it.
func ensureKernel(ctx context.Context, logf harness.Logf) (string, error) {
	pkg, err := kernelPackage(ctx, logf)
	if err != nil {
		return "", err
	}
	release := strings.TrimPrefix(pkg, "linux-image-")
	key := harness.CacheKey(release, append([]string{pkg, vmAssetsRecipe}, guestModules...)...)
	return harness.CacheEntry(ctx, "vm-kernel", key, logf, func(ctx context.Context, kdir string) error {
		return buildKernel(ctx, pkg, release, kdir, logf)
	})
}

// buildKernel downloads the kernel package pkg and writes its vmlinuz and
// the guest's modules (uncompressed, with their load order) into kdir.
func buildKernel(ctx context.Context, pkg, release, kdir string, logf harness.Logf) error {
	logf("downloading %s (the guest kernel; not installed on the host)", pkg)
	tmp, err := os.MkdirTemp(kdir, "download-")
	if err != nil {
		return fmt.Errorf("VM kernel: %w", err)
	}
	defer os.RemoveAll(tmp)
	download := func() error {
		// apt's sandbox user cannot write into the cache: download as root.
		return harness.AptGet(ctx, logf, tmp, "-o", "APT::Sandbox::User=root", "download", pkg)
	}
	if err := download(); err != nil {
		logf("apt-get download failed, refreshing package lists and retrying: %v", err)
		if err := harness.AptGet(ctx, logf, "", "update"); err != nil {
			return err
		}
		if err := download(); err != nil {
			return err
		}
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("VM kernel: apt-get download %s left %d packages", pkg, len(debs))
	}
	tree := filepath.Join(tmp, "tree")
	if out, err := exec.CommandContext(ctx, "dpkg", "-x", debs[0], tree).CombinedOutput(); err != nil {
		return fmt.Errorf("VM kernel: dpkg -x %s: %w: %s", debs[0], err, bytes.TrimSpace(out))
	}
	if err := os.MkdirAll(filepath.Join(kdir, "modules"), 0o755); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(tree, "boot", "vmlinuz-"+release), filepath.Join(kdir, "vmlinuz")); err != nil {
		return fmt.Errorf("VM kernel: %w", err)
	}
	order, err := resolveModules(filepath.Join(tree, "lib", "modules", release), guestModules)
	if err != nil {
		return fmt.Errorf("VM kernel %s: %w", release, err)
	}
	var names []string
	for _, m := range order {
		if err := writeModule(ctx, m.path, filepath.Join(kdir, "modules", m.name+".ko")); err != nil {
			return fmt.Errorf("VM kernel: %w", err)
		}
		names = append(names, m.name)
	}
	// The load order, dependencies first.
	if err := os.WriteFile(filepath.Join(kdir, "modules", "order"), []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(kdir, "release"), []byte(release+"\n"), 0o644); err != nil {
		return err
	}
	logf("guest kernel %s with modules %s", release, strings.Join(names, " "))
	return os.RemoveAll(tmp)
}

// kernelPackage returns the versioned package linux-image-amd64 depends on
// (linux-image-<release>), refreshing apt's lists if it is unknown.
func kernelPackage(ctx context.Context, logf harness.Logf) (string, error) {
	find := func() (string, error) {
		out, err := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").Output()
		if err != nil {
			return "", fmt.Errorf("apt-cache depends linux-image-amd64: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
				return f[1], nil
			}
		}
		return "", errors.New("linux-image-amd64 depends on no linux-image-<release> package")
	}
	pkg, err := find()
	if err == nil {
		return pkg, nil
	}
	logf("%v; refreshing package lists", err)
	if err := harness.AptGet(ctx, logf, "", "update"); err != nil {
		return "", err
	}
	return find()
}

// writeModule writes the kernel module at src to dst uncompressed (the
// initramfs's busybox insmod takes plain .ko files).
func writeModule(ctx context.Context, src, dst string) error {
	var tool string
	switch {
	case strings.HasSuffix(src, ".ko"):
		return copyFile(src, dst)
	case strings.HasSuffix(src, ".ko.xz"):
		tool = "xz"
	case strings.HasSuffix(src, ".ko.zst"):
		tool = "zstd"
	case strings.HasSuffix(src, ".ko.gz"):
		tool = "gzip"
	default:
		return fmt.Errorf("kernel module %s: unknown compression", src)
	}
	out, err := exec.CommandContext(ctx, tool, "-dc", src).Output()
	if err != nil {
		return fmt.Errorf("decompress %s with %s: %w", src, tool, err)
	}
	return os.WriteFile(dst, out, 0o644)
}

// ensureRootfs returns the build cache's entry vm-rootfs/<suite>-…: a
// debootstrap of suite with rootfsPackages.
func ensureRootfs(ctx context.Context, suite, mirror string, logf harness.Logf) (string, error) {
	args := []string{"--variant=minbase", "--include=" + strings.Join(rootfsPackages, ","), suite}
	key := harness.CacheKey(suite, append(args, mirror, vmAssetsRecipe)...)
	return harness.CacheEntry(ctx, "vm-rootfs", key, logf, func(ctx context.Context, root string) error {
		logf("building the guest's root file system with debootstrap %s from %s (about a minute)", strings.Join(args, " "), mirror)
		cmd := exec.CommandContext(ctx, "debootstrap", append(args, root, mirror)...)
		cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("debootstrap %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
		}
		return os.WriteFile(filepath.Join(root, "etc", "nrivm-rootfs"), []byte(strings.Join(append(args, mirror), " ")+"\n"), 0o644)
	})
}

// ensureInitramfs returns the guest's initramfs for the kernel in
// kernelDir, from the build cache's entry vm-initramfs/…: busybox, the
// modules in their load order and /init, packed by cpio in the newc
// format.
func ensureInitramfs(ctx context.Context, kernelDir string, logf harness.Logf) (string, error) {
	busybox := harness.StaticBusybox()
	if busybox == "" {
		return "", errors.New("VM initramfs: no static busybox")
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return "", err
	}
	order, err := os.ReadFile(filepath.Join(kernelDir, "modules", "order"))
	if err != nil {
		return "", err
	}
	key := harness.CacheKey("initramfs", initScript, string(bb), string(order), filepath.Base(kernelDir), vmAssetsRecipe)
	dir, err := harness.CacheEntry(ctx, "vm-initramfs", key, logf, func(ctx context.Context, dir string) error {
		return buildInitramfs(ctx, dir, kernelDir, bb, order, logf)
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "initramfs.cpio"), nil
}

// buildInitramfs packs the initramfs into dir/initramfs.cpio.
func buildInitramfs(ctx context.Context, dir, kernelDir string, busybox, order []byte, logf harness.Logf) error {
	tmp, err := os.MkdirTemp("", "nrivm-initramfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, d := range []string{"bin", "mod", "proc", "sys", "dev", "lower", "upper", "newroot"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "bin", "busybox"), busybox, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "init"), []byte(initScript), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "mod", "order"), order, 0o644); err != nil {
		return err
	}
	for _, name := range strings.Fields(string(order)) {
		if err := copyFile(filepath.Join(kernelDir, "modules", name+".ko"), filepath.Join(tmp, "mod", name+".ko")); err != nil {
			return err
		}
	}
	path := filepath.Join(dir, "initramfs.cpio")
	cmd := exec.CommandContext(ctx, "sh", "-c", `find . | cpio --quiet -o -H newc > "$0"`, path)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("VM initramfs: cpio: %w: %s", err, bytes.TrimSpace(out))
	}
	logf("built the guest's initramfs %s", path)
	return nil
}

// copyFile copies src to dst (mode 0755 for executables, else 0644),
// through a temporary file renamed into place.
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
