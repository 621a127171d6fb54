package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// GoBuild builds the main package pkg of this repository (a path relative
// to the repository root such as "./cmd/nri-cpumanager" or
// "./test/e2e/internal/pinall", in whichever of the repository's modules
// holds it) into <outputDir>/e2e/bin/<last element of pkg> and returns the
// binary's path. An empty outputDir means <repository root>/_output. The
// binary is renamed into place, so concurrent builds do not see each
// other's partial files.
func GoBuild(ctx context.Context, outputDir, pkg string) (string, error) {
	return GoBuildEnv(ctx, outputDir, pkg, nil)
}

// GoBuildEnv is GoBuild with env added to the go tool's environment (e.g.
// CGO_ENABLED=0 for a binary that must run on another machine).
func GoBuildEnv(ctx context.Context, outputDir, pkg string, env []string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := resolveOutputDir(outputDir)
	if err != nil {
		return "", err
	}
	gobin, err := goCommand()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(out, "e2e", "bin", path.Base(pkg))
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	modDir, rel, err := moduleOf(root, pkg)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	tmp := bin + ".tmp-" + strconv.Itoa(os.Getpid())
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", tmp, rel)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, tail(string(out), 30))
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	return bin, nil
}

// moduleOf returns the directory of the module of the repository that
// holds the package at pkg (relative to root), and pkg relative to that
// module ("./…"): the nearest directory at or above the package with a
// go.mod, not above root.
func moduleOf(root, pkg string) (dir, rel string, err error) {
	pkgDir := filepath.Join(root, filepath.FromSlash(pkg))
	if r, err := filepath.Rel(root, pkgDir); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", "", fmt.Errorf("%s is not in the repository %s", pkg, root)
	}
	for dir = pkgDir; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if dir == root || dir == filepath.Dir(dir) {
			return "", "", fmt.Errorf("no go.mod at or above %s within %s", pkgDir, root)
		}
	}
	r, err := filepath.Rel(dir, pkgDir)
	if err != nil {
		return "", "", err
	}
	return dir, "./" + filepath.ToSlash(r), nil
}
