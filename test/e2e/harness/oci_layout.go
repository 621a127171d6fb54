package harness

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// OCI media types and annotations of an image layout.
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
	annotationName    = "io.containerd.image.name"
)

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// manifest is an OCI image manifest.
type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

// index is an OCI image index (index.json).
type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// imageConfig is the part of an OCI image configuration the harness sets.
type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Env        []string `json:"Env"`
		Cmd        []string `json:"Cmd"`
		WorkingDir string   `json:"WorkingDir"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// tarFile is a regular file to put in an archive.
type tarFile struct {
	name string
	data []byte
}

// blob is a piece of content addressed by its digest.
type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

func (b blob) descriptor(mediaType string) descriptor {
	return descriptor{MediaType: mediaType, Digest: b.digest, Size: int64(len(b.data))}
}

// imageLayoutArchive returns a tar of an OCI image layout with both images,
// which share one layer holding busybox and its applet links.
func imageLayoutArchive(busybox []byte, applets []string) ([]byte, error) {
	layerData, err := busyboxLayer(busybox, applets)
	if err != nil {
		return nil, err
	}
	layer := newBlob(layerData)
	blobs := []blob{layer}
	idx := index{SchemaVersion: 2, MediaType: mediaTypeIndex}
	for _, name := range []string{PauseImage, BusyboxImage} {
		var cfg imageConfig
		cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
		cfg.Config.Env = []string{"PATH=" + systemPath}
		cfg.Config.Cmd = imageCommands[name]
		cfg.Config.WorkingDir = "/"
		cfg.RootFS.Type = "layers"
		// The layer is uncompressed, so its diff ID is its digest.
		cfg.RootFS.DiffIDs = []string{layer.digest}
		config, err := marshalBlob(cfg)
		if err != nil {
			return nil, err
		}
		man, err := marshalBlob(manifest{
			SchemaVersion: 2,
			MediaType:     mediaTypeManifest,
			Config:        config.descriptor(mediaTypeConfig),
			Layers:        []descriptor{layer.descriptor(mediaTypeLayer)},
		})
		if err != nil {
			return nil, err
		}
		blobs = append(blobs, config, man)
		d := man.descriptor(mediaTypeManifest)
		d.Annotations = map[string]string{annotationName: name}
		idx.Manifests = append(idx.Manifests, d)
	}
	indexJSON, err := json.Marshal(idx)
	if err != nil {
		return nil, fmt.Errorf("encode image index: %w", err)
	}

	files := []tarFile{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
	}
	for _, b := range blobs {
		files = append(files, tarFile{"blobs/sha256/" + strings.TrimPrefix(b.digest, "sha256:"), b.data})
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := writeTarDir(tw, dir, 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := writeTarFile(tw, f.name, 0o644, f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close image layout archive: %w", err)
	}
	return buf.Bytes(), nil
}

// busyboxLayer returns an uncompressed layer tar: the usual top-level
// directories, /bin/busybox and a symlink to it for every applet.
func busyboxLayer(busybox []byte, applets []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := []struct {
		name string
		mode int64
	}{
		{"bin/", 0o755}, {"dev/", 0o755}, {"etc/", 0o755}, {"proc/", 0o555},
		{"root/", 0o700}, {"sys/", 0o555}, {"tmp/", 0o1777},
	}
	for _, d := range dirs {
		if err := writeTarDir(tw, d.name, d.mode); err != nil {
			return nil, err
		}
	}
	if err := writeTarFile(tw, "bin/busybox", 0o755, busybox); err != nil {
		return nil, err
	}
	for _, applet := range applets {
		hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write layer link %s: %w", applet, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}

// writeTarDir adds a directory entry with a fixed time, so that archives
// are reproducible.
func writeTarDir(tw *tar.Writer, name string, mode int64) error {
	hdr := &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write tar directory %s: %w", name, err)
	}
	return nil
}

// writeTarFile adds a regular file with a fixed time.
func writeTarFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write tar header %s: %w", name, err)
	}
	if _, err := io.Copy(tw, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("write tar file %s: %w", name, err)
	}
	return nil
}

func marshalBlob(v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, fmt.Errorf("encode %T: %w", v, err)
	}
	return newBlob(data), nil
}
