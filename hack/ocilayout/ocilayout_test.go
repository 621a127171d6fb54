package ocilayout

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/hack/ocilayout/ocilayouttest"
)

// blobAs decodes the blob d points at into v, checking digest and size.
func blobAs(t *testing.T, contents map[string][]byte, d Descriptor, v any) []byte {
	t.Helper()
	return ocilayouttest.Blob(t, contents, d.Digest, d.Size, v)
}

func multiPlatform(t *testing.T) []byte {
	t.Helper()
	l := New()
	var imgs []Image
	for _, arch := range []string{"amd64", "arm64"} {
		layer, err := NewLayer([]Entry{
			{Path: "usr", Mode: 0o755, Dir: true},
			{Path: "usr/bin", Mode: 0o755, Dir: true},
			{Path: "usr/bin/app", Mode: 0o755, Data: []byte("binary for " + arch)},
			{Path: "usr/bin/app-link", Mode: 0o777, Link: "app"},
		}, true)
		if err != nil {
			t.Fatal(err)
		}
		img := Image{Platform: Platform{OS: "linux", Architecture: arch}, Layers: []Layer{layer}}
		img.Config.Config.Entrypoint = []string{"/usr/bin/app"}
		img.Config.Config.Labels = map[string]string{"org.opencontainers.image.version": "v1.2.3"}
		imgs = append(imgs, img)
	}
	if _, err := l.AddIndex("example.com/app:v1.2.3", map[string]string{"org.opencontainers.image.version": "v1.2.3"}, imgs...); err != nil {
		t.Fatal(err)
	}
	archive, err := l.Archive()
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

func TestMultiPlatformImage(t *testing.T) {
	archive := multiPlatform(t)
	_, contents := ocilayouttest.ReadTar(t, archive)
	if got := string(contents["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", got)
	}
	var top Index
	if err := json.Unmarshal(contents["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != MediaTypeIndex {
		t.Fatalf("index.json: %+v, want one image index", top.Manifests)
	}
	named := top.Manifests[0]
	if named.Annotations[AnnotationImageName] != "example.com/app:v1.2.3" || named.Annotations[AnnotationRefName] != "v1.2.3" {
		t.Errorf("index.json entry annotations %v", named.Annotations)
	}
	var idx Index
	blobAs(t, contents, named, &idx)
	if idx.Annotations["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("image index annotations %v", idx.Annotations)
	}
	var arches []string
	for _, d := range idx.Manifests {
		if d.MediaType != MediaTypeManifest || d.Platform == nil || d.Platform.OS != "linux" {
			t.Fatalf("index entry %+v", d)
		}
		arches = append(arches, d.Platform.Architecture)
		var man Manifest
		blobAs(t, contents, d, &man)
		var cfg ImageConfig
		blobAs(t, contents, man.Config, &cfg)
		if cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" || cfg.Config.Entrypoint[0] != "/usr/bin/app" ||
			cfg.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
			t.Errorf("%s config %+v", d.Platform, cfg)
		}
		if len(man.Layers) != 1 || man.Layers[0].MediaType != MediaTypeLayerGzip {
			t.Fatalf("%s layers %+v", d.Platform, man.Layers)
		}
		zr, err := gzip.NewReader(bytes.NewReader(blobAs(t, contents, man.Layers[0], nil)))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != ocilayouttest.Digest(raw) {
			t.Errorf("%s diff ids %v, uncompressed layer %s", d.Platform, cfg.RootFS.DiffIDs, ocilayouttest.Digest(raw))
		}
		headers, files := ocilayouttest.ReadTar(t, raw)
		if h := headers["usr/bin/app"]; h == nil || h.Mode != 0o755 || string(files["usr/bin/app"]) != "binary for "+d.Platform.Architecture {
			t.Errorf("%s layer: usr/bin/app %+v %q", d.Platform, h, files["usr/bin/app"])
		}
		if h := headers["usr/bin/"]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("%s layer: no usr/bin/ directory", d.Platform)
		}
		if h := headers["usr/bin/app-link"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "app" {
			t.Errorf("%s layer: app-link %+v", d.Platform, h)
		}
	}
	if strings.Join(arches, ",") != "amd64,arm64" {
		t.Errorf("platforms %v", arches)
	}
	if again := multiPlatform(t); !bytes.Equal(archive, again) {
		t.Error("the archive is not reproducible")
	}
}

func TestAddIndexRefuses(t *testing.T) {
	layer, err := NewLayer(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	amd64 := Image{Platform: Platform{OS: "linux", Architecture: "amd64"}, Layers: []Layer{layer}}
	for name, imgs := range map[string][]Image{
		"no image":                    nil,
		"two images for one platform": {amd64, amd64},
	} {
		if _, err := New().AddIndex("x:y", nil, imgs...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRefNameOnlyForATag(t *testing.T) {
	layer, err := NewLayer(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for ref, tag := range map[string]string{
		"localhost:5000/app:v1": "v1",
		"localhost:5000/app":    "",
		"app":                   "",
	} {
		l := New()
		if _, err := l.AddImage(ref, Image{Platform: Platform{OS: "linux", Architecture: "amd64"}, Layers: []Layer{layer}}); err != nil {
			t.Fatal(err)
		}
		if got := l.names[0].Annotations[AnnotationRefName]; got != tag {
			t.Errorf("%s: tag %q, want %q", ref, got, tag)
		}
	}
}
