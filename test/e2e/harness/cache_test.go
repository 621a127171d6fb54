package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cacheBuilder builds a two-file entry and counts its builds.
type cacheBuilder struct {
	builds int
	fail   error
}

func (b *cacheBuilder) build(_ context.Context, dir string) error {
	b.builds++
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "data"), []byte("data"), 0o644); err != nil {
		return err
	}
	if err := os.Symlink("sub/data", filepath.Join(dir, "link")); err != nil {
		return err
	}
	return b.fail
}

func TestCacheEntryRebuildsWhatItCannotTrust(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage changes a built entry; nil leaves it alone.
		damage  func(t *testing.T, dir string)
		rebuild bool
		// logged is part of the message that says why it was rebuilt.
		logged string
	}{
		{name: "intact", rebuild: false},
		{name: "file truncated", rebuild: true, logged: "tool is a file 755 3 bytes", damage: func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "tool"), 3); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "same size, other bytes", rebuild: true, logged: "does not match its manifest", damage: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "sub", "data"), []byte("DATA"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "file missing", rebuild: true, logged: "sub/data is missing", damage: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "sub", "data")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "file added", rebuild: true, logged: "sub/extra is not in the manifest", damage: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "sub", "extra"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "mode changed", rebuild: true, logged: "does not match its manifest", damage: func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "tool"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "link retargeted", rebuild: true, logged: "does not match its manifest", damage: func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "link"))
			if err := os.Symlink("tool", filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "manifest truncated", rebuild: true, logged: "the manifest is truncated", damage: func(t *testing.T, dir string) {
			data, err := os.ReadFile(filepath.Join(dir, cacheManifest))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, cacheManifest), data[:len(data)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "manifest missing", rebuild: true, logged: "has no manifest", damage: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, cacheManifest)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(CacheDirEnv, t.TempDir())
			var b cacheBuilder
			var log strings.Builder
			logf := Logf(func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) })
			ctx := context.Background()
			dir, err := CacheEntry(ctx, "tool", "v1-abc", logf, b.build)
			if err != nil {
				t.Fatal(err)
			}
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			log.Reset()
			again, err := CacheEntry(ctx, "tool", "v1-abc", logf, b.build)
			if err != nil {
				t.Fatal(err)
			}
			if again != dir {
				t.Errorf("second use returned %s, first %s", again, dir)
			}
			if want := map[bool]int{false: 1, true: 2}[tc.rebuild]; b.builds != want {
				t.Errorf("built %d times, want %d; log:\n%s", b.builds, want, log.String())
			}
			if !strings.Contains(log.String(), tc.logged) {
				t.Errorf("log does not say %q:\n%s", tc.logged, log.String())
			}
			if err := verifyCacheEntry(dir); err != nil {
				t.Errorf("after the second use the entry does not verify: %v", err)
			}
			if data, err := os.ReadFile(filepath.Join(dir, "sub", "data")); err != nil || string(data) != "data" {
				t.Errorf("sub/data = %q, %v; want the built content", data, err)
			}
		})
	}
}

func TestCacheEntryKeepsNothingOfAFailedBuild(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(CacheDirEnv, cache)
	b := cacheBuilder{fail: errors.New("compiler crashed")}
	if _, err := CacheEntry(context.Background(), "tool", "v1-abc", nil, b.build); err == nil || !strings.Contains(err.Error(), "compiler crashed") {
		t.Fatalf("CacheEntry = %v, want the build's error", err)
	}
	for _, name := range []string{"v1-abc", "v1-abc.tmp"} {
		if _, err := os.Stat(filepath.Join(cache, "tool", name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a failed build: %v, want it absent", name, err)
		}
	}
	b.fail = nil
	if _, err := CacheEntry(context.Background(), "tool", "v1-abc", nil, b.build); err != nil {
		t.Fatalf("a later build: %v", err)
	}
}

func TestCacheEntryRefusesKeysThatLeaveTheCache(t *testing.T) {
	t.Setenv(CacheDirEnv, t.TempDir())
	for _, key := range []string{"", "../x", "a/b", ".hidden"} {
		var b cacheBuilder
		if _, err := CacheEntry(context.Background(), "tool", key, nil, b.build); err == nil || b.builds != 0 {
			t.Errorf("key %q: err %v after %d builds, want a refusal", key, err, b.builds)
		}
	}
}

func TestCacheDir(t *testing.T) {
	tmp := t.TempDir()
	for _, tc := range []struct {
		env, xdg, home, want string
	}{
		{env: filepath.Join(tmp, "explicit"), xdg: filepath.Join(tmp, "xdg"), want: filepath.Join(tmp, "explicit")},
		{xdg: filepath.Join(tmp, "xdg"), home: filepath.Join(tmp, "home"), want: filepath.Join(tmp, "xdg", "nri-cpumanager")},
		{home: filepath.Join(tmp, "home"), want: filepath.Join(tmp, "home", ".cache", "nri-cpumanager")},
	} {
		t.Setenv(CacheDirEnv, tc.env)
		t.Setenv("XDG_CACHE_HOME", tc.xdg)
		t.Setenv("HOME", tc.home)
		got, err := CacheDir()
		if err != nil || got != tc.want {
			t.Errorf("CacheDir() with %s=%q XDG_CACHE_HOME=%q HOME=%q = %q, %v; want %q", CacheDirEnv, tc.env, tc.xdg, tc.home, got, err, tc.want)
		}
		if st, err := os.Stat(tc.want); err != nil || !st.IsDir() {
			t.Errorf("%s not created: %v", tc.want, err)
		}
	}
}

func TestCacheKey(t *testing.T) {
	a := CacheKey("v1.2.3", "linux", "amd64")
	if !strings.HasPrefix(a, "v1.2.3-") || len(a) != len("v1.2.3-")+12 {
		t.Errorf("CacheKey = %q, want v1.2.3- and 12 hex digits", a)
	}
	for _, other := range []string{CacheKey("v1.2.3", "linux", "arm64"), CacheKey("v1.2.3", "linuxamd64"), CacheKey("v1.2.3", "linux", "amd64", "")} {
		if other == a {
			t.Errorf("different inputs share the key %q", a)
		}
	}
	if again := CacheKey("v1.2.3", "linux", "amd64"); again != a {
		t.Errorf("CacheKey is not stable: %q then %q", a, again)
	}
}
