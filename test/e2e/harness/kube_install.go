package harness

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// kubernetesRecipe names how InstallKubernetes builds; change it with the
// build's flags so that cached binaries built otherwise are not reused.
const kubernetesRecipe = "go-build-cgo0-v2"

// InstallKubernetes returns kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, kubectl and etcd at the versions
// test/kubernetes and test/kubernetes/etcd pin, from the build cache
// (entries kubernetes/<version>-… and etcd/<version>-…, keyed by those
// modules' go.mod and go.sum), building them first if needed. The first
// build takes about 15 minutes on 2 CPUs with an empty Go build cache,
// a few after the placement and lifecycle comparisons compiled most of
// the kubelet's packages (the same module, the same flags). Serialised
// across processes by lock files.
func InstallKubernetes(ctx context.Context, opts InstallOptions) (*KubernetesTools, error) {
	opts.Logf = opts.Logf.orDiscard()
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	kubeModDir, etcdModDir := filepath.Join(root, kubernetesModuleDir), filepath.Join(root, etcdModuleDir)
	version, err := requiredVersion(filepath.Join(kubeModDir, "go.mod"), kubernetesModule)
	if err != nil {
		return nil, err
	}
	etcdVersion, err := requiredVersion(filepath.Join(etcdModDir, "go.mod"), etcdModule)
	if err != nil {
		return nil, err
	}
	kubeKey, err := moduleCacheKey(version, kubeModDir)
	if err != nil {
		return nil, err
	}
	kubeDir, err := CacheEntry(ctx, "kubernetes", kubeKey, opts.Logf, func(ctx context.Context, dir string) error {
		return buildKubernetes(ctx, kubeModDir, dir, version, opts.Logf)
	})
	if err != nil {
		return nil, err
	}
	etcdKey, err := moduleCacheKey(etcdVersion, etcdModDir)
	if err != nil {
		return nil, err
	}
	etcdDir, err := CacheEntry(ctx, "etcd", etcdKey, opts.Logf, func(ctx context.Context, dir string) error {
		return buildEtcd(ctx, etcdModDir, dir, etcdVersion, opts.Logf)
	})
	if err != nil {
		return nil, err
	}
	return &KubernetesTools{
		APIServer:         filepath.Join(kubeDir, "kube-apiserver"),
		ControllerManager: filepath.Join(kubeDir, "kube-controller-manager"),
		Scheduler:         filepath.Join(kubeDir, "kube-scheduler"),
		Kubelet:           filepath.Join(kubeDir, "kubelet"),
		Kubectl:           filepath.Join(kubeDir, "kubectl"),
		Etcd:              filepath.Join(etcdDir, "etcd"),
		Version:           version,
		EtcdVersion:       etcdVersion,
	}, nil
}

// moduleCacheKey keys a build cache entry built from the module at dir:
// the version, the platform, the recipe and the module's go.mod and
// go.sum (which pin every dependency).
func moduleCacheKey(version, dir string) (string, error) {
	parts := []string{version, runtime.GOOS, runtime.GOARCH, kubernetesRecipe}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("read pinned versions: %w", err)
		}
		parts = append(parts, string(data))
	}
	return CacheKey(version, parts...), nil
}

// buildKubernetes builds kubernetesCommands at version into dir from the
// module at modDir and checks what each reports.
func buildKubernetes(ctx context.Context, modDir, dir, version string, logf Logf) error {
	pkgs := make([]string, len(kubernetesCommands))
	for i, name := range kubernetesCommands {
		pkgs[i] = kubernetesModule + "/cmd/" + name
	}
	logf("building Kubernetes %s (%s) into %s; a first build takes up to 15 minutes on 2 CPUs", version, strings.Join(kubernetesCommands, ", "), dir)
	start := time.Now()
	// No -trimpath: the packages compile exactly as test/kubernetes's tests
	// compile them (make placement-diff and lifecycle-diff, also with
	// CGO_ENABLED=0), so that one compilation serves both.
	args := append([]string{"build", "-ldflags", kubernetesLDFlags(version), "-o", dir + "/"}, pkgs...)
	if err := goBuildIn(ctx, modDir, args...); err != nil {
		return fmt.Errorf("build Kubernetes %s: %w", version, err)
	}
	for _, name := range kubernetesCommands {
		if err := checkKubernetesBinary(ctx, filepath.Join(dir, name), name, version); err != nil {
			return fmt.Errorf("after building: %w", err)
		}
	}
	logf("built Kubernetes %s in %v", version, time.Since(start).Round(time.Second))
	return nil
}

// buildEtcd builds etcd at version into dir from the module at modDir.
func buildEtcd(ctx context.Context, modDir, dir, version string, logf Logf) error {
	logf("building etcd %s into %s; a first build takes about 3 minutes", version, dir)
	start := time.Now()
	bin := filepath.Join(dir, "etcd")
	if err := goBuildIn(ctx, modDir, "build", "-o", bin, etcdModule); err != nil {
		return fmt.Errorf("build etcd %s: %w", version, err)
	}
	if err := checkEtcdBinary(ctx, bin, version); err != nil {
		return fmt.Errorf("after building: %w", err)
	}
	logf("built etcd %s in %v", version, time.Since(start).Round(time.Second))
	return nil
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
