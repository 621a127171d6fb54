package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
)

// GoBuild builds the main package pkg of this repository (an import path,
// or a path relative to the repository root such as "./cmd/nri-cpumanager")
// into <outputDir>/e2e/bin/<last element of pkg> and returns the binary's
// path. An empty outputDir means <repository root>/_output. The binary is
// renamed into place, so concurrent builds do not see each other's partial
// files.
func GoBuild(ctx context.Context, outputDir, pkg string) (string, error) {
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
	tmp := bin + ".tmp-" + strconv.Itoa(os.Getpid())
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", tmp, pkg)
	cmd.Dir = root
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
