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

func (f *faultFS) OpenSpare(path string) (spareFile, error) {
	if err := f.fail("openspare"); err != nil {
		return nil, err
	}
	spare, err := f.osFS.OpenSpare(path)
	if err != nil {
		return nil, err
	}
	return &faultSpare{spareFile: spare, fs: f}, nil
}

func (f *faultFS) Exchange(path1, path2 string) error {
	if err := f.fail("exchange"); err != nil {
		return err
	}
	return f.osFS.Exchange(path1, path2)
}

// faultSpare is a spare file of a faultFS.
type faultSpare struct {
	spareFile
	fs *faultFS
}

func (f *faultSpare) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail("writespare"); err != nil {
		return 0, err
	}
	return f.spareFile.WriteAt(p, off)
}

func (f *faultSpare) Datasync() error {
	if err := f.fs.fail("datasync"); err != nil {
		return err
	}
	return f.spareFile.Datasync()
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
		// spare: the failing Save is one that rewrites the spare file (a
		// store's Save after one that succeeded); otherwise the first
		// Save of a store, which writes a new temp file.
		spare bool
	}{
		{"create", "create temp file: create (injected): read-only file system", syscall.EROFS, false},
		{"write", "write temp file: write (injected): no space left on device", syscall.ENOSPC, false},
		{"sync", "fsync temp file: sync (injected): no space left on device", syscall.ENOSPC, false},
		{"rename", "rename temp file: rename (injected): input/output error", syscall.EIO, false},
		{"openspare", "open spare file: openspare (injected): read-only file system", syscall.EROFS, true},
		{"writespare", "write spare file: writespare (injected): no space left on device", syscall.ENOSPC, true},
		{"datasync", "fdatasync spare file: datasync (injected): input/output error", syscall.EIO, true},
		{"exchange", "exchange (injected): input/output error", syscall.EIO, true},
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
			if !tc.spare { // a restarted plugin's first Save
				st = quietStore(newStore(dir, fsys))
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

// TestSaveAfterAFailedSaveWritesANewFile: once a Save failed, the names
// on disk may be behind the running system's (a directory sync that
// failed after the exchange), so the spare may be what the disk calls the
// checkpoint: the next Save must not rewrite it, and writes a new temp
// file; the one after that uses the spare again.
func TestSaveAfterAFailedSaveWritesANewFile(t *testing.T) {
	dir := t.TempDir()
	fsys := &countingFS{faultFS: faultFS{op: "syncdir"}}
	st := quietStore(newStore(dir, fsys))
	states := []*State{sampleState(t), sampleStateFull(t)}
	for i, want := range []struct {
		fail             bool
		temps, exchanges int
	}{
		{false, 1, 0}, // a store's first Save: a new file
		{false, 0, 1}, // then the spare
		{true, 0, 1},  // the spare, exchanged, but the directory sync fails
		{false, 1, 0}, // so a new file
		{false, 0, 1}, // and the spare again
	} {
		fsys.temps, fsys.exchanges = 0, 0
		fsys.err = nil
		if want.fail {
			fsys.err = syscall.EIO
		}
		err := st.Save(states[i%2])
		if (err != nil) != want.fail || fsys.temps != want.temps || fsys.exchanges != want.exchanges {
			t.Fatalf("Save %d: error %v, %d temp files and %d exchanges; want failure %v, %d and %d",
				i, err, fsys.temps, fsys.exchanges, want.fail, want.temps, want.exchanges)
		}
	}
	if got := inspectDir(t, dir); !got.Equal(states[0]) {
		t.Error("the last Save is not on disk")
	}
}

// TestSaveWithoutExchange: on a file system that cannot exchange two
// names, Save writes a new temp file every time, and says so once.
func TestSaveWithoutExchange(t *testing.T) {
	dir := t.TempDir()
	fsys := &countingFS{faultFS: faultFS{op: "exchange", err: errNoExchange}}
	log, hook := test.NewNullLogger()
	st := newStore(dir, fsys)
	st.SetLogger(log)
	states := []*State{sampleState(t), sampleStateFull(t)}
	for i := range 4 {
		if err := st.Save(states[i%2]); err != nil {
			t.Fatalf("Save %d: %v", i, err)
		}
		if got := inspectDir(t, dir); !got.Equal(states[i%2]) {
			t.Fatalf("Save %d is not on disk", i)
		}
	}
	if fsys.temps != 4 {
		t.Errorf("%d temp files for 4 Saves, want 4", fsys.temps)
	}
	var warnings int
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "cannot exchange two names") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings that the file system cannot exchange names, want 1", warnings)
	}
}

// countingFS is a faultFS that counts the temp files created and the
// exchanges made.
type countingFS struct {
	faultFS
	temps, exchanges int
}

func (f *countingFS) CreateTemp(dir, prefix string) (file, error) {
	f.temps++
	return f.faultFS.CreateTemp(dir, prefix)
}

func (f *countingFS) Exchange(path1, path2 string) error {
	err := f.faultFS.Exchange(path1, path2)
	if err == nil {
		f.exchanges++
	}
	return err
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
