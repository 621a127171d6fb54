package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/hack/ocilayout"
	"github.com/nri-cpumanager/nri-cpumanager/hack/ocilayout/ocilayouttest"
)

// imageLayoutArchive is the tar archive of imageLayout, as BuildImages writes it.
func imageLayoutArchive(busybox []byte, applets []string) ([]byte, error) {
	layout, err := imageLayout(busybox, applets)
	if err != nil {
		return nil, err
	}
	return layout.Archive()
}

func TestImageLayoutArchive(t *testing.T) {
	busybox := []byte("\x7fELF not really busybox")
	applets := []string{"sh", "sleep", "cat", "grep", "nproc"}
	archive, err := imageLayoutArchive(busybox, applets)
	if err != nil {
		t.Fatal(err)
	}
	_, contents := ocilayouttest.ReadTar(t, archive)
	if got := string(contents["oci-layout"]); !strings.Contains(got, `"imageLayoutVersion":"1.0.0"`) {
		t.Errorf("oci-layout = %q", got)
	}
	var idx ocilayout.Index
	if err := json.Unmarshal(contents["index.json"], &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(idx.Manifests) != 2 {
		t.Fatalf("index has %d manifests, want 2", len(idx.Manifests))
	}
	for _, d := range idx.Manifests {
		name := d.Annotations[ocilayout.AnnotationImageName]
		wantCmd, ok := imageCommands[name]
		if !ok {
			t.Errorf("manifest %s is named %q, not one of the harness images", d.Digest, name)
			continue
		}
		var man ocilayout.Manifest
		ocilayouttest.Blob(t, contents, d.Digest, d.Size, &man)
		if man.MediaType != ocilayout.MediaTypeManifest || d.MediaType != ocilayout.MediaTypeManifest || len(man.Layers) != 1 {
			t.Fatalf("%s manifest: media types %s/%s, %d layers", name, man.MediaType, d.MediaType, len(man.Layers))
		}
		var cfg ocilayout.ImageConfig
		ocilayouttest.Blob(t, contents, man.Config.Digest, man.Config.Size, &cfg)
		if !reflect.DeepEqual(cfg.Config.Cmd, wantCmd) {
			t.Errorf("%s Cmd = %q, want %q", name, cfg.Config.Cmd, wantCmd)
		}
		if cfg.OS != "linux" || len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != man.Layers[0].Digest {
			t.Errorf("%s config: os %q, diff ids %v, layer %s", name, cfg.OS, cfg.RootFS.DiffIDs, man.Layers[0].Digest)
		}
		layer := ocilayouttest.Blob(t, contents, man.Layers[0].Digest, man.Layers[0].Size, nil)
		headers, files := ocilayouttest.ReadTar(t, layer)
		if hdr := headers["bin/busybox"]; hdr == nil || hdr.Mode != 0o755 || !bytes.Equal(files["bin/busybox"], busybox) {
			t.Errorf("%s layer: bin/busybox missing, wrong mode or content", name)
		}
		for _, a := range applets {
			if hdr := headers["bin/"+a]; hdr == nil || hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "busybox" {
				t.Errorf("%s layer: bin/%s is not a link to busybox", name, a)
			}
		}
		if hdr := headers["tmp/"]; hdr == nil || hdr.Typeflag != tar.TypeDir {
			t.Errorf("%s layer: no /tmp directory", name)
		}
	}
	again, err := imageLayoutArchive(busybox, applets)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(archive, again) {
		t.Error("the image archive is not reproducible")
	}
}

// fakeBusybox writes a script that answers --list like busybox.
func fakeBusybox(t *testing.T, applets ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "busybox")
	script := "#!/bin/sh\nprintf '%s\\n' " + strings.Join(applets, " ") + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBuildImagesCachesPerBusybox(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	busybox := fakeBusybox(t, "busybox", "sh", "sleep", "cat", "grep")
	first, err := BuildImages(ctx, busybox, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	// A second build with the same busybox reuses the archive.
	if err := os.Chmod(first, 0o444); err != nil {
		t.Fatal(err)
	}
	second, err := BuildImages(ctx, busybox, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	if second != first || !os.SameFile(st, st2) {
		t.Errorf("second build made %s, want the cached %s", second, first)
	}
	// Another busybox gets another archive.
	other := fakeBusybox(t, "sh", "sleep", "cat", "grep", "taskset")
	third, err := BuildImages(ctx, other, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if third == first {
		t.Errorf("a different busybox reused %s", first)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("cache holds %d files, want the 2 archives and no temporary file", len(entries))
	}
}

func TestBuildImagesNeedsApplets(t *testing.T) {
	busybox := fakeBusybox(t, "sh", "sleep", "cat")
	_, err := BuildImages(context.Background(), busybox, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), `"grep"`) {
		t.Errorf("BuildImages with a busybox without grep: error %v, want one naming grep", err)
	}
}
