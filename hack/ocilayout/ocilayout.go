// Package ocilayout writes OCI image layouts (image-spec v1.1) as tar
// archives: content-addressed blobs, image manifests and configurations,
// multi-platform indexes, and an index.json naming the images. No registry
// and no daemon are involved; `ctr images import` loads the archive.
//
// The e2e harness builds its test images with it, and hack/image the
// plugin's image. Archives are reproducible: every time stamp is fixed and
// blobs are written in digest order.
package ocilayout

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Media types of the image-spec.
const (
	MediaTypeIndex     = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest  = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig    = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer     = "application/vnd.oci.image.layer.v1.tar"
	MediaTypeLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Annotations of an index.json entry naming an image.
const (
	// AnnotationImageName is the full reference containerd gives an
	// imported image (`ctr images import` reads it).
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName is the image-spec's name of a reference (the tag).
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// epoch is the time stamp of every tar entry, for reproducible archives.
var epoch = time.Unix(0, 0)

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Platform is the OS and CPU architecture an image runs on (GOOS and
// GOARCH values).
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

// String returns "os/arch[/variant]".
func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Index is an OCI image index: index.json, or a multi-platform image.
type Index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []Descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// ImageConfig is the part of an OCI image configuration this package
// writes.
type ImageConfig struct {
	Created      *time.Time `json:"created,omitempty"`
	Architecture string     `json:"architecture"`
	OS           string     `json:"os"`
	Variant      string     `json:"variant,omitempty"`
	Config       struct {
		User       string            `json:"User,omitempty"`
		Env        []string          `json:"Env,omitempty"`
		Entrypoint []string          `json:"Entrypoint,omitempty"`
		Cmd        []string          `json:"Cmd,omitempty"`
		WorkingDir string            `json:"WorkingDir,omitempty"`
		Labels     map[string]string `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// Entry is one file system entry of a layer. Exactly one of a regular file
// (Data, possibly empty), a directory (Dir) or a symbolic link (Link) is
// described; Mode holds the permission bits.
type Entry struct {
	Path string // relative, without leading slash: "usr/bin/app"
	Mode int64
	Dir  bool
	Link string
	Data []byte
}

// Layer is a layer blob and its diff ID (the digest of the uncompressed
// tar), ready to be put into an Image.
type Layer struct {
	blob      blob
	mediaType string
	diffID    string
}

// NewLayer returns a layer holding entries in the given order, gzip
// compressed when compress is set. Parent directories are not implied:
// list them.
func NewLayer(entries []Entry, compress bool) (Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Path, Mode: e.Mode, ModTime: epoch}
		switch {
		case e.Dir:
			hdr.Typeflag = tar.TypeDir
			if !strings.HasSuffix(hdr.Name, "/") {
				hdr.Name += "/"
			}
		case e.Link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Link
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return Layer{}, fmt.Errorf("layer entry %s: %w", e.Path, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return Layer{}, fmt.Errorf("layer entry %s: %w", e.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return Layer{}, fmt.Errorf("close layer: %w", err)
	}
	raw := newBlob(buf.Bytes())
	if !compress {
		return Layer{blob: raw, mediaType: MediaTypeLayer, diffID: raw.digest}, nil
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return Layer{}, err
	}
	// The gzip header carries no name and no time: reproducible.
	if _, err := zw.Write(raw.data); err != nil {
		return Layer{}, fmt.Errorf("compress layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return Layer{}, fmt.Errorf("compress layer: %w", err)
	}
	return Layer{blob: newBlob(gz.Bytes()), mediaType: MediaTypeLayerGzip, diffID: raw.digest}, nil
}

// Image is a single-platform image: its configuration (Architecture, OS
// and RootFS are filled in from Platform and Layers) and layers, bottom
// first.
type Image struct {
	Platform Platform
	Config   ImageConfig
	Layers   []Layer
	// Annotations go on the image manifest.
	Annotations map[string]string
}

// Layout collects the blobs and named images of an image layout; Archive
// writes it out.
type Layout struct {
	blobs map[string]blob
	names []Descriptor // index.json's entries
}

// New returns an empty layout.
func New() *Layout { return &Layout{blobs: map[string]blob{}} }

// AddImage adds a single-platform image called name (a full reference such
// as "localhost/pause:e2e") and returns its manifest's descriptor.
func (l *Layout) AddImage(name string, img Image) (Descriptor, error) {
	d, err := l.addManifest(img)
	if err != nil {
		return Descriptor{}, err
	}
	l.name(name, d)
	return d, nil
}

// AddIndex adds a multi-platform image called name: an image index over
// one manifest per image, each with its platform, carrying annotations.
// It returns the index's descriptor.
func (l *Layout) AddIndex(name string, annotations map[string]string, imgs ...Image) (Descriptor, error) {
	if len(imgs) == 0 {
		return Descriptor{}, fmt.Errorf("image index %s: no image", name)
	}
	idx := Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Annotations: annotations}
	seen := map[string]bool{}
	for _, img := range imgs {
		if p := img.Platform.String(); seen[p] {
			return Descriptor{}, fmt.Errorf("image index %s: two images for %s", name, p)
		}
		seen[img.Platform.String()] = true
		d, err := l.addManifest(img)
		if err != nil {
			return Descriptor{}, err
		}
		p := img.Platform
		d.Platform = &p
		idx.Manifests = append(idx.Manifests, d)
	}
	b, err := marshalBlob(idx)
	if err != nil {
		return Descriptor{}, err
	}
	l.blobs[b.digest] = b
	d := b.descriptor(MediaTypeIndex)
	l.name(name, d)
	return d, nil
}

// addManifest stores an image's layers, configuration and manifest.
func (l *Layout) addManifest(img Image) (Descriptor, error) {
	cfg := img.Config
	cfg.Architecture, cfg.OS, cfg.Variant = img.Platform.Architecture, img.Platform.OS, img.Platform.Variant
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{}
	man := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, Layers: []Descriptor{}, Annotations: img.Annotations}
	for _, layer := range img.Layers {
		l.blobs[layer.blob.digest] = layer.blob
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, layer.diffID)
		man.Layers = append(man.Layers, layer.blob.descriptor(layer.mediaType))
	}
	config, err := marshalBlob(cfg)
	if err != nil {
		return Descriptor{}, err
	}
	l.blobs[config.digest] = config
	man.Config = config.descriptor(MediaTypeConfig)
	mb, err := marshalBlob(man)
	if err != nil {
		return Descriptor{}, err
	}
	l.blobs[mb.digest] = mb
	return mb.descriptor(MediaTypeManifest), nil
}

// name adds an index.json entry for d, annotated with the full reference
// and, when it has one, the tag.
func (l *Layout) name(ref string, d Descriptor) {
	d.Annotations = map[string]string{AnnotationImageName: ref}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		d.Annotations[AnnotationRefName] = ref[i+1:]
	}
	l.names = append(l.names, d)
}

// Archive returns the layout as a tar archive: oci-layout, index.json and
// blobs/sha256/<hex> for every blob.
func (l *Layout) Archive() ([]byte, error) {
	var buf bytes.Buffer
	if err := l.Write(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile writes the layout's tar archive to path, readable by all,
// through a temporary file next to it renamed into place: readers never
// see a partial archive.
func (l *Layout) WriteFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if err := l.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Write writes the layout's tar archive to w.
func (l *Layout) Write(w io.Writer) error {
	indexJSON, err := json.Marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: l.names})
	if err != nil {
		return fmt.Errorf("encode index.json: %w", err)
	}
	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch}); err != nil {
			return fmt.Errorf("write image layout: %w", err)
		}
	}
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
	}
	for _, digest := range slices.Sorted(maps.Keys(l.blobs)) {
		files = append(files, struct {
			name string
			data []byte
		}{"blobs/sha256/" + strings.TrimPrefix(digest, "sha256:"), l.blobs[digest].data})
	}
	for _, f := range files {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write image layout %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("write image layout %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close image layout: %w", err)
	}
	return nil
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

func (b blob) descriptor(mediaType string) Descriptor {
	return Descriptor{MediaType: mediaType, Digest: b.digest, Size: int64(len(b.data))}
}

func marshalBlob(v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, fmt.Errorf("encode %T: %w", v, err)
	}
	return newBlob(data), nil
}
