package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Tools are the absolute paths of the binaries the harness runs.
type Tools struct {
	// Containerd is the containerd daemon; the runc shim sits next to it,
	// where containerd looks for it first.
	Containerd string
	// Shim is containerd-shim-runc-v2.
	Shim string
	// Ctr is containerd's command line client, used to import images.
	Ctr string
	// Runc is the OCI runtime the shim runs (found through PATH).
	Runc string
	// Busybox is the statically linked busybox the test images are built from.
	Busybox string
}

// InstallOptions configure Install.
type InstallOptions struct {
	// OutputDir is the project-local directory for built tools and caches.
	// Default: <repository root>/_output.
	OutputDir string
	// Logf receives progress messages; nil discards them.
	Logf Logf
}

// Install makes sure runc, a static busybox and containerd, its runc shim
// and ctr at ContainerdVersion are present, installing what is missing:
// runc and busybox-static with apt-get, containerd with `go install` into
// the build cache (CacheDir). It is idempotent and serialised across
// processes by lock files, so concurrent test binaries may call it.
func Install(ctx context.Context, opts InstallOptions) (*Tools, error) {
	opts.Logf = opts.Logf.orDiscard()
	out, err := resolveOutputDir(opts.OutputDir)
	if err != nil {
		return nil, err
	}
	lock, err := lockFile(filepath.Join(out, "e2e", "install.lock"))
	if err != nil {
		return nil, fmt.Errorf("install e2e tools: %w", err)
	}
	defer lock.Unlock()

	start := time.Now()
	runc, busybox, err := ensureSystemTools(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	bin, err := ensureContainerd(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	opts.Logf("e2e tools ready in %v (containerd %s in %s)", time.Since(start).Round(time.Millisecond), ContainerdVersion, bin.dir)
	return &Tools{
		Containerd: bin.containerd,
		Shim:       bin.shim,
		Ctr:        bin.ctr,
		Runc:       runc,
		Busybox:    busybox,
	}, nil
}

// resolveOutputDir returns dir, or $NRI_E2E_OUTPUT or else
// <repository root>/_output when dir is empty, as an absolute path.
func resolveOutputDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(OutputDirEnv)
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "_output")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve output directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("create output directory: %w", err)
	}
	return abs, nil
}

// OutputDir returns dir, or <repository root>/_output when dir is empty,
// as an absolute path, creating it.
func OutputDir(dir string) (string, error) { return resolveOutputDir(dir) }
