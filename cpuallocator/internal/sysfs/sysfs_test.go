package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReaderNamesFiles(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "devices/virtual/mem/null"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "devices/virtual/mem/null/dev"), []byte("1:3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Reader{FS: os.DirFS(root), Root: root}
	if _, err := r.ReadInt("devices/virtual/mem/null/dev"); err == nil ||
		err.Error() != filepath.Join(root, "devices/virtual/mem/null/dev")+`: malformed integer "1:3"` {
		t.Errorf("ReadInt: %v", err)
	}
	if s, err := r.Read("devices/virtual/mem/null/dev"); err != nil || s != "1:3" {
		t.Errorf("Read = %q, %v", s, err)
	}
	if _, err := r.Read("devices/none"); err == nil || err.Error() != "read "+filepath.Join(root, "devices/none")+": no such file or directory" {
		t.Errorf("Read of a missing file: %v", err)
	}
	if _, err := r.ReadDir("devices/none"); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadDir of a missing directory: %v", err)
	}
	if !r.Exists("devices/virtual") || r.Exists("devices/none") {
		t.Error("Exists is wrong")
	}
	if got := (Reader{FS: os.DirFS(root)}).Name("devices/none"); got != "devices/none" {
		t.Errorf("Name without a root = %q", got)
	}
}
