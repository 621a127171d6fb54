package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Source is the repository's URL: the runbooks' links start with it.
const Source = "https://github.com/nri-cpumanager/nri-cpumanager"

// Module is the plugin's Go module.
const Module = "github.com/nri-cpumanager/nri-cpumanager"

// Arches are the architectures a release builds, each linux/ARCH.
var Arches = []string{"amd64", "arm64"}

// Want is what a release must be.
type Want struct {
	// Image is the repository the image is published to, and the
	// manifest and the chart point at.
	Image string
	// Version is the release's tag, Revision its commit.
	Version, Revision string
	// Source is the repository's URL (the chart's runbook links).
	Source string
}

// The files of a release, as hack/release-artifacts names them.
const (
	sumsFile     = "SHA256SUMS"
	bundleFile   = "SHA256SUMS.sigstore.json" // added by the workflow's signing
	imageFile    = "nri-cpumanager-image.tar"
	manifestFile = "nri-cpumanager.yaml"
	dropInFile   = "containerd-nri.toml"
)

func binaryFile(arch string) string           { return "nri-cpumanager-linux-" + arch }
func binarySBOM(arch string) string           { return "nri-cpumanager-linux-" + arch + ".spdx.json" }
func imageSBOM(arch string) string            { return "nri-cpumanager-image-linux-" + arch + ".spdx.json" }
func chartFileName(tag string) string         { return "nri-cpumanager-" + ChartVersion(tag) + ".tgz" }
func sha256Hex(data []byte) string            { s := sha256.Sum256(data); return hex.EncodeToString(s[:]) }
func okf(f string, a ...any) string           { return "ok  " + fmt.Sprintf(f, a...) }
func readIn(dir, name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }

// Verify checks the release files in dir against want, as the release
// workflow does before it publishes them: the set of files and their
// checksums; the image's index, platforms and labels; each binary static,
// of its architecture, stamped with the version and revision, and byte
// for byte the image's; each SBOM naming every module the binary holds,
// at its version; the chart's versions, image and runbook links; the
// manifest's image pinned to the index's digest; the containerd drop-in
// as in git. It returns a line per check passed, and every failure.
func Verify(dir string, want Want) ([]string, error) {
	if err := ParseTag(want.Version); err != nil {
		return nil, err
	}
	var report []string
	var errs []error
	fail := func(err error) { errs = append(errs, err) }

	// The files, and their checksums.
	expected := []string{sumsFile, imageFile, manifestFile, dropInFile, chartFileName(want.Version)}
	for _, a := range Arches {
		expected = append(expected, binaryFile(a), binarySBOM(a), imageSBOM(a))
	}
	sort.Strings(expected)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var got []string
	for _, e := range entries {
		if e.Name() != bundleFile {
			got = append(got, e.Name())
		}
	}
	if strings.Join(got, " ") != strings.Join(expected, " ") {
		return nil, fmt.Errorf("%s holds %q, want %q", dir, got, expected)
	}
	report = append(report, okf("files: %s", strings.Join(expected, " ")))
	if err := checkSums(dir, expected); err != nil {
		fail(err)
	} else {
		report = append(report, okf("%s: every other file, each sum right", sumsFile))
	}

	// The image.
	layout, err := ReadLayout(filepath.Join(dir, imageFile))
	if err != nil {
		return report, errors.Join(append(errs, err)...)
	}
	name, index, err := layout.Index()
	if err != nil {
		return report, errors.Join(append(errs, err)...)
	}
	if want := want.Image + ":" + want.Version; name != want {
		fail(fmt.Errorf("%s names the image %q, want %q", imageFile, name, want))
	}
	imgs, annotations, err := layout.Images(index)
	if err != nil {
		return report, errors.Join(append(errs, err)...)
	}
	byArch := map[string]PlatformImage{}
	for _, img := range imgs {
		byArch[img.Platform.Architecture] = img
		if img.Platform.OS != "linux" {
			fail(fmt.Errorf("%s has an image for %s", imageFile, img.Platform))
		}
		if img.Labels["org.opencontainers.image.version"] != want.Version || img.Labels["org.opencontainers.image.revision"] != want.Revision {
			fail(fmt.Errorf("the %s image is labelled version %q revision %q", img.Platform, img.Labels["org.opencontainers.image.version"], img.Labels["org.opencontainers.image.revision"]))
		}
	}
	if len(imgs) != len(Arches) {
		fail(fmt.Errorf("%s has %d platforms, want %d", imageFile, len(imgs), len(Arches)))
	}
	if annotations["org.opencontainers.image.version"] != want.Version || annotations["org.opencontainers.image.revision"] != want.Revision {
		fail(fmt.Errorf("the image index is annotated version %q revision %q", annotations["org.opencontainers.image.version"], annotations["org.opencontainers.image.revision"]))
	}
	report = append(report, okf("image %s, index %s, %d platforms", name, index.Digest, len(imgs)))

	// The binaries, against the image's and their SBOMs.
	for _, arch := range Arches {
		lines, err := checkBinary(dir, arch, want, layout, byArch[arch])
		report = append(report, lines...)
		if err != nil {
			fail(err)
		}
	}

	// The chart.
	if lines, err := checkChart(dir, want, index.Digest); err != nil {
		fail(err)
	} else {
		report = append(report, lines...)
	}

	// The manifest.
	if line, err := checkManifest(dir, want, index.Digest); err != nil {
		fail(err)
	} else {
		report = append(report, line)
	}

	// The drop-in.
	shipped, err := readIn(dir, dropInFile)
	if err != nil {
		fail(err)
	} else if inGit, err := os.ReadFile(filepath.Join("deploy", dropInFile)); err != nil {
		fail(err)
	} else if !bytes.Equal(shipped, inGit) {
		fail(fmt.Errorf("%s differs from deploy/%s", dropInFile, dropInFile))
	} else {
		report = append(report, okf("%s: deploy/%s", dropInFile, dropInFile))
	}
	return report, errors.Join(errs...)
}

