package harness

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The build cache holds what the suites build from pinned versions and
// never change: containerd, the Kubernetes and etcd binaries, the VM's
// kernel, root file system and initramfs. It lives outside the checkout,
// so a fresh clone on a machine that ran the suites before starts warm
// (CI's clone included), and is shared by every checkout on the machine.
//
// An entry is a directory <cache>/<name>/<key>, where key names every
// input of the build (versions, flags, a recipe revision). It is built
// into a temporary directory, a manifest of its files (size, mode and
// SHA-256 of each) is written into it, and only then is it renamed into
// place: a build that dies half-way leaves no entry. Every use checks the
// entry against its manifest (seconds, even for the Kubernetes binaries),
// and an entry that does not match — truncated, edited, a file missing or
// added — is removed and built again, never trusted.

// CacheDirEnv names the build cache's directory instead of the default,
// $XDG_CACHE_HOME/nri-cpumanager or else ~/.cache/nri-cpumanager.
const CacheDirEnv = "NRI_CPUMANAGER_CACHE"

// cacheManifest is the name of an entry's manifest, inside the entry.
const cacheManifest = ".nri-cpumanager-cache-manifest"

// CacheDir returns the build cache's directory as an absolute path,
// creating it: $NRI_CPUMANAGER_CACHE, else $XDG_CACHE_HOME/nri-cpumanager,
// else $HOME/.cache/nri-cpumanager.
func CacheDir() (string, error) {
	dir := os.Getenv(CacheDirEnv)
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("build cache: set %s: %w", CacheDirEnv, err)
		}
		dir = filepath.Join(base, "nri-cpumanager")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("build cache %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("create the build cache: %w", err)
	}
	return abs, nil
}

// CacheEntry returns the directory of the build cache's entry name/key,
// building it first when it is missing or does not match its manifest:
// build gets an empty directory to fill, which becomes the entry only if
// build succeeds. Concurrent callers (other test binaries) wait on a lock
// file while one builds.
func CacheEntry(ctx context.Context, name, key string, logf Logf, build func(ctx context.Context, dir string) error) (string, error) {
	logf = logf.orDiscard()
	if strings.ContainsAny(name+key, `/\`) || name == "" || key == "" || strings.HasPrefix(key, ".") {
		return "", fmt.Errorf("build cache: invalid entry %q/%q", name, key)
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, name, key)
	lock, err := lockFile(dir + ".lock")
	if err != nil {
		return "", fmt.Errorf("build cache %s: %w", dir, err)
	}
	defer lock.Unlock()

	switch err := verifyCacheEntry(dir); {
	case err == nil:
		return dir, nil
	case errors.Is(err, fs.ErrNotExist):
		// Not built yet (or its manifest is gone: not trusted either).
		if _, statErr := os.Stat(dir); statErr == nil {
			logf("build cache: %s has no manifest (an interrupted build or an edit): building it again", dir)
		}
	default:
		logf("build cache: %s does not match its manifest (%v): building it again", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("build cache: remove the stale %s: %w", dir, err)
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	start := time.Now()
	if err := build(ctx, tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := writeCacheManifest(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("build cache %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("build cache: %w", err)
	}
	syncDir(filepath.Dir(dir))
	logf("build cache: %s built in %v", dir, time.Since(start).Round(time.Second))
	return dir, nil
}

// manifestLine describes one file of an entry: its path relative to the
// entry, a tab, then its type and permission bits, size and SHA-256
// (regular files) or target (symbolic links).
func manifestLine(root, path string, d fs.DirEntry) (string, error) {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(rel, "\n\t") {
		return "", fmt.Errorf("file name %q holds a newline or a tab", rel)
	}
	info, err := d.Info()
	if err != nil {
		return "", err
	}
	mode := info.Mode()
	switch {
	case mode.IsRegular():
		sum, err := fileSHA256(path)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s\tfile %o %d bytes sha256 %s", rel, mode.Perm(), info.Size(), sum), nil
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s\tsymlink to %s", rel, strconv.Quote(target)), nil
	case mode.IsDir():
		return fmt.Sprintf("%s\tdirectory %o", rel, mode.Perm()), nil
	default: // device nodes, FIFOs, sockets (a root file system's /dev)
		return fmt.Sprintf("%s\t%s", rel, mode.Type()), nil
	}
}

// describeCacheEntry returns the sorted manifest lines of every file under
// root but the manifest itself.
func describeCacheEntry(root string) ([]string, error) {
	var lines []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root || (d.Name() == cacheManifest && filepath.Dir(path) == root) {
			return nil
		}
		line, err := manifestLine(root, path, d)
		if err != nil {
			return fmt.Errorf("describe %s: %w", path, err)
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	return lines, err
}

// writeCacheManifest writes root's manifest and syncs it.
func writeCacheManifest(root string) error {
	lines, err := describeCacheEntry(root)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(root, cacheManifest))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	// The last line marks a complete manifest.
	fmt.Fprintf(w, "end %d\n", len(lines))
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// verifyCacheEntry returns nil when the entry at root matches its
// manifest, an error wrapping fs.ErrNotExist when it or its manifest is
// missing, else an error that says what differs.
func verifyCacheEntry(root string) error {
	data, err := os.ReadFile(filepath.Join(root, cacheManifest))
	if err != nil {
		return err
	}
	want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(want) == 0 || want[len(want)-1] != fmt.Sprintf("end %d", len(want)-1) {
		return errors.New("the manifest is truncated")
	}
	want = want[:len(want)-1]
	got, err := describeCacheEntry(root)
	if err != nil {
		return err
	}
	if diff := firstDifference(want, got); diff != "" {
		return errors.New(diff)
	}
	return nil
}

// firstDifference describes the first file in which two manifests
// differ, or returns "".
func firstDifference(want, got []string) string {
	files := func(lines []string) map[string]string {
		m := make(map[string]string, len(lines))
		for _, l := range lines {
			path, desc, _ := strings.Cut(l, "\t")
			m[path] = desc
		}
		return m
	}
	wantFiles, gotFiles := files(want), files(got)
	for _, l := range want {
		path, _, _ := strings.Cut(l, "\t")
		g, ok := gotFiles[path]
		switch {
		case !ok:
			return fmt.Sprintf("%s is missing", path)
		case g != wantFiles[path]:
			return fmt.Sprintf("%s is a %s, the manifest says a %s", path, g, wantFiles[path])
		}
	}
	for _, l := range got {
		if path, _, _ := strings.Cut(l, "\t"); wantFiles[path] == "" {
			return fmt.Sprintf("%s is not in the manifest", path)
		}
	}
	return ""
}

// fileSHA256 returns the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// syncDir flushes a directory's entries (a rename into it) to disk; a
// failure only weakens durability, which the manifest check covers.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// CacheKey returns a short stable key for an entry from the inputs of its
// build: a readable prefix and a hash of the parts.
func CacheKey(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return prefix + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}
