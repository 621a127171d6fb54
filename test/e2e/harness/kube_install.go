package harness

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The Go modules the Kubernetes binaries are built from, relative to the
// repository root: test/kubernetes pins k8s.io/kubernetes (its go.mod
// replaces the staging modules with their published versions),
// test/kubernetes/etcd pins etcd.
const (
	kubernetesModuleDir = "test/kubernetes"
	etcdModuleDir       = "test/kubernetes/etcd"
	kubernetesModule    = "k8s.io/kubernetes"
	etcdModule          = "go.etcd.io/etcd/server/v3"
)

// kubernetesCommands are the commands a single-node cluster runs.
var kubernetesCommands = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"}

// KubernetesTools are the absolute paths of a single-node cluster's
// binaries and the versions they were built at.
type KubernetesTools struct {
	APIServer, ControllerManager, Scheduler, Kubelet, Kubectl, Etcd string
	// Version is the Kubernetes release ("v1.36.3"), EtcdVersion etcd's.
	Version, EtcdVersion string
}

// InstallKubernetes builds kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, kubectl and etcd into <OutputDir>/k8s unless they are there already at the
// versions test/kubernetes and test/kubernetes/etcd pin. The first build
// takes about 20 minutes on 2 CPUs; later ones reuse the binaries, or the Go
// build cache after a version change. Serialised across processes by a
// lock file.
func InstallKubernetes(ctx context.Context, opts InstallOptions) (*KubernetesTools, error) {
	opts.Logf = opts.Logf.orDiscard()
	out, err := resolveOutputDir(opts.OutputDir)
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(out, "k8s")
	lock, err := lockFile(filepath.Join(dir, "build.lock"))
	if err != nil {
		return nil, fmt.Errorf("install Kubernetes: %w", err)
	}
	defer lock.Unlock()

	version, err := requiredVersion(filepath.Join(root, kubernetesModuleDir, "go.mod"), kubernetesModule)
	if err != nil {
		return nil, err
	}
	etcdVersion, err := requiredVersion(filepath.Join(root, etcdModuleDir, "go.mod"), etcdModule)
	if err != nil {
		return nil, err
	}
	tools := &KubernetesTools{
		APIServer:         filepath.Join(dir, "kube-apiserver"),
		ControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Scheduler:         filepath.Join(dir, "kube-scheduler"),
		Kubelet:           filepath.Join(dir, "kubelet"),
		Kubectl:           filepath.Join(dir, "kubectl"),
		Etcd:              filepath.Join(dir, "etcd"),
		Version:           version,
		EtcdVersion:       etcdVersion,
	}

	var stale []string
	for _, name := range kubernetesCommands {
		if err := checkKubernetesBinary(ctx, filepath.Join(dir, name), name, version); err != nil {
			opts.Logf("%s: %v", name, err)
			stale = append(stale, name)
		}
	}
	if len(stale) > 0 {
		pkgs := make([]string, len(stale))
		for i, name := range stale {
			pkgs[i] = kubernetesModule + "/cmd/" + name
		}
		opts.Logf("building Kubernetes %s (%s) into %s; a first build takes about 20 minutes on 2 CPUs", version, strings.Join(stale, ", "), dir)
		start := time.Now()
		args := append([]string{"build", "-trimpath", "-ldflags", kubernetesLDFlags(version), "-o", dir + "/"}, pkgs...)
		if err := goBuildIn(ctx, filepath.Join(root, kubernetesModuleDir), args...); err != nil {
			return nil, fmt.Errorf("build Kubernetes %s: %w", version, err)
		}
		for _, name := range stale {
			if err := checkKubernetesBinary(ctx, filepath.Join(dir, name), name, version); err != nil {
				return nil, fmt.Errorf("after building: %w", err)
			}
		}
		opts.Logf("built Kubernetes %s in %v", version, time.Since(start).Round(time.Second))
	}
	if err := checkEtcdBinary(ctx, tools.Etcd, etcdVersion); err != nil {
		opts.Logf("etcd: %v", err)
		opts.Logf("building etcd %s into %s; a first build takes about 3 minutes", etcdVersion, dir)
		start := time.Now()
		if err := goBuildIn(ctx, filepath.Join(root, etcdModuleDir), "build", "-trimpath", "-o", tools.Etcd, etcdModule); err != nil {
			return nil, fmt.Errorf("build etcd %s: %w", etcdVersion, err)
		}
		if err := checkEtcdBinary(ctx, tools.Etcd, etcdVersion); err != nil {
			return nil, fmt.Errorf("after building: %w", err)
		}
		opts.Logf("built etcd %s in %v", etcdVersion, time.Since(start).Round(time.Second))
	}
	return tools, nil
}