// checkSums checks SHA256SUMS: every other file listed once, each with its
// sum, in sha256sum's format.
func checkSums(dir string, files []string) error {
	data, err := readIn(dir, sumsFile)
	if err != nil {
		return err
	}
	listed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return fmt.Errorf("%s: line %q is not sha256sum's", sumsFile, sc.Text())
		}
		if _, dup := listed[name]; dup {
			return fmt.Errorf("%s lists %s twice", sumsFile, name)
		}
		listed[name] = sum
	}
	var errs []error
	for _, f := range files {
		if f == sumsFile {
			continue
		}
		sum, ok := listed[f]
		if !ok {
			errs = append(errs, fmt.Errorf("%s does not list %s", sumsFile, f))
			continue
		}
		delete(listed, f)
		data, err := readIn(dir, f)
		if err != nil {
			errs = append(errs, err)
		} else if sha256Hex(data) != sum {
			errs = append(errs, fmt.Errorf("%s: the sum of %s is wrong", sumsFile, f))
		}
	}
	for f := range listed {
		errs = append(errs, fmt.Errorf("%s lists %s, which is not released", sumsFile, f))
	}
	return errors.Join(errs...)
}

// checkBinary checks the binary of arch: its build (static, the
// architecture, version and revision stamped, the plugin's module), that
// it is the image's, and the SBOMs of it and of its image.
func checkBinary(dir, arch string, want Want, layout *Layout, img PlatformImage) ([]string, error) {
	file := filepath.Join(dir, binaryFile(arch))
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	bi, err := buildinfo.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", binaryFile(arch), err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var errs []error
	if bi.Main.Path != Module || bi.Path != Module+"/cmd/nri-cpumanager" {
		errs = append(errs, fmt.Errorf("%s is %s of module %s", binaryFile(arch), bi.Path, bi.Main.Path))
	}
	if settings["GOOS"] != "linux" || settings["GOARCH"] != arch || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		errs = append(errs, fmt.Errorf("%s: GOOS=%s GOARCH=%s CGO_ENABLED=%s -trimpath=%s, want a static linux/%s build with -trimpath",
			binaryFile(arch), settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"], settings["-trimpath"], arch))
	}
	// -trimpath keeps -ldflags out of the build information: the stamp
	// is read from the strings of the binary and, on a machine of its
	// architecture, from what it says.
	for _, x := range []string{want.Version, want.Revision} {
		if !bytes.Contains(data, []byte(x)) {
			errs = append(errs, fmt.Errorf("%s is not stamped with %q", binaryFile(arch), x))
		}
	}
	if arch == runtime.GOARCH && runtime.GOOS == "linux" {
		out, err := exec.Command(file, "version").Output()
		if say := fmt.Sprintf("nri-cpumanager %s (revision %s, %s)", want.Version, want.Revision, bi.GoVersion); err != nil || strings.TrimSpace(string(out)) != say {
			errs = append(errs, fmt.Errorf("%s version says %q (%v), want %q", binaryFile(arch), out, err, say))
		}
	}
	report := []string{okf("%s: static linux/%s, version %s, revision %s, %s", binaryFile(arch), arch, want.Version, want.Revision, bi.GoVersion)}
	if img.Manifest.Digest == "" {
		errs = append(errs, fmt.Errorf("%s has no linux/%s image", imageFile, arch))
	} else if inImage, err := layout.File(img, "usr/bin/nri-cpumanager"); err != nil {
		errs = append(errs, err)
	} else if !bytes.Equal(inImage, data) {
		errs = append(errs, fmt.Errorf("%s is not the linux/%s image's /usr/bin/nri-cpumanager", binaryFile(arch), arch))
	} else {
		report = append(report, okf("%s: the linux/%s image's /usr/bin/nri-cpumanager, byte for byte", binaryFile(arch), arch))
	}

	// Every module the binary holds, at its version, in each SBOM; the
	// image's SBOM also lists the binary's file with its sum.
	modules := map[string]string{"stdlib": bi.GoVersion}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		modules[d.Path] = d.Version
	}
	for _, sbom := range []struct {
		file, source string
		image        bool
	}{{binarySBOM(arch), "nri-cpumanager", false}, {imageSBOM(arch), want.Image, true}} {
		line, err := checkSBOM(dir, sbom.file, sbom.source, want.Version, modules, sbom.image, sha256Hex(data))
		if err != nil {
			errs = append(errs, err)
		} else {
			report = append(report, line)
		}
	}
	return report, errors.Join(errs...)
}

