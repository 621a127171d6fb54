package fakesysfs

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
)

func TestMemFSConformsToIOFS(t *testing.T) {
	fsys := NewMemFS()
	fsys.WriteFile("a/b/c", "one")
	fsys.WriteFile("a/d", "two")
	fsys.WriteFile("e", "")
	if err := fstest.TestFS(fsys, "a/b/c", "a/d", "e"); err != nil {
		t.Fatal(err)
	}
}

func TestMemFSEdits(t *testing.T) {
	fsys := NewMemFS()
	fsys.WriteFile("a/b/c", "one")
	fsys.WriteFile("a/b/d", "two")
	fsys.WriteFile("a/b/c", "three")
	if got, err := fs.ReadFile(fsys, "a/b/c"); err != nil || string(got) != "three" {
		t.Errorf("ReadFile(a/b/c) = %q, %v; want three", got, err)
	}
	fsys.Remove("a/b/c")
	if _, err := fs.Stat(fsys, "a/b/c"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a removed file: %v", err)
	}
	fsys.Remove("a")
	if _, err := fs.ReadDir(fsys, "a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadDir of a removed tree: %v", err)
	}
	if entries, err := fs.ReadDir(fsys, "."); err != nil || len(entries) != 0 {
		t.Errorf("root after removing everything: %v, %v", entries, err)
	}
	if _, err := fsys.ReadFile("../x"); err == nil {
		t.Error("ReadFile accepted an invalid path")
	}
}
