// Package ocilayouttest reads OCI image layout archives back in tests: the
// entries of a tar archive and the blobs of a layout, checked against
// their descriptors. It depends on nothing of the project, so the tests of
// hack/ocilayout itself can use it.
package ocilayouttest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// ReadTar returns the headers and contents of a tar archive's entries by
// name. An entry present twice is an error of the test.
func ReadTar(t testing.TB, data []byte) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	headers, contents := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, contents
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		if _, dup := headers[hdr.Name]; dup {
			t.Errorf("%s twice in the archive", hdr.Name)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read tar entry %s: %v", hdr.Name, err)
		}
		headers[hdr.Name], contents[hdr.Name] = hdr, body
	}
}

// Digest is the OCI digest of data ("sha256:<hex>").
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Blob returns the blob of a layout's contents (as ReadTar returns them)
// that a descriptor with digest and size points at, checking both, and
// decodes it as JSON into v unless v is nil.
func Blob(t testing.TB, contents map[string][]byte, digest string, size int64, v any) []byte {
	t.Helper()
	data, ok := contents["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	if !ok {
		t.Fatalf("no blob %s", digest)
	}
	if got := Digest(data); got != digest || int64(len(data)) != size {
		t.Fatalf("blob %s: digest %s, size %d, descriptor size %d", digest, got, len(data), size)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("decode blob %s: %v", digest, err)
		}
	}
	return data
}
