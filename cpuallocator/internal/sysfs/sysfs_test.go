package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
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

// hostileTree writes a tree at dir/sys with ordinary links, and links that
// dangle, loop, are absolute or lead out of the root, next to dir/outside,
// which nothing inside may reach. It returns the root.
func hostileTree(t testing.TB, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "sys")
	files := map[string]string{
		"devices/pci0000:00/0000:00:01.0/numa_node": "0\n",
		"devices/virtual/mem/null/dev":              "1:3\n",
		"../outside/numa_node":                      "7\n",
	}
	links := map[string]string{
		"dev/char/1:3":          "../../devices/virtual/mem/null",
		"dev/char/2:0":          "../../devices/pci0000:00/0000:00:01.0",
		"dev/char/chain":        "1:3",
		"dev/char/dangling":     "../../devices/gone",
		"dev/char/self":         "self",
		"dev/char/ping":         "pong",
		"dev/char/pong":         "ping",
		"dev/char/up":           "../..",
		"dev/char/above":        "../../..",
		"dev/char/out":          "../../../outside",
		"dev/char/deep-out":     "../../devices/../../outside",
		"dev/char/abs":          "/etc",
		"dev/char/dotdot":       "../char/../char/1:3",
		"dev/char/grow":         "grow/grow",
		"devices/virtual/cycle": "../virtual/cycle/x",
		"devices/loopdir":       ".",
	}
	for p, content := range files {
		name := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		name := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestResolve(t *testing.T) {
	r := Reader{FS: os.DirFS(hostileTree(t, t.TempDir()))}
	tests := []struct {
		rel      string
		want     string // "" with err: the error must contain err
		err      string
		notExist bool
	}{
		{rel: "dev/char/1:3", want: "devices/virtual/mem/null"},
		{rel: "dev/char/2:0", want: "devices/pci0000:00/0000:00:01.0"},
		{rel: "dev/char/2:0/numa_node", want: "devices/pci0000:00/0000:00:01.0/numa_node"},
		{rel: "dev/char/chain", want: "devices/virtual/mem/null"},
		{rel: "dev/char/dotdot", want: "devices/virtual/mem/null"},
		{rel: "dev/char/up", want: "."},
		{rel: "devices/loopdir/loopdir/loopdir/pci0000:00", want: "devices/pci0000:00"},
		{rel: "dev", want: "dev"},
		{rel: ".", want: "."},
		{rel: "dev/char/missing", err: "no such file", notExist: true},
		{rel: "dev/char/dangling", err: "devices/gone", notExist: true},
		{rel: "dev/char/self", err: "more than 40 symbolic links"},
		{rel: "dev/char/ping", err: "more than 40 symbolic links"},
		{rel: "dev/char/grow", err: "symbolic links"},
		{rel: "devices/virtual/cycle", err: "symbolic links"},
		{rel: "dev/char/out", err: "above the sysfs root"},
		{rel: "dev/char/deep-out", err: "above the sysfs root"},
		{rel: "dev/char/above", err: "above the sysfs root"},
		{rel: "dev/char/above/sys/dev", err: "above the sysfs root"},
		{rel: "dev/char/1:3/../../mem/null", err: "not a path relative"},
		{rel: "dev/char/abs", err: `absolute path "/etc"`},
		{rel: "devices/pci0000:00/0000:00:01.0/numa_node/x", err: "not a directory"},
		{rel: "../outside", err: "not a path relative"},
		{rel: "/etc", err: "not a path relative"},
		{rel: "dev/./char", err: "not a path relative"},
	}
	for _, tt := range tests {
		t.Run(tt.rel, func(t *testing.T) {
			got, err := r.Resolve(tt.rel)
			if tt.err == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Resolve = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Resolve = %q, %v; want an error with %q", got, err, tt.err)
			}
			if errors.Is(err, fs.ErrNotExist) != tt.notExist {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = %v, want %v", err, !tt.notExist, tt.notExist)
			}
		})
	}
}

func TestResolveNamesFiles(t *testing.T) {
	root := hostileTree(t, t.TempDir())
	r := Reader{FS: os.DirFS(root), Root: root}
	if _, err := r.Resolve("dev/char/dangling"); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "devices/gone")) {
		t.Errorf("Resolve names the missing file under the root: %v", err)
	}
}

// FuzzResolve checks that whatever path it is given, Resolve ends, and
// what it returns is a path inside the root that exists and names no
// link: nothing read through it can leave the root.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{
		"dev/char/1:3", "dev/char/out", "dev/char/above/sys", "dev/char/up/dev/char/up", "dev/char/ping/x",
		"dev/char/dotdot/../..", "devices/loopdir/loopdir/../..", "dev/char/grow",
		"dev/char/2:0/../../../../..", "dev/char/abs/passwd",
	} {
		f.Add(seed)
	}
	root := hostileTree(f, f.TempDir())
	r := Reader{FS: os.DirFS(root)}
	f.Fuzz(func(t *testing.T, rel string) {
		got, err := r.Resolve(rel)
		if err != nil {
			return
		}
		if !fs.ValidPath(got) {
			t.Fatalf("Resolve(%q) = %q, not a path inside the root", rel, got)
		}
		if len(strings.Split(got, "/")) > MaxDepth {
			t.Fatalf("Resolve(%q) = %q, deeper than %d", rel, got, MaxDepth)
		}
		for p := got; p != "."; p = path.Dir(p) {
			info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil {
				t.Fatalf("Resolve(%q) = %q: %s: %v", rel, got, p, err)
			}
			if info.Mode()&fs.ModeSymlink != 0 {
				t.Fatalf("Resolve(%q) = %q names the link %s", rel, got, p)
			}
		}
	})
}

// countingFS counts the Lstat and ReadLink calls that reach the tree.
type countingFS struct {
	fs.ReadLinkFS
	calls int
}

func (c *countingFS) Lstat(name string) (fs.FileInfo, error) {
	c.calls++
	return c.ReadLinkFS.Lstat(name)
}

func (c *countingFS) ReadLink(name string) (string, error) {
	c.calls++
	return c.ReadLinkFS.ReadLink(name)
}

func TestMemo(t *testing.T) {
	root := hostileTree(t, t.TempDir())
	tree := &countingFS{ReadLinkFS: os.DirFS(root).(fs.ReadLinkFS)}
	r := Reader{FS: Memo(tree)}
	for _, rel := range []string{"dev/char/chain", "dev/char/1:3", "dev/char/missing"} {
		want, wantErr := Reader{FS: os.DirFS(root)}.Resolve(rel)
		for i := 0; i < 2; i++ {
			before := tree.calls
			got, err := r.Resolve(rel)
			if got != want || (err == nil) != (wantErr == nil) {
				t.Fatalf("Resolve(%q) through Memo = %q, %v; want %q, %v", rel, got, err, want, wantErr)
			}
			if i == 1 && tree.calls != before {
				t.Errorf("Resolve(%q) again asked the tree %d more times", rel, tree.calls-before)
			}
		}
	}
	if data, err := fs.ReadFile(r.FS, "devices/virtual/mem/null/dev"); err != nil || string(data) != "1:3\n" {
		t.Errorf("ReadFile through Memo = %q, %v", data, err)
	}
	if entries, err := fs.ReadDir(r.FS, "dev/char"); err != nil || len(entries) == 0 {
		t.Errorf("ReadDir through Memo = %v, %v", entries, err)
	}
}
