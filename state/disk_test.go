package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"golang.org/x/sys/unix"
)

// faultFS is the operating system's file system with one operation
// failing with err while err is set, as a full or read-only disk makes it
// fail.
type faultFS struct {
	osFS
	op  string // "create", "write", "sync", "rename", "syncdir"
	err error
}

func (f *faultFS) fail(op string) error {
	if f.err != nil && f.op == op {
		return &os.PathError{Op: op, Path: "(injected)", Err: f.err}
	}
	return nil
}

func (f *faultFS) CreateTemp(dir, prefix string) (file, error) {
	if err := f.fail("create"); err != nil {
		return nil, err
	}
	tmp, err := f.osFS.CreateTemp(dir, prefix)
	if err != nil {
		return nil, err
	}
	return &faultFile{file: tmp, fs: f}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.fail("rename"); err != nil {
		return err
	}
	return f.osFS.Rename(oldpath, newpath)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.fail("syncdir"); err != nil {
		return err
	}
	return f.osFS.SyncDir(dir)
}

// faultFile is a file of a faultFS.
type faultFile struct {
	file
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.fail("write"); err != nil {
		return 0, err
	}
	return f.file.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.fail("sync"); err != nil {
		return err
	}
	return f.file.Sync()
}

// TestSaveFailsWithTheDisksReasonAndRecovers: when the disk refuses a
// step of a Save, the Save fails saying why, leaves the previous file (and
// no temp file), Load still gives the previous state, and the next Save
// once the disk is back succeeds.
func TestSaveFailsWithTheDisksReasonAndRecovers(t *testing.T) {
	tests := []struct {
		op, reason string
		err        error
	}{
		{"create", "create temp file: create (injected): read-only file system", syscall.EROFS},
		{"write", "write temp file: write (injected): no space left on device", syscall.ENOSPC},
		{"sync", "fsync temp file: sync (injected): no space left on device", syscall.ENOSPC},
		{"rename", "rename temp file: rename (injected): input/output error", syscall.EIO},
	}
	before, after := sampleState(t), sampleStateFull(t)
	for _, tc := range tests {
		t.Run(tc.op, func(t *testing.T) {
			dir := t.TempDir()
			fsys := &faultFS{op: tc.op}
			st := quietStore(newStore(dir, fsys))
			if err := st.Save(before); err != nil {
				t.Fatal(err)
			}
			fsys.err = tc.err
			err := st.Save(after)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "save checkpoint "+st.Path()+": "+tc.reason) {
				t.Fatalf("Save on a failing disk: %v, want %q", err, tc.reason)
			}
			if got, err := st.Load(kepOnline); err != nil || !got.Equal(before) {
				t.Fatalf("Load after the failed Save: %v (previous state: %v)", err, got.Equal(before))
			}
			if leftovers, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(leftovers) > 0 {
				t.Errorf("the failed Save left %v", leftovers)
			}
			fsys.err = nil
			if err := st.Save(after); err != nil {
				t.Fatalf("Save once the disk is back: %v", err)
			}
			if got := inspectDir(t, dir); !got.Equal(after) {
				t.Error("the Save once the disk is back is not on disk")
			}
		})
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when the test ends; it skips the test where it cannot mount (not root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// remount makes the tmpfs at dir read-only or writable.
func remount(t *testing.T, dir string, readOnly bool) {
	t.Helper()
	flags := uintptr(unix.MS_REMOUNT)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, ""); err != nil {
		t.Fatalf("remount %s (read-only %v): %v", dir, readOnly, err)
	}
}

// TestStartAndSaveOnAFullDisk fills a small tmpfs: a new store loads the
// saved state (starting writes nothing), a Save fails with "no space left
// on device", and succeeds once there is room again.
func TestStartAndSaveOnAFullDisk(t *testing.T) {
	mnt := mountTmpfs(t, "64k")
	dir := filepath.Join(mnt, "state")
	first := openTestStore(t, dir)
	if err := first.Save(sampleState(t)); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	fill(t, filler)

	st := openTestStore(t, dir)
	if got, err := st.Load(kepOnline); err != nil || !got.Equal(sampleState(t)) {
		t.Fatalf("Load on a full disk: %v", err)
	}
	err := st.Save(sampleStateFull(t))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Save on a full disk: %v, want no space left on device", err)
	}
	if got := inspectDir(t, dir); !got.Equal(sampleState(t)) {
		t.Error("the failed Save changed the file")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := st.Save(sampleStateFull(t)); err != nil {
		t.Fatalf("Save once there is room: %v", err)
	}
	if got := inspectDir(t, dir); !got.Equal(sampleStateFull(t)) {
		t.Error("the Save once there is room is not on disk")
	}
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestStartAndSaveOnAReadOnlyDisk remounts a tmpfs read-only: a new store
// starts, with the existing lock file or, if there is none, without a
// lock and with a warning; it loads the saved state; a Save fails with
// "read-only file system", and succeeds once the disk is writable again.
func TestStartAndSaveOnAReadOnlyDisk(t *testing.T) {
	for _, withLockFile := range []bool{true, false} {
		name := map[bool]string{true: "with a lock file", false: "without a lock file"}[withLockFile]
		t.Run(name, func(t *testing.T) {
			mnt := mountTmpfs(t, "1m")
			dir := filepath.Join(mnt, "state")
			if withLockFile {
				first := openTestStore(t, dir)
				if err := first.Save(sampleState(t)); err != nil {
					t.Fatal(err)
				}
				if err := first.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, CheckpointFile), referenceEncoding(t, sampleState(t)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			remount(t, mnt, true)

			logger, hook := test.NewNullLogger()
			st, err := NewStore(dir, WithLogger(logger))
			if err != nil {
				t.Fatalf("NewStore on a read-only disk: %v", err)
			}
			t.Cleanup(func() { _ = st.Close() })
			warned := hook.LastEntry() != nil && hook.LastEntry().Level == logrus.WarnLevel &&
				strings.Contains(hook.LastEntry().Message, "read-only file system and has no lock file")
			if locked := st.lock != nil; locked != withLockFile || warned == withLockFile {
				t.Errorf("locked %v, warned %v; want the lock file's lock, else a warning", locked, warned)
			}
			if got, err := st.Load(kepOnline); err != nil || !got.Equal(sampleState(t)) {
				t.Fatalf("Load on a read-only disk: %v", err)
			}
			err = st.Save(sampleStateFull(t))
			if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "read-only file system") {
				t.Fatalf("Save on a read-only disk: %v, want read-only file system", err)
			}

			remount(t, mnt, false)
			if err := st.Save(sampleStateFull(t)); err != nil {
				t.Fatalf("Save once the disk is writable: %v", err)
			}
			if got := inspectDir(t, dir); !got.Equal(sampleStateFull(t)) {
				t.Error("the Save once the disk is writable is not on disk")
			}
		})
	}
}

// TestUntrustedStateThatCouldNotBeMovedAsideIsMovedBySave: Load cannot
// move a corrupt checkpoint aside on a read-only disk; the first Save once
// the disk takes writes moves it before it writes the new file, so that it
// is kept for inspection.
func TestUntrustedStateThatCouldNotBeMovedAsideIsMovedBySave(t *testing.T) {
	dir := t.TempDir()
	corrupt := []byte(`{"policyName":"static","formatVersion":2,"defaultCpuSet":"0-15","checksum":1}`)
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := &faultFS{op: "rename", err: syscall.EROFS}
	st := quietStore(newStore(dir, fsys))
	_, err := st.Load(kepOnline)
	var cerr *CorruptError
	if !errors.As(err, &cerr) || cerr.MovedTo != "" {
		t.Fatalf("Load of a corrupt file on a read-only disk: %v, want a *CorruptError that moved nothing", err)
	}
	fsys.err = nil
	if err := st.Save(sampleState(t)); err != nil {
		t.Fatal(err)
	}
	kept, err := filepath.Glob(filepath.Join(dir, CheckpointFile+corruptSuffix+"*"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("moved-aside files %v (%v), want the corrupt checkpoint", kept, err)
	}
	if data, err := os.ReadFile(kept[0]); err != nil || string(data) != string(corrupt) {
		t.Errorf("%s does not hold the corrupt checkpoint (%v)", kept[0], err)
	}
	if got := inspectDir(t, dir); !got.Equal(sampleState(t)) {
		t.Error("the Save is not on disk")
	}
}
