package harness

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// ensureContainerd installs containerd, its runc shim and ctr at
// ContainerdVersion into binDir unless all three are there already, built
// from that version without cgo: static binaries, which also run on the VM
// suite's guest whatever the C library of the machine that built them.
func ensureContainerd(ctx context.Context, binDir string, logf Logf) (containerdBinaries, error) {
	bins := containerdBinaries{
		dir:        binDir,
		containerd: filepath.Join(binDir, "containerd"),
		shim:       filepath.Join(binDir, "containerd-shim-runc-v2"),
		ctr:        filepath.Join(binDir, "ctr"),
	}
	var stale []string
	for _, name := range containerdCommands {
		version, err := moduleVersion(filepath.Join(binDir, name))
		if err != nil || version != ContainerdVersion {
			stale = append(stale, name)
		}
	}
	if len(stale) == 0 {
		return bins, nil
	}
	gobin, err := goCommand()
	if err != nil {
		return containerdBinaries{}, err
	}
	args := []string{"install"}
	for _, name := range containerdCommands {
		args = append(args, containerdModule+"/cmd/"+name+"@"+ContainerdVersion)
	}
	logf("building %s into %s (missing or another version: %s); the first build takes a minute or two",
		strings.Join(containerdCommands, ", "), binDir, strings.Join(stale, ", "))
	start := time.Now()
	cmd := exec.CommandContext(ctx, gobin, args...)
	// A pkg@version install ignores the current module; GOWORK=off keeps a
	// workspace file from interfering, and Dir keeps the build out of the
	// caller's directory.
	cmd.Dir = binDir
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return containerdBinaries{}, fmt.Errorf("create %s: %w", binDir, err)
	}
	cmd.Env = append(os.Environ(), "GOBIN="+binDir, "GOWORK=off", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return containerdBinaries{}, fmt.Errorf("go install containerd %s: %w\n%s", ContainerdVersion, err, tail(string(out), 30))
	}
	for _, name := range containerdCommands {
		version, err := moduleVersion(filepath.Join(binDir, name))
		if err != nil {
			return containerdBinaries{}, fmt.Errorf("after go install: %w", err)
		}
		if version != ContainerdVersion {
			return containerdBinaries{}, fmt.Errorf("after go install: %s is %s, want %s", name, version, ContainerdVersion)
		}
	}
	logf("built containerd %s in %v", ContainerdVersion, time.Since(start).Round(time.Second))
	return bins, nil
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
