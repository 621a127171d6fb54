package fakesysfs

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// MemFS is an in-memory file tree. Unlike testing/fstest.MapFS, whose
// directory listings and misses scan every file, it answers every lookup
// from maps, so discovering a 4096-CPU machine from it is as quick as from
// /sys. It implements fs.ReadFileFS, fs.ReadDirFS and fs.StatFS. It is not
// safe for concurrent modification.
type MemFS struct {
	files map[string][]byte
	// dirs maps a directory to its children (name → is a directory).
	dirs map[string]map[string]bool
}

// NewMemFS returns an empty tree.
func NewMemFS() *MemFS {
	return &MemFS{files: map[string][]byte{}, dirs: map[string]map[string]bool{".": {}}}
}

// WriteFile creates or replaces the file name (slash-separated, relative)
// and any missing parent directories.
func (m *MemFS) WriteFile(name, content string) {
	m.files[name] = []byte(content)
	for child, isDir := name, false; child != "."; child, isDir = path.Dir(child), true {
		parent := path.Dir(child)
		if m.dirs[parent] == nil {
			m.dirs[parent] = map[string]bool{}
		}
		m.dirs[parent][path.Base(child)] = isDir
	}
}

// Remove deletes the file or the directory tree name.
func (m *MemFS) Remove(name string) {
	delete(m.files, name)
	if children, ok := m.dirs[name]; ok {
		for child := range children {
			m.Remove(path.Join(name, child))
		}
		delete(m.dirs, name)
	}
	if parent := m.dirs[path.Dir(name)]; parent != nil {
		delete(parent, path.Base(name))
	}
}

func (m *MemFS) lookup(op, name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m.files[name]; ok {
		return memInfo{name: path.Base(name), size: int64(len(data))}, nil
	}
	if _, ok := m.dirs[name]; ok {
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

// Open opens a file or a directory.
func (m *MemFS) Open(name string) (fs.File, error) {
	info, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		entries, _ := m.ReadDir(name)
		return &memDir{info: info, entries: entries}, nil
	}
	return &memFile{info: info, Reader: bytes.NewReader(m.files[name])}, nil
}

// ReadFile returns a copy of the file's content.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	info, err := m.lookup("readfile", name)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	return bytes.Clone(m.files[name]), nil
}

// ReadDir lists a directory, sorted by name.
func (m *MemFS) ReadDir(name string) ([]fs.DirEntry, error) {
	info, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	entries := make([]fs.DirEntry, 0, len(m.dirs[name]))
	for child, isDir := range m.dirs[name] {
		var size int64
		if !isDir {
			size = int64(len(m.files[path.Join(name, child)]))
		}
		entries = append(entries, fs.FileInfoToDirEntry(memInfo{name: child, dir: isDir, size: size}))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries, nil
}

// Stat describes a file or a directory.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) { return m.lookup("stat", name) }

// memInfo is the fs.FileInfo of a MemFS entry.
type memInfo struct {
	name string
	dir  bool
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

type memFile struct {
	info fs.FileInfo
	*bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

type memDir struct {
	info    fs.FileInfo
	entries []fs.DirEntry
	read    int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Close() error               { return nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.Name(), Err: fs.ErrInvalid}
}

// ReadDir implements fs.ReadDirFile.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.read:]
	if n <= 0 {
		d.read = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	rest = rest[:min(n, len(rest))]
	d.read += len(rest)
	return rest, nil
}

// String lists the tree's files, for failure messages.
func (m *MemFS) String() string {
	names := make([]string, 0, len(m.files))
	for n := range m.files {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "\n")
}
