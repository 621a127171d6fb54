package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// modulePath is the module this harness belongs to; it identifies the
// repository root among the directories holding a go.mod.
const modulePath = "github.com/nri-cpumanager/nri-cpumanager"

// Away from the source tree (the VM suite runs the e2e suites' and the
// demo's binaries in its guest), three environment variables stand in for
// it:
const (
	// RepoRootEnv names the directory RepoRoot returns: the repository's
	// files the suites read (deploy/, test/scenarios/).
	RepoRootEnv = "NRI_E2E_REPO_ROOT"
	// OutputDirEnv names the default output directory instead of
	// <repository root>/_output.
	OutputDirEnv = "NRI_E2E_OUTPUT"
	// PrebuiltEnv names a directory of prebuilt binaries, which GoBuild
	// returns (by the last element of the package path) instead of
	// building, and Install takes containerd from.
	PrebuiltEnv = "NRI_E2E_PREBUILT"
)

// RepoRoot returns the root of the nri-cpumanager checkout: $NRI_E2E_REPO_ROOT
// when set, else from the location of this source file (known at compile
// time), then from `git rev-parse --show-toplevel` in the current
// directory. It never assumes the current directory is the root.
func RepoRoot() (string, error) {
	if dir := os.Getenv(RepoRootEnv); dir != "" {
		return dir, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if root, err := findModuleRoot(filepath.Dir(file)); err == nil {
			return root, nil
		}
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("find repository root: not built from the source tree and git rev-parse failed: %w", err)
	}
	root, err := findModuleRoot(strings.TrimSpace(string(out)))
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	return root, nil
}

// findModuleRoot walks up from dir to the directory whose go.mod declares
// modulePath.
func findModuleRoot(dir string) (string, error) {
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && declaresModule(string(data), modulePath) {
			return dir, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read %s: %w", filepath.Join(dir, "go.mod"), err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod declaring module %s above %s", modulePath, dir)
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod text declares module path.
func declaresModule(gomod, path string) bool {
	for _, line := range strings.Split(gomod, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" && strings.Trim(fields[1], `"`) == path {
			return true
		}
	}
	return false
}
