package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/nri-cpumanager/nri-cpumanager/hack/ocilayout"
)

// Layout is an OCI image layout archive read back: its files by name.
type Layout struct {
	files map[string][]byte
}

// ReadLayout reads the OCI image layout archive at file.
func ReadLayout(file string) (*Layout, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	files, err := untar(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if _, ok := files["oci-layout"]; !ok {
		return nil, fmt.Errorf("%s: not an OCI image layout (no oci-layout file)", file)
	}
	return &Layout{files: files}, nil
}

// untar returns the regular files of a tar stream by name.
func untar(r io.Reader) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[path.Clean(strings.TrimPrefix(h.Name, "./"))] = data
	}
}

// Blob returns the blob d points at, checked against its digest and size,
// and decodes it into v unless v is nil.
func (l *Layout) Blob(d ocilayout.Descriptor, v any) ([]byte, error) {
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("digest %q is not sha256", d.Digest)
	}
	data, ok := l.files["blobs/sha256/"+hexDigest]
	if !ok {
		return nil, fmt.Errorf("no blob %s", d.Digest)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest || int64(len(data)) != d.Size {
		return nil, fmt.Errorf("blob %s does not match its descriptor", d.Digest)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			return nil, fmt.Errorf("blob %s: %w", d.Digest, err)
		}
	}
	return data, nil
}

// Index returns the layout's one image: its name (index.json's
// io.containerd.image.name, else its ref.name) and its descriptor.
func (l *Layout) Index() (string, ocilayout.Descriptor, error) {
	var index struct {
		Manifests []ocilayout.Descriptor `json:"manifests"`
	}
	data, ok := l.files["index.json"]
	if !ok {
		return "", ocilayout.Descriptor{}, errors.New("no index.json")
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return "", ocilayout.Descriptor{}, fmt.Errorf("index.json: %w", err)
	}
	if len(index.Manifests) != 1 {
		return "", ocilayout.Descriptor{}, fmt.Errorf("index.json names %d images, want 1", len(index.Manifests))
	}
	d := index.Manifests[0]
	name := d.Annotations[ocilayout.AnnotationImageName]
	if name == "" {
		name = d.Annotations[ocilayout.AnnotationRefName]
	}
	return name, d, nil
}

// PlatformImage is one platform's image of an index.
type PlatformImage struct {
	Platform ocilayout.Platform
	Manifest ocilayout.Descriptor
	Labels   map[string]string
	layers   []ocilayout.Descriptor
}

// Images returns the platforms' images of the image index d, and the
// index's annotations.
func (l *Layout) Images(d ocilayout.Descriptor) ([]PlatformImage, map[string]string, error) {
	if d.MediaType != ocilayout.MediaTypeIndex {
		return nil, nil, fmt.Errorf("%s is a %s, not an image index", d.Digest, d.MediaType)
	}
	var index struct {
		Manifests   []ocilayout.Descriptor `json:"manifests"`
		Annotations map[string]string      `json:"annotations"`
	}
	if _, err := l.Blob(d, &index); err != nil {
		return nil, nil, err
	}
	var imgs []PlatformImage
	for _, m := range index.Manifests {
		if m.Platform == nil {
			return nil, nil, fmt.Errorf("manifest %s of the index has no platform", m.Digest)
		}
		var manifest struct {
			Config ocilayout.Descriptor   `json:"config"`
			Layers []ocilayout.Descriptor `json:"layers"`
		}
		if _, err := l.Blob(m, &manifest); err != nil {
			return nil, nil, err
		}
		var config struct {
			Config struct {
				Labels map[string]string `json:"Labels"`
			} `json:"config"`
		}
		if _, err := l.Blob(manifest.Config, &config); err != nil {
			return nil, nil, err
		}
		imgs = append(imgs, PlatformImage{Platform: *m.Platform, Manifest: m, Labels: config.Config.Labels, layers: manifest.Layers})
	}
	return imgs, index.Annotations, nil
}

// File returns the content of the file at name (no leading /) in img's
// layers, the topmost layer's.
func (l *Layout) File(img PlatformImage, name string) ([]byte, error) {
	var found []byte
	for _, d := range img.layers {
		data, err := l.Blob(d, nil)
		if err != nil {
			return nil, err
		}
		var r io.Reader = bytes.NewReader(data)
		if strings.HasSuffix(d.MediaType, "+gzip") {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", d.Digest, err)
			}
			r = zr
		}
		files, err := untar(r)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", d.Digest, err)
		}
		if f, ok := files[name]; ok {
			found = f
		}
	}
	if found == nil {
		return nil, fmt.Errorf("the %s image has no /%s", img.Platform, name)
	}
	return found, nil
}
