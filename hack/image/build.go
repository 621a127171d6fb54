package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/hack/ocilayout"
)

// BinaryPath is where the plugin's binary lives in the image.
const BinaryPath = "/usr/bin/nri-cpumanager"

// Source is the repository the image is built from (its OCI source label).
const Source = "https://github.com/nri-cpumanager/nri-cpumanager"

// Options describe an image build.
type Options struct {
	// Dir is the module root the package is built in; empty means the
	// current module's (go env GOMOD).
	Dir string
	// Package is the main package to build, relative to Dir.
	Package string
	// Platforms are the platforms to build for.
	Platforms []ocilayout.Platform
	// Ref is the image's full reference, repository:tag.
	Ref string
	// Version and Revision are stamped into the binary (main.version,
	// main.revision) and the labels.
	Version, Revision string
	// Created is the image's creation time, or nil.
	Created *time.Time
}

// Labels returns the OCI labels of the image (also the annotations of its
// index and manifests): the same as the Dockerfile's.
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":         "nri-cpumanager",
		"org.opencontainers.image.description":   "NRI plugin for containerd: exclusive CPUs and in-place CPU resize for Kubernetes pods",
		"org.opencontainers.image.url":           Source,
		"org.opencontainers.image.source":        Source,
		"org.opencontainers.image.documentation": Source + "/tree/main/docs",
		"org.opencontainers.image.licenses":      "Apache-2.0",
		"org.opencontainers.image.version":       o.Version,
		"org.opencontainers.image.revision":      o.Revision,
	}
}

// The image's command, as the Dockerfile's: the plugin with the
// DaemonSet's configuration file, as root (the NRI socket's directory is
// root's only; the DaemonSet takes every capability away).
var (
	entrypoint = []string{BinaryPath}
	command    = []string{"run", "--config", "/etc/nri-cpumanager/config.yaml"}
	user       = "0:0"
)

// LDFlags returns the linker flags of the release build: no symbol table,
// version and revision stamped into package main.
func (o Options) LDFlags() string {
	return fmt.Sprintf("-s -w -X main.version=%s -X main.revision=%s", o.Version, o.Revision)
}

// Build cross-compiles the package for every platform and writes the image
// layout archive to out (atomically).
func Build(ctx context.Context, o Options, out string) error {
	if len(o.Platforms) == 0 {
		return fmt.Errorf("build image: no platform")
	}
	for _, v := range []string{o.Version, o.Revision} {
		if v == "" || strings.ContainsAny(v, " \t\n'\"") {
			return fmt.Errorf("build image: version and revision must be single words, got %q", v)
		}
	}
	if o.Dir == "" {
		dir, err := moduleRoot(ctx)
		if err != nil {
			return err
		}
		o.Dir = dir
	}
	tmp, err := os.MkdirTemp("", "nri-cpumanager-image-")
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	defer os.RemoveAll(tmp)
	var imgs []ocilayout.Image
	for _, p := range o.Platforms {
		bin := filepath.Join(tmp, p.OS+"-"+p.Architecture, "nri-cpumanager")
		if err := goBuild(ctx, o, p, bin); err != nil {
			return err
		}
		img, err := image(o, p, bin)
		if err != nil {
			return err
		}
		imgs = append(imgs, img)
	}
	layout := ocilayout.New()
	if _, err := layout.AddIndex(o.Ref, o.Labels(), imgs...); err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	if err := layout.WriteFile(out); err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	return nil
}

// goBuild builds the static binary for platform p.
func goBuild(ctx context.Context, o Options, p ocilayout.Platform, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", o.LDFlags(), "-o", bin, o.Package)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", o.Package, p, err, out)
	}
	return nil
}

// image returns the single-platform image holding bin.
func image(o Options, p ocilayout.Platform, bin string) (ocilayout.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return ocilayout.Image{}, fmt.Errorf("build image for %s: %w", p, err)
	}
	layer, err := ocilayout.NewLayer([]ocilayout.Entry{
		{Path: "usr", Mode: 0o755, Dir: true},
		{Path: "usr/bin", Mode: 0o755, Dir: true},
		{Path: strings.TrimPrefix(BinaryPath, "/"), Mode: 0o755, Data: data},
	}, true)
	if err != nil {
		return ocilayout.Image{}, fmt.Errorf("build image for %s: %w", p, err)
	}
	img := ocilayout.Image{Platform: p, Layers: []ocilayout.Layer{layer}, Annotations: o.Labels()}
	img.Config.Created = o.Created
	img.Config.Config.Entrypoint = entrypoint
	img.Config.Config.Cmd = command
	img.Config.Config.User = user
	img.Config.Config.Labels = o.Labels()
	return img, nil
}

// moduleRoot returns the directory of the current module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("build image: not inside the nri-cpumanager module (go env GOMOD: %q, %v)", gomod, err)
	}
	return filepath.Dir(gomod), nil
}

// parsePlatforms parses "linux/amd64,linux/arm64".
func parsePlatforms(s string) ([]ocilayout.Platform, error) {
	var ps []ocilayout.Platform
	for _, f := range strings.Split(s, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || osName != "linux" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want linux/<arch>", f)
		}
		ps = append(ps, ocilayout.Platform{OS: osName, Architecture: arch})
	}
	return ps, nil
}
