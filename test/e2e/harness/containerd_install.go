package harness

import (
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

// ContainerdVersion is the containerd release the harness installs and runs.
const ContainerdVersion = "v2.4.2"

// containerdModule is the Go module containerd's commands are built from.
const containerdModule = "github.com/containerd/containerd/v2"

// containerdCommands are the packages installed from containerdModule.
var containerdCommands = []string{"containerd", "containerd-shim-runc-v2", "ctr"}

// containerdBinaries are the installed containerd commands.
type containerdBinaries struct {
	dir, containerd, shim, ctr string
}

// containerdRecipe names how ensureContainerd builds; change it with the
// build's flags so that cached binaries built otherwise are not reused.
const containerdRecipe = "go-install-cgo0-v1"

// ensureContainerd returns containerd, its runc shim and ctr at
// ContainerdVersion: from $NRI_E2E_PREBUILT when set, else from the build
// cache (entry containerd/<version>-…), building them first if needed: `go install` of that version without
// cgo, static binaries, which also run on the VM suite's guest whatever
// the C library of the machine that built them.
func ensureContainerd(ctx context.Context, logf Logf) (containerdBinaries, error) {
	if dir := os.Getenv(PrebuiltEnv); dir != "" {
		// Away from the source tree (the VM suite's guest): the prebuilt
		// ones, checked as a build is.
		for _, name := range containerdCommands {
			if version, err := moduleVersion(filepath.Join(dir, name)); err != nil || version != ContainerdVersion {
				return containerdBinaries{}, fmt.Errorf("prebuilt containerd in %s: %s is %q, want %s (%v)", dir, name, version, ContainerdVersion, err)
			}
		}
		return containerdBinariesIn(dir), nil
	}
	key := CacheKey(ContainerdVersion, runtime.GOOS, runtime.GOARCH, containerdRecipe)
	dir, err := CacheEntry(ctx, "containerd", key, logf, func(ctx context.Context, dir string) error {
		return buildContainerd(ctx, dir, logf)
	})
	if err != nil {
		return containerdBinaries{}, err
	}
	return containerdBinariesIn(dir), nil
}

// containerdBinariesIn returns the containerd commands in dir.
func containerdBinariesIn(dir string) containerdBinaries {
	return containerdBinaries{
		dir:        dir,
		containerd: filepath.Join(dir, "containerd"),
		shim:       filepath.Join(dir, "containerd-shim-runc-v2"),
		ctr:        filepath.Join(dir, "ctr"),
	}
}

// buildContainerd installs containerdCommands at ContainerdVersion into
// binDir and checks the version each binary reports.
func buildContainerd(ctx context.Context, binDir string, logf Logf) error {
	gobin, err := goCommand()
	if err != nil {
		return err
	}
	args := []string{"install"}
	for _, name := range containerdCommands {
		args = append(args, containerdModule+"/cmd/"+name+"@"+ContainerdVersion)
	}
	logf("building %s %s into %s; the first build takes a minute or two",
		strings.Join(containerdCommands, ", "), ContainerdVersion, binDir)
	start := time.Now()
	cmd := exec.CommandContext(ctx, gobin, args...)
	// A pkg@version install ignores the current module; GOWORK=off keeps a
	// workspace file from interfering, and Dir keeps the build out of the
	// caller's directory.
	cmd.Dir = binDir
	cmd.Env = append(os.Environ(), "GOBIN="+binDir, "GOWORK=off", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go install containerd %s: %w\n%s", ContainerdVersion, err, tail(string(out), 30))
	}
	for _, name := range containerdCommands {
		version, err := moduleVersion(filepath.Join(binDir, name))
		if err != nil {
			return fmt.Errorf("after go install: %w", err)
		}
		if version != ContainerdVersion {
			return fmt.Errorf("after go install: %s is %s, want %s", name, version, ContainerdVersion)
		}
	}
	logf("built containerd %s in %v", ContainerdVersion, time.Since(start).Round(time.Second))
	return nil
}

// moduleVersion returns the version of containerdModule a Go binary was
// built from, read from its embedded build information; a binary built
// with cgo is refused (it would be rebuilt static).
func moduleVersion(path string) (string, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read build info of %s: %w", path, err)
	}
	if info.Main.Path != containerdModule {
		return "", fmt.Errorf("%s is built from module %q, not %s", path, info.Main.Path, containerdModule)
	}
	if !builtWithoutCgo(info) {
		return "", fmt.Errorf("%s is built with cgo, not static", path)
	}
	return info.Main.Version, nil
}

// builtWithoutCgo reports whether a Go binary's build information says
// CGO_ENABLED=0.
func builtWithoutCgo(info *buildinfo.BuildInfo) bool {
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			return s.Value == "0"
		}
	}
	return false
}

// goCommand returns the go tool: from PATH, else the standard location.
func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	const standard = "/usr/local/go/bin/go"
	if _, err := os.Stat(standard); err == nil {
		return standard, nil
	}
	return "", fmt.Errorf("go tool not found in PATH nor at %s; it is needed to build containerd", standard)
}
