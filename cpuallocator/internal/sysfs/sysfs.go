// Package sysfs reads a sysfs tree whose root is a parameter, so that what
// the plugin reads of sysfs is read one way, from /sys in production and
// from fixture trees in tests. Paths are slash-separated and relative to
// the sysfs root; errors name files by the root they were given, or by
// their relative path when the tree has no name. Resolve follows links
// without ever leaving the root.
package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Bounds of Resolve: it never follows more links, nor builds a deeper
// path, so a hostile tree (link loops, endless chains) cannot make it hang.
const (
	// MaxLinks is the most symbolic links one Resolve follows, Linux's
	// MAXSYMLINKS.
	MaxLinks = 40
	// MaxDepth is the most components a resolved path may have. The
	// deepest real device paths (PCI behind several switches, a partition
	// of an NVMe namespace) have about 15.
	MaxDepth = 64
)

// Reader reads files of a sysfs tree.
type Reader struct {
	// FS is the tree, rooted at the sysfs root. Resolve needs it to
	// implement fs.ReadLinkFS (os.DirFS and os.Root.FS do).
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

// Resolve returns rel with every symbolic link on its way replaced by its
// target, as the kernel would resolve it with the sysfs root as the file
// system's root, but refusing to leave it: a ".." above the root and an
// absolute link are errors (sysfs links are all relative and stay inside
// /sys). The result names no link, so reading it cannot be redirected. A
// component that does not exist (a dangling link) is an error matching
// fs.ErrNotExist; more than MaxLinks links (a loop) and a path deeper than
// MaxDepth are errors too.
func (r Reader) Resolve(rel string) (string, error) {
	if !fs.ValidPath(rel) {
		return "", fmt.Errorf("resolve %q: not a path relative to the sysfs root", rel)
	}
	var done []string
	todo := strings.Split(rel, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", fmt.Errorf("resolve %s: a link leads above the sysfs root", r.Name(rel))
			}
			done = done[:len(done)-1]
			continue
		}
		done = append(done, c)
		if len(done) > MaxDepth {
			return "", fmt.Errorf("resolve %s: deeper than %d components", r.Name(rel), MaxDepth)
		}
		p := path.Join(done...)
		info, err := fs.Lstat(r.FS, p)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %s: %w", r.Name(rel), r.Name(p), Pathless(err))
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if links++; links > MaxLinks {
			return "", fmt.Errorf("resolve %s: more than %d symbolic links (a loop?)", r.Name(rel), MaxLinks)
		}
		target, err := fs.ReadLink(r.FS, p)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", r.Name(rel), Pathless(err))
		}
		if path.IsAbs(target) {
			return "", fmt.Errorf("resolve %s: %s links to the absolute path %q", r.Name(rel), r.Name(p), target)
		}
		done = done[:len(done)-1]
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
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

// Memo returns fsys with the answers of Lstat and ReadLink remembered, for
// one pass over a tree that does not change meanwhile: the devices of one
// container, whose lookups all start with the same few directories
// (dev/char, devices, a PCI root bus, a bridge). It is not safe for
// concurrent use.
func Memo(fsys fs.ReadLinkFS) fs.ReadLinkFS {
	return &memoFS{ReadLinkFS: fsys, lstat: map[string]lstatAnswer{}, links: map[string]linkAnswer{}}
}

type memoFS struct {
	fs.ReadLinkFS
	lstat map[string]lstatAnswer
	links map[string]linkAnswer
}

type lstatAnswer struct {
	info fs.FileInfo
	err  error
}

type linkAnswer struct {
	target string
	err    error
}

func (m *memoFS) Lstat(name string) (fs.FileInfo, error) {
	a, ok := m.lstat[name]
	if !ok {
		a.info, a.err = m.ReadLinkFS.Lstat(name)
		m.lstat[name] = a
	}
	return a.info, a.err
}

func (m *memoFS) ReadLink(name string) (string, error) {
	a, ok := m.links[name]
	if !ok {
		a.target, a.err = m.ReadLinkFS.ReadLink(name)
		m.links[name] = a
	}
	return a.target, a.err
}

// ReadFile and ReadDir keep the wrapped tree's own, quicker than the
// generic ones through Open.
func (m *memoFS) ReadFile(name string) ([]byte, error) { return fs.ReadFile(m.ReadLinkFS, name) }

func (m *memoFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(m.ReadLinkFS, name) }