// checkSBOM checks an SPDX JSON SBOM: it names the source at version and
// every module at its version; an image's lists the binary's file, with
// its sum.
func checkSBOM(dir, file, source, version string, modules map[string]string, image bool, binarySum string) (string, error) {
	data, err := readIn(dir, file)
	if err != nil {
		return "", err
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
		} `json:"packages"`
		Files []struct {
			FileName  string `json:"fileName"`
			Checksums []struct {
				Algorithm string `json:"algorithm"`
				Value     string `json:"checksumValue"`
			} `json:"checksums"`
		} `json:"files"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if !strings.HasPrefix(doc.SPDXVersion, "SPDX-2.") {
		return "", fmt.Errorf("%s: spdxVersion %q, want SPDX-2.x", file, doc.SPDXVersion)
	}
	listed := map[string]map[string]bool{}
	for _, p := range doc.Packages {
		if listed[p.Name] == nil {
			listed[p.Name] = map[string]bool{}
		}
		listed[p.Name][p.VersionInfo] = true
	}
	var errs []error
	if !listed[source][version] {
		errs = append(errs, fmt.Errorf("%s does not name its source %s %s", file, source, version))
	}
	for path, v := range modules {
		if !listed[path][v] {
			errs = append(errs, fmt.Errorf("%s lacks %s %s, which the binary holds", file, path, v))
		}
	}
	if image {
		found := false
		for _, f := range doc.Files {
			for _, c := range f.Checksums {
				found = found || (strings.TrimPrefix(f.FileName, "/") == "usr/bin/nri-cpumanager" && c.Algorithm == "SHA256" && c.Value == binarySum)
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s does not list /usr/bin/nri-cpumanager with the binary's sum", file))
		}
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return okf("%s: %s, %d packages, every one of the binary's %d modules at its version", file, doc.SPDXVersion, len(doc.Packages), len(modules)), nil
}

// runbookURL is a runbook link of the chart's alerts.
var runbookURL = regexp.MustCompile(`runbook_url:\s*(\S+)`)

// checkChart checks the chart's package: its versions, the image pinned
// to the index's digest, its alerts linking the runbooks of the release.
func checkChart(dir string, want Want, digest string) ([]string, error) {
	file := chartFileName(want.Version)
	data, err := readIn(dir, file)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if b, err := io.ReadAll(tr); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		} else {
			files[h.Name] = b
		}
	}
	var chart struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
			Digest     string `json:"digest"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(files["nri-cpumanager/Chart.yaml"], &chart); err != nil {
		return nil, fmt.Errorf("%s: Chart.yaml: %w", file, err)
	}
	if err := yaml.Unmarshal(files["nri-cpumanager/values.yaml"], &values); err != nil {
		return nil, fmt.Errorf("%s: values.yaml: %w", file, err)
	}
	var errs []error
	if chart.Name != "nri-cpumanager" || chart.Version != ChartVersion(want.Version) || chart.AppVersion != want.Version {
		errs = append(errs, fmt.Errorf("%s: chart %s version %q appVersion %q, want nri-cpumanager %q %q",
			file, chart.Name, chart.Version, chart.AppVersion, ChartVersion(want.Version), want.Version))
	}
	if values.Image.Repository != want.Image || values.Image.Digest != digest || values.Image.Tag != "" {
		errs = append(errs, fmt.Errorf("%s: image %s tag %q digest %q, want %s at %s", file,
			values.Image.Repository, values.Image.Tag, values.Image.Digest, want.Image, digest))
	}
	rules := string(files["nri-cpumanager/templates/prometheusrule.yaml"])
	urls := runbookURL.FindAllStringSubmatch(rules, -1)
	prefix := want.Source + "/blob/" + want.Version + "/docs/troubleshooting.md#"
	for _, u := range urls {
		if !strings.HasPrefix(u[1], prefix) {
			errs = append(errs, fmt.Errorf("%s: runbook_url %s, want %s…", file, u[1], prefix))
		}
	}
	if len(urls) == 0 {
		errs = append(errs, fmt.Errorf("%s: the alerts have no runbook_url", file))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return []string{
		okf("%s: chart %s, appVersion %s, image %s@%s", file, chart.Version, chart.AppVersion, values.Image.Repository, digest),
		okf("%s: %d runbook links, each to %s", file, len(urls), prefix),
	}, nil
}

// checkManifest checks the rendered manifest: its DaemonSet runs the
// image pinned to the index's digest, everything labelled with the
// version, no other reference to the plugin's image.
func checkManifest(dir string, want Want, digest string) (string, error) {
	data, err := readIn(dir, manifestFile)
	if err != nil {
		return "", err
	}
	var errs []error
	kinds := map[string]int{}
	var images []string
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers     []struct{ Image string } `json:"containers"`
						InitContainers []struct{ Image string } `json:"initContainers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return "", fmt.Errorf("%s: %w", manifestFile, err)
		}
		kinds[obj.Kind]++
		if v := obj.Metadata.Labels["app.kubernetes.io/version"]; v != want.Version {
			errs = append(errs, fmt.Errorf("%s: %s %s is labelled version %q, want %q", manifestFile, obj.Kind, obj.Metadata.Name, v, want.Version))
		}
		for _, c := range append(obj.Spec.Template.Spec.Containers, obj.Spec.Template.Spec.InitContainers...) {
			images = append(images, c.Image)
		}
	}
	pinned := want.Image + "@" + digest
	if kinds["DaemonSet"] != 1 || len(images) != 1 || images[0] != pinned {
		errs = append(errs, fmt.Errorf("%s: %d DaemonSets running %q, want one running %s", manifestFile, kinds["DaemonSet"], images, pinned))
	}
	if n := strings.Count(string(data), Image+":") + strings.Count(string(data), want.Image+":"); n > 0 {
		errs = append(errs, fmt.Errorf("%s names the image by tag %d times", manifestFile, n))
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(ks)
	return okf("%s: %s; the DaemonSet runs %s", manifestFile, strings.Join(ks, " "), pinned), nil
}
