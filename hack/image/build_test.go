package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/hack/ocilayout"
	"github.com/nri-cpumanager/nri-cpumanager/hack/ocilayout/ocilayouttest"
)

func blob(t *testing.T, c map[string][]byte, d ocilayout.Descriptor, v any) []byte {
	t.Helper()
	return ocilayouttest.Blob(t, c, d.Digest, d.Size, v)
}

// TestBuildCrossCompilesAStampedStaticBinary builds a stand-in program the
// way the release image is built and checks the archive: one index for
// both platforms, each a static binary of its architecture at
// /usr/bin/nri-cpumanager with version and revision stamped, the entrypoint
// and the OCI labels.
func TestBuildCrossCompilesAStampedStaticBinary(t *testing.T) {
	root, err := moduleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(1700000000, 0).UTC()
	o := Options{
		Dir:       root,
		Package:   "./hack/image/testdata/hello",
		Platforms: []ocilayout.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}},
		Ref:       "example.com/nri-cpumanager:v9.9.9",
		Version:   "v9.9.9",
		Revision:  "0123abcd",
		Created:   &created,
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := Build(context.Background(), o, out); err != nil {
		t.Fatal(err)
	}
	archive, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	_, c := ocilayouttest.ReadTar(t, archive)
	var top ocilayout.Index
	if err := json.Unmarshal(c["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations[ocilayout.AnnotationImageName] != o.Ref {
		t.Fatalf("index.json %+v", top)
	}
	var idx ocilayout.Index
	blob(t, c, top.Manifests[0], &idx)
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  "v9.9.9",
		"org.opencontainers.image.revision": "0123abcd",
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    "nri-cpumanager",
	} {
		if idx.Annotations[k] != v {
			t.Errorf("index annotation %s = %q, want %q", k, idx.Annotations[k], v)
		}
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	if len(idx.Manifests) != 2 {
		t.Fatalf("%d manifests, want 2", len(idx.Manifests))
	}
	for _, d := range idx.Manifests {
		arch := d.Platform.Architecture
		var man ocilayout.Manifest
		blob(t, c, d, &man)
		var cfg ocilayout.ImageConfig
		blob(t, c, man.Config, &cfg)
		if strings.Join(cfg.Config.Entrypoint, " ") != BinaryPath || cfg.Architecture != arch || cfg.Config.User != "0:0" ||
			strings.Join(cfg.Config.Cmd, " ") != "run --config /etc/nri-cpumanager/config.yaml" ||
			cfg.Config.Labels["org.opencontainers.image.revision"] != "0123abcd" || cfg.Created == nil || !cfg.Created.Equal(created) {
			t.Errorf("%s config: entrypoint %q, arch %s, labels %v, created %v", arch, cfg.Config.Entrypoint, cfg.Architecture, cfg.Config.Labels, cfg.Created)
		}
		zr, err := gzip.NewReader(bytes.NewReader(blob(t, c, man.Layers[0], nil)))
		if err != nil {
			t.Fatal(err)
		}
		layer, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		headers, files := ocilayouttest.ReadTar(t, layer)
		hdr := headers["usr/bin/nri-cpumanager"]
		if hdr == nil || hdr.Mode != 0o755 {
			t.Fatalf("%s layer: usr/bin/nri-cpumanager %+v", arch, hdr)
		}
		bin := filepath.Join(t.TempDir(), "bin")
		if err := os.WriteFile(bin, files["usr/bin/nri-cpumanager"], 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != machines[arch] {
			t.Errorf("%s binary is for %s", arch, f.Machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s binary is dynamically linked", arch)
			}
		}
		f.Close()
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		// (-trimpath keeps -ldflags out of the build information: the
		// stamped values are checked by running the binary below.)
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOARCH"] != arch {
			t.Errorf("%s build settings %v", arch, settings)
		}
		if arch == runtime.GOARCH {
			out, err := exec.Command(bin).Output()
			if err != nil || strings.TrimSpace(string(out)) != "v9.9.9 0123abcd" {
				t.Errorf("%s binary prints %q (%v), want the stamped version and revision", arch, out, err)
			}
		}
	}
}

func TestParsePlatforms(t *testing.T) {
	ps, err := parsePlatforms("linux/amd64, linux/arm64")
	if err != nil || len(ps) != 2 || ps[1].Architecture != "arm64" {
		t.Errorf("parsePlatforms: %v, %v", ps, err)
	}
	for _, bad := range []string{"", "amd64", "windows/amd64", "linux/", "linux/arm/v7"} {
		if _, err := parsePlatforms(bad); err == nil {
			t.Errorf("parsePlatforms(%q): no error", bad)
		}
	}
}

func TestBuildRefusesAVersionThatBreaksTheLDFlags(t *testing.T) {
	o := Options{Dir: t.TempDir(), Package: ".", Platforms: []ocilayout.Platform{{OS: "linux", Architecture: "amd64"}}, Version: "v1 -X main.x=y", Revision: "r"}
	if err := Build(context.Background(), o, filepath.Join(t.TempDir(), "x.tar")); err == nil || !strings.Contains(err.Error(), "single words") {
		t.Errorf("Build: %v, want a refusal of the version", err)
	}
}

// TestSameAsTheDockerfile checks that the image says what the Dockerfile's
// says: binary path, ENTRYPOINT, CMD, USER, the same labels and the same
// build flags.
func TestSameAsTheDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines, drop comments.
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		lines = append(lines, cur+l)
		cur = ""
	}
	o := Options{Version: "${VERSION}", Revision: "${REVISION}"}
	instr := map[string][]string{}
	for _, l := range lines {
		word, rest, _ := strings.Cut(l, " ")
		instr[word] = append(instr[word], strings.TrimSpace(rest))
	}
	jsonList := func(s string) []string {
		var v []string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("Dockerfile: %q: %v", s, err)
		}
		return v
	}
	last := func(word string) string {
		if len(instr[word]) == 0 {
			t.Fatalf("Dockerfile has no %s", word)
		}
		return instr[word][len(instr[word])-1]
	}
	if got := jsonList(last("ENTRYPOINT")); strings.Join(got, " ") != strings.Join(entrypoint, " ") {
		t.Errorf("ENTRYPOINT %q, image %q", got, entrypoint)
	}
	if got := jsonList(last("CMD")); strings.Join(got, " ") != strings.Join(command, " ") {
		t.Errorf("CMD %q, image %q", got, command)
	}
	if got := last("USER"); got != user {
		t.Errorf("USER %q, image %q", got, user)
	}
	if got := last("COPY"); !strings.HasSuffix(got, " "+BinaryPath) {
		t.Errorf("the Dockerfile copies the binary with %q, the image has it at %s", got, BinaryPath)
	}
	labels := map[string]string{}
	for _, m := range regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)="([^"]*)"`).FindAllStringSubmatch(last("LABEL"), -1) {
		labels[m[1]] = m[2]
	}
	if !reflect.DeepEqual(labels, o.Labels()) {
		t.Errorf("labels differ:\nDockerfile %v\nimage      %v", labels, o.Labels())
	}
	run := strings.Join(instr["RUN"], "\n")
	for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "` + o.LDFlags() + `"`} {
		if !strings.Contains(run, flag) {
			t.Errorf("the Dockerfile's build lacks %s:\n%s", flag, run)
		}
	}
}
