// Command release holds the checks of a release that need more than a
// shell line; hack/release-artifacts and the release workflow run it from
// the repository's root:
//
//	go run ./hack/release check TAG     the tag against the version deploy/,
//	                                    the chart and docs/install.md name
//	go run ./hack/release version       that version (they must agree)
//	go run ./hack/release digest FILE   the digest of the image index in an
//	                                    OCI layout archive (hack/image's)
//	go run ./hack/release verify -image REPO -version V -revision R DIR
//	                                    what hack/release-artifacts wrote to
//	                                    DIR, before anything is published
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

const usage = `usage:
  release check TAG
  release version
  release digest ARCHIVE
  release verify -image REPO -version V -revision R DIR`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("no command\n%s", usage)
	}
	root := os.DirFS(".")
	switch cmd, args := args[0], args[1:]; cmd {
	case "check":
		if len(args) != 1 {
			return fmt.Errorf("check takes the tag\n%s", usage)
		}
		if err := Check(root, args[0]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is the version of deploy/, the chart (%s) and docs/install.md\n", args[0], ChartVersion(args[0]))
		return nil
	case "version":
		if len(args) != 0 {
			return fmt.Errorf("version takes no argument\n%s", usage)
		}
		v, err := Version(root)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, v)
		return nil
	case "digest":
		if len(args) != 1 {
			return fmt.Errorf("digest takes the archive\n%s", usage)
		}
		l, err := ReadLayout(args[0])
		if err != nil {
			return err
		}
		_, d, err := l.Index()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, d.Digest)
		return nil
	case "verify":
		fs := flag.NewFlagSet("verify", flag.ContinueOnError)
		fs.SetOutput(stderr)
		var want Want
		fs.StringVar(&want.Image, "image", Image, "the image `repository` the release publishes")
		fs.StringVar(&want.Version, "version", "", "the release's `version` (its tag)")
		fs.StringVar(&want.Revision, "revision", "", "the `commit` it is built from")
		fs.StringVar(&want.Source, "source", Source, "the repository's `URL` (the runbooks' links)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 || want.Version == "" || want.Revision == "" {
			return fmt.Errorf("verify takes -version, -revision and the directory\n%s", usage)
		}
		report, err := Verify(fs.Arg(0), want)
		for _, line := range report {
			fmt.Fprintln(stdout, line)
		}
		return err
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}
