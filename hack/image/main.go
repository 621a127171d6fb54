// Command image builds the nri-cpumanager container image without Docker or
// a registry: it cross-compiles the plugin for every platform (static,
// CGO_ENABLED=0, -trimpath, version and revision stamped with -ldflags) and
// writes an OCI image layout archive with a multi-platform index. The
// image holds only /usr/bin/nri-cpumanager, its ENTRYPOINT, CMD and USER,
// and the OCI labels of the Dockerfile at the repository's root, which
// builds the same binary on distroless/static. Load the archive with
//
//	ctr -n k8s.io images import _output/image/nri-cpumanager.tar
//
// or push it with any OCI tool (skopeo copy oci-archive:…, crane push …).
//
// Usage, from the repository root:
//
//	go run ./hack/image [-o FILE] [-name REPO] [-tag TAG] [-platforms LIST]
//	                    [-version V] [-revision R]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "_output/image/nri-cpumanager.tar", "the OCI image layout `archive` to write")
	name := fs.String("name", "ghcr.io/nri-cpumanager/nri-cpumanager", "the image `repository`")
	tag := fs.String("tag", "", "the image `tag` (default: the version)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated `os/arch` list")
	version := fs.String("version", "", "the version stamped into the binary and the labels (default: git describe --tags --always --dirty)")
	revision := fs.String("revision", "", "the source revision stamped into the binary and the labels (default: git rev-parse HEAD)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	opts := Options{Package: "./cmd/nri-cpumanager", Version: *version, Revision: *revision}
	var err error
	if opts.Platforms, err = parsePlatforms(*platforms); err != nil {
		return err
	}
	if opts.Version == "" {
		opts.Version = gitOr(ctx, "dev", "describe", "--tags", "--always", "--dirty")
	}
	if opts.Revision == "" {
		opts.Revision = gitOr(ctx, "unknown", "rev-parse", "HEAD")
	}
	opts.Created = created(ctx)
	if *tag == "" {
		*tag = opts.Version
	}
	opts.Ref = *name + ":" + *tag
	start := time.Now()
	if err := Build(ctx, opts, *out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "image %s (%s, version %s, revision %s) written to %s in %v\n",
		opts.Ref, *platforms, opts.Version, opts.Revision, *out, time.Since(start).Round(time.Millisecond))
	return nil
}

// gitOr returns the trimmed output of git args, or fallback when git fails
// (no git, not a checkout).
func gitOr(ctx context.Context, fallback string, args ...string) string {
	out, err := exec.CommandContext(ctx, "git", args...).Output()
	if s := strings.TrimSpace(string(out)); err == nil && s != "" {
		return s
	}
	return fallback
}

// created returns the image's creation time: SOURCE_DATE_EPOCH when set,
// else the commit time, so that the same source gives the same image; nil
// when neither is known.
func created(ctx context.Context) *time.Time {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		s = gitOr(ctx, "", "log", "-1", "--format=%ct")
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	t := time.Unix(sec, 0).UTC()
	return &t
}
