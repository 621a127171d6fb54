package harness

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// systemPath is searched in addition to $PATH: runc lives in /usr/sbin,
// which a non-login environment may leave out.
const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// busyboxCandidates are where Debian's busybox-static installs the binary.
var busyboxCandidates = []string{"/bin/busybox", "/usr/bin/busybox"}

// ensureSystemTools returns the paths of runc and a static busybox,
// installing the Debian packages runc and busybox-static when missing.
func ensureSystemTools(ctx context.Context, logf Logf) (runc, busybox string, err error) {
	runc, busybox = findRunc(), findStaticBusybox()
	var missing []string
	if runc == "" {
		missing = append(missing, "runc")
	}
	if busybox == "" {
		missing = append(missing, "busybox-static")
	}
	if len(missing) == 0 {
		return runc, busybox, nil
	}
	if err := aptInstall(ctx, logf, missing...); err != nil {
		return "", "", err
	}
	runc, busybox = findRunc(), findStaticBusybox()
	if runc == "" {
		return "", "", errors.New("runc not found in PATH after installing the runc package")
	}
	if busybox == "" {
		return "", "", errors.New("no statically linked busybox after installing busybox-static")
	}
	return runc, busybox, nil
}

// findRunc returns the absolute path of runc, or "" when there is none.
func findRunc() string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH") + ":" + systemPath) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "runc")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// findStaticBusybox returns the path of a statically linked busybox, or "".
// A dynamically linked one (Debian's "busybox" package) cannot run inside
// an image that has no libc.
func findStaticBusybox() string {
	for _, p := range busyboxCandidates {
		if static, err := isStaticELF(p); err == nil && static {
			return p
		}
	}
	return ""
}

// isStaticELF reports whether path is an ELF executable without a program
// interpreter, that is, one that needs no dynamic loader.
func isStaticELF(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// aptInstall installs packages without recommends, non-interactively. It
// refreshes the package lists first when one of them is unknown, and once
// more when the installation fails (stale lists point at files the mirror
// no longer has).
func aptInstall(ctx context.Context, logf Logf, packages ...string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("install %s: apt-get needs root", strings.Join(packages, ", "))
	}
	if !aptKnows(ctx, packages...) {
		if err := aptGet(ctx, logf, "update"); err != nil {
			return err
		}
	}
	install := append([]string{"install", "-y", "--no-install-recommends"}, packages...)
	if err := aptGet(ctx, logf, install...); err != nil {
		logf("apt-get install failed, refreshing package lists and retrying: %v", err)
		if err := aptGet(ctx, logf, "update"); err != nil {
			return err
		}
		return aptGet(ctx, logf, install...)
	}
	return nil
}

// aptKnows reports whether apt has an installation candidate for every
// package.
func aptKnows(ctx context.Context, packages ...string) bool {
	for _, pkg := range packages {
		out, err := exec.CommandContext(ctx, "apt-cache", "policy", pkg).Output()
		if err != nil || !bytes.Contains(out, []byte("Candidate:")) || bytes.Contains(out, []byte("Candidate: (none)")) {
			return false
		}
	}
	return true
}

// aptGet runs apt-get with args, waiting up to two minutes for the dpkg
// lock held by another installer.
func aptGet(ctx context.Context, logf Logf, args ...string) error {
	return AptGet(ctx, logf, "", args...)
}

// AptInstall installs Debian packages without recommends,
// non-interactively (root only), refreshing the package lists when one is
// unknown or the installation fails.
func AptInstall(ctx context.Context, logf Logf, packages ...string) error {
	return aptInstall(ctx, logf.orDiscard(), packages...)
}

// AptGet runs apt-get with args as aptInstall does, for other apt-get
// commands (download).
func AptGet(ctx context.Context, logf Logf, dir string, args ...string) error {
	args = append([]string{"-q", "-o", "DPkg::Lock::Timeout=120"}, args...)
	logf.orDiscard()("running apt-get %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "PATH="+os.Getenv("PATH")+":"+systemPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 20))
	}
	return nil
}

// StaticBusybox returns the path of a statically linked busybox, or "".
func StaticBusybox() string { return findStaticBusybox() }

// FindRunc returns the absolute path of runc, or "" when there is none.
func FindRunc() string { return findRunc() }

// AptKnows reports whether apt has an installation candidate for every
// package (with the package lists as they are).
func AptKnows(ctx context.Context, packages ...string) bool { return aptKnows(ctx, packages...) }
