package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Image is the plugin's image as the manifests in git name it; the release
// workflow points the published ones at its own registry.
const Image = "ghcr.io/nri-cpumanager/nri-cpumanager"

// tagPattern is a release tag: v and a semantic version, a pre-release
// allowed (v0.2.0-rc.1), build metadata not (an image tag cannot hold +).
var tagPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// ParseTag checks that tag is a release tag.
func ParseTag(tag string) error {
	if !tagPattern.MatchString(tag) {
		return fmt.Errorf("tag %q is not a release tag: want vMAJOR.MINOR.PATCH, optionally -PRERELEASE (v0.2.0, v0.2.0-rc.1)", tag)
	}
	return nil
}

// ChartVersion is the chart's version for a tag: the tag without its v
// (Helm's versions are SemVer; the OCI tag of the chart is this too).
func ChartVersion(tag string) string { return strings.TrimPrefix(tag, "v") }

// A Place is where the repository states the version it releases.
type Place struct {
	File string
	Line int
	What string
	// Value is what it says there.
	Value string
	// Chart: the value is a chart version (no v).
	Chart bool
}

func (p Place) want(tag string) string {
	if p.Chart {
		return ChartVersion(tag)
	}
	return tag
}

func (p Place) String() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s %q", p.File, p.What, p.Value)
	}
	return fmt.Sprintf("%s:%d: %s %q", p.File, p.Line, p.What, p.Value)
}

var (
	// A version label, in a manifest or a kustomization's labels.
	labelLine = regexp.MustCompile(`^\s*app\.kubernetes\.io/version:\s*["']?([^"'\s#]+)`)
	// The plugin's image with a tag, anywhere in a line.
	imageRef = regexp.MustCompile(regexp.QuoteMeta(Image) + `:([^"'\s@#]+)`)
	// The chart's version and appVersion, top-level keys of Chart.yaml.
	chartVersionLine = regexp.MustCompile(`^version:\s*["']?([^"'\s#]+)`)
	appVersionLine   = regexp.MustCompile(`^appVersion:\s*["']?([^"'\s#]+)`)
	// The version docs/install.md installs: VERSION=… in its commands.
	docsVersionLine = regexp.MustCompile(`^\s*(?:export\s+)?VERSION=["']?([^"'\s#;]+)`)
)

// Files the places are read from, relative to the repository's root.
const (
	deployDir    = "deploy"
	chartDir     = "deploy/helm/nri-cpumanager"
	chartFile    = chartDir + "/Chart.yaml"
	valuesFile   = chartDir + "/values.yaml"
	installDoc   = "docs/install.md"
	daemonSet    = "deploy/daemonset.yaml"
	kustomizeTop = "deploy/kustomization.yaml"
)

// required are places that must be found: a release whose check found
// none of them would check nothing.
var required = []struct{ file, what string }{
	{chartFile, "chart version"},
	{chartFile, "chart appVersion"},
	{daemonSet, "image tag"},
	{kustomizeTop, "label app.kubernetes.io/version"},
	{installDoc, "VERSION= of the install commands"},
}

// Places returns every place of the repository at fsys that states the
// version: the image tags and version labels of the manifests in deploy/
// (its components included; the chart's templates take theirs from the
// chart), the chart's version and appVersion, an image tag its values set,
// and the version docs/install.md installs.
func Places(fsys fs.FS) ([]Place, error) {
	var places []Place
	scan := func(file string, rules ...func(line string) (what, value string, chart bool)) error {
		data, err := fs.ReadFile(fsys, file)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			for _, rule := range rules {
				if what, value, chart := rule(sc.Text()); what != "" {
					places = append(places, Place{File: file, Line: n, What: what, Value: value, Chart: chart})
				}
			}
		}
		return sc.Err()
	}
	match := func(re *regexp.Regexp, what string, chart bool) func(string) (string, string, bool) {
		return func(line string) (string, string, bool) {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				return "", "", false
			}
			if m := re.FindStringSubmatch(line); m != nil {
				return what, m[1], chart
			}
			return "", "", false
		}
	}
	err := fs.WalkDir(fsys, deployDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == path.Dir(chartDir) { // deploy/helm: the chart, below
				return fs.SkipDir
			}
			return nil
		}
		if ext := path.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		return scan(p, match(labelLine, "label app.kubernetes.io/version", false), match(imageRef, "image tag", false))
	})
	if err != nil {
		return nil, err
	}
	if err := scan(chartFile, match(chartVersionLine, "chart version", true), match(appVersionLine, "chart appVersion", false)); err != nil {
		return nil, err
	}
	values, err := fs.ReadFile(fsys, valuesFile)
	if err != nil {
		return nil, err
	}
	var v struct {
		Image struct {
			Tag    string `json:"tag"`
			Digest string `json:"digest"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", valuesFile, err)
	}
	if v.Image.Tag != "" {
		places = append(places, Place{File: valuesFile, What: "image.tag (leave it empty: the appVersion)", Value: v.Image.Tag})
	}
	if v.Image.Digest != "" {
		places = append(places, Place{File: valuesFile, What: "image.digest (leave it empty: the release sets it)", Value: v.Image.Digest})
	}
	if err := scan(installDoc, match(docsVersionLine, "VERSION= of the install commands", false)); err != nil {
		return nil, err
	}
	sort.SliceStable(places, func(i, j int) bool { return places[i].File < places[j].File })
	var errs []error
	for _, r := range required {
		found := false
		for _, p := range places {
			found = found || (p.File == r.file && p.What == r.what)
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s: no %s found: the check would miss it", r.file, r.what))
		}
	}
	return places, errors.Join(errs...)
}

// Check checks tag against every place of the repository at fsys: each
// must say the tag (the chart's version the tag without its v). The error
// names each place that does not.
func Check(fsys fs.FS, tag string) error {
	if err := ParseTag(tag); err != nil {
		return err
	}
	places, err := Places(fsys)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range places {
		if p.Value != p.want(tag) {
			errs = append(errs, fmt.Errorf("%s, want %q", p, p.want(tag)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("the tag %s is not the version the repository releases:\n%w", tag, errors.Join(errs...))
	}
	return nil
}

// Version returns the version the repository at fsys releases: the
// chart's appVersion, once every place says the same.
func Version(fsys fs.FS) (string, error) {
	places, err := Places(fsys)
	if err != nil {
		return "", err
	}
	for _, p := range places {
		if p.What == "chart appVersion" {
			return p.Value, Check(fsys, p.Value)
		}
	}
	return "", fmt.Errorf("%s has no appVersion", chartFile)
}
