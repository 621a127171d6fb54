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
// other's partial files. With $NRI_E2E_PREBUILT set, it returns the
// binary of that name there instead, without building.
func GoBuild(ctx context.Context, outputDir, pkg string) (string, error) {
	if dir := os.Getenv(PrebuiltEnv); dir != "" {
		bin := filepath.Join(dir, path.Base(pkg))
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("prebuilt %s: %w", pkg, err)
		}
		return bin, nil
	}
	out, err := resolveOutputDir(outputDir)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(out, "e2e", "bin", path.Base(pkg))
	return bin, GoBuildTo(ctx, pkg, bin, BuildOptions{})
}

// BuildOptions tune GoBuildTo.
type BuildOptions struct {
	// Test builds the package's test binary (go test -c).
	Test bool
	// Tags are build tags.
	Tags []string
	// Static builds without cgo (CGO_ENABLED=0): a binary that runs on
	// another machine whatever its C library.
	Static bool
}

// GoBuildTo builds pkg (see GoBuild) into the file bin.
func GoBuildTo(ctx context.Context, pkg, bin string, opts BuildOptions) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	gobin, err := goCommand()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	modDir, rel, err := moduleOf(root, pkg)
	if err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	verb := []string{"build"}
	if opts.Test {
		verb = []string{"test", "-c"}
	}
	args := verb
	if len(opts.Tags) > 0 {
		args = append(args, "-tags", strings.Join(opts.Tags, ","))
	}
	tmp := bin + ".tmp-" + strconv.Itoa(os.Getpid())
	cmd := exec.CommandContext(ctx, gobin, append(args, "-o", tmp, rel)...)
	cmd.Dir = modDir
	cmd.Env = os.Environ()
	if opts.Static {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("go %s %s: %w\n%s", strings.Join(verb, " "), pkg, err, tail(string(out), 30))
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	return nil
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