// kubernetesLDFlags stamps the release into the binaries as Kubernetes'
// own build does; without it they report v0.0.0-master.
func kubernetesLDFlags(version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags, "-X", pkg+".gitVersion="+version, "-X", pkg+".gitMajor="+major, "-X", pkg+".gitMinor="+minor)
	}
	return strings.Join(flags, " ")
}

// checkKubernetesBinary returns nil when the binary at path is the command
// name of Kubernetes at version, stamped with it.
func checkKubernetesBinary(ctx context.Context, path, name, version string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("not built yet or unreadable: %w", err)
	}
	if want := kubernetesModule + "/cmd/" + name; info.Path != want {
		return fmt.Errorf("%s is %s, not %s", path, info.Path, want)
	}
	if !builtWithoutCgo(info) {
		return fmt.Errorf("%s is built with cgo, not static", path)
	}
	args := []string{"--version"}
	if name == "kubectl" {
		args = []string{"version", "--client"}
	}
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	if !bytes.Contains(out, []byte(version+"\n")) && !bytes.HasSuffix(bytes.TrimSpace(out), []byte(version)) {
		return fmt.Errorf("%s reports %q, want %s", path, strings.TrimSpace(string(out)), version)
	}
	return nil
}

// checkEtcdBinary returns nil when the binary at path is etcd at version.
func checkEtcdBinary(ctx context.Context, path, version string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("not built yet or unreadable: %w", err)
	}
	if info.Path != etcdModule {
		return fmt.Errorf("%s is %s, not %s", path, info.Path, etcdModule)
	}
	if !builtWithoutCgo(info) {
		return fmt.Errorf("%s is built with cgo, not static", path)
	}
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w: %s", path, err, bytes.TrimSpace(out))
	}
	if want := "etcd Version: " + strings.TrimPrefix(version, "v") + "\n"; !bytes.Contains(out, []byte(want)) {
		return fmt.Errorf("%s reports %q, want %s", path, strings.TrimSpace(string(out)), version)
	}
	return nil
}

// goBuildIn runs the go tool with args in the module at dir.
func goBuildIn(ctx context.Context, dir string, args ...string) error {
	gobin, err := goCommand()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, gobin, args...)
	cmd.Dir = dir
	// Static binaries (as Kubernetes releases them): they also run on the
	// VM suite's guest, whatever the C library of the machine that built
	// them.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, tail(string(out), 30))
	}
	return nil
}

// requiredVersion returns the version of module that the go.mod at path
// requires.
func requiredVersion(path, module string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read pinned versions: %w", err)
	}
	v, ok := parseRequiredVersion(string(data), module)
	if !ok {
		return "", fmt.Errorf("%s does not require %s", path, module)
	}
	return v, nil
}

// parseRequiredVersion finds "module version" in a go.mod's require
// directives (single-line or in a block), ignoring replace directives.
func parseRequiredVersion(gomod, module string) (string, bool) {
	inRequire := false
	for _, line := range strings.Split(gomod, "\n") {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case f[0] == "require" && len(f) == 2 && f[1] == "(":
			inRequire = true
			continue
		case inRequire && f[0] == ")":
			inRequire = false
			continue
		case f[0] == "require" && len(f) == 3:
			f = f[1:]
		case !inRequire:
			continue
		}
		if len(f) == 2 && f[0] == module {
			return f[1], true
		}
	}
	return "", false
}
