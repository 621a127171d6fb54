// Package sysfs reads a sysfs tree whose root is a parameter, so that what
// the plugin reads of sysfs is read one way, from /sys in production and
// from fixture trees in tests. Paths are slash-separated and relative to
// the sysfs root; errors name files by the root they were given, or by
// their relative path when the tree has no name.
package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Reader reads files of a sysfs tree.
type Reader struct {
	// FS is the tree, rooted at the sysfs root.
	FS fs.FS
	// Root names the sysfs root in errors ("/sys"); "" names files by
	// their path relative to it.
	Root string
}

// Name is how errors name the file rel.
func (r Reader) Name(rel string) string {
	if r.Root == "" {
		return rel
	}
	return filepath.Join(r.Root, filepath.FromSlash(rel))
}

// Read returns the content of the file rel, spaces trimmed.
func (r Reader) Read(rel string) (string, error) {
	data, err := fs.ReadFile(r.FS, rel)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", r.Name(rel), Pathless(err))
	}
	return strings.TrimSpace(string(data)), nil
}

// ReadInt returns the integer the file rel holds.
func (r Reader) ReadInt(rel string) (int, error) {
	s, err := r.Read(rel)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: malformed integer %q", r.Name(rel), s)
	}
	return v, nil
}

// Exists reports whether rel can be stat'ed.
func (r Reader) Exists(rel string) bool {
	_, err := fs.Stat(r.FS, rel)
	return err == nil
}

// ReadDir lists the directory rel, sorted by name.
func (r Reader) ReadDir(rel string) ([]fs.DirEntry, error) {
	entries, err := fs.ReadDir(r.FS, rel)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.Name(rel), Pathless(err))
	}
	return entries, nil
}

// Pathless drops the path a file system error repeats: the caller names
// the file itself, relative to the sysfs root it was given.
func Pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
