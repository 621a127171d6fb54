package state

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// errPowerLoss is what every call of a memFS returns once the power went
// out.
var errPowerLoss = errors.New("power loss")

// memFS is a file system of one directory in memory that models what a
// power loss keeps: a file's content only as of its last Sync, and the
// directory (creations, renames, removals) only as of its last SyncDir.
// The power goes out just before call number crashAt (0: never), which
// then fails, as does every later call; a Write cut by it writes half its
// bytes.
type memFS struct {
	dir string
	// files is the directory as the running system sees it; durable is
	// the directory as of the last SyncDir.
	files, durable map[string]*inode
	calls, crashAt int
	crashed        bool
	temps          int
	// lyingSync makes file Syncs do nothing: a disk that acknowledges
	// writes it has not made, for checking that the test notices.
	lyingSync bool
	// unsafeSpare is set when the spare is opened for writing while the
	// durable directory names its file as the checkpoint: a power loss
	// during the write would leave a torn checkpoint.
	unsafeSpare bool
}

// inode is a file's content as the system sees it and as of its last
// Sync.
type inode struct {
	data, synced []byte
}

func newMemFS(dir string) *memFS {
	return &memFS{dir: dir, files: map[string]*inode{}, durable: map[string]*inode{}}
}

// step counts a call and fails it if the power is out or goes out now.
func (m *memFS) step() error {
	if m.crashed {
		return errPowerLoss
	}
	m.calls++
	if m.calls == m.crashAt {
		m.crashed = true
		return errPowerLoss
	}
	return nil
}

// name returns the file name of path, which must be in m's directory.
func (m *memFS) name(op, path string) (string, error) {
	if filepath.Dir(path) != m.dir {
		return "", &fs.PathError{Op: op, Path: path, Err: fs.ErrNotExist}
	}
	return filepath.Base(path), nil
}

func (m *memFS) CreateTemp(dir, prefix string) (file, error) {
	if err := m.step(); err != nil {
		return nil, err
	}
	m.temps++
	name := fmt.Sprintf("%s%d", prefix, m.temps)
	ino := &inode{}
	m.files[name] = ino
	return &memFile{fs: m, path: filepath.Join(dir, name), ino: ino}, nil
}

// open counts a call that opens path and returns its file name and
// inode (nil when there is none).
func (m *memFS) open(path string) (string, *inode, error) {
	if err := m.step(); err != nil {
		return "", nil, err
	}
	name, err := m.name("open", path)
	if err != nil {
		return "", nil, err
	}
	return name, m.files[name], nil
}

func (m *memFS) ReadFile(path string) ([]byte, error) {
	_, ino, err := m.open(path)
	if err != nil {
		return nil, err
	}
	if ino == nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return bytes.Clone(ino.data), nil
}

func (m *memFS) ReadDir(dir string) ([]string, error) {
	if err := m.step(); err != nil {
		return nil, err
	}
	if dir != m.dir {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	return slices.Sorted(maps.Keys(m.files)), nil
}

// names counts a call of op on two paths and returns their file names.
func (m *memFS) names(op, path1, path2 string) (string, string, error) {
	if err := m.step(); err != nil {
		return "", "", err
	}
	a, err := m.name(op, path1)
	if err != nil {
		return "", "", err
	}
	b, err := m.name(op, path2)
	return a, b, err
}

func (m *memFS) Rename(oldpath, newpath string) error {
	from, to, err := m.names("rename", oldpath, newpath)
	if err != nil {
		return err
	}
	ino, ok := m.files[from]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldpath, Err: fs.ErrNotExist}
	}
	delete(m.files, from)
	m.files[to] = ino
	return nil
}

func (m *memFS) Remove(path string) error {
	if err := m.step(); err != nil {
		return err
	}
	name, err := m.name("remove", path)
	if err != nil {
		return err
	}
	if _, ok := m.files[name]; !ok {
		return &fs.PathError{Op: "remove", Path: path, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

func (m *memFS) SyncDir(dir string) error {
	if err := m.step(); err != nil {
		return err
	}
	if dir != m.dir {
		return &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	m.durable = maps.Clone(m.files)
	return nil
}

func (m *memFS) OpenSpare(path string) (spareFile, error) {
	name, ino, err := m.open(path)
	if err != nil {
		return nil, err
	}
	if ino == nil {
		ino = &inode{}
		m.files[name] = ino
	}
	if m.durable[CheckpointFile] == ino {
		m.unsafeSpare = true
	}
	return &memSpare{fs: m, ino: ino}, nil
}

func (m *memFS) Exchange(path1, path2 string) error {
	a, b, err := m.names("exchange", path1, path2)
	if err != nil {
		return err
	}
	ia, oka := m.files[a]
	ib, okb := m.files[b]
	if !oka || !okb {
		return &fs.PathError{Op: "exchange", Path: path1, Err: fs.ErrNotExist}
	}
	m.files[a], m.files[b] = ib, ia
	return nil
}

// memSpare is a file of a memFS rewritten in place.
type memSpare struct {
	fs  *memFS
	ino *inode
}

func (f *memSpare) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.step(); err != nil {
		if f.fs.calls == f.fs.crashAt {
			f.writeAt(p[:len(p)/2], off) // torn
		}
		return 0, err
	}
	f.writeAt(p, off)
	return len(p), nil
}

func (f *memSpare) writeAt(p []byte, off int64) {
	if end := int(off) + len(p); end > len(f.ino.data) {
		f.ino.data = append(f.ino.data, make([]byte, end-len(f.ino.data))...)
	}
	copy(f.ino.data[off:], p)
}

func (f *memSpare) Truncate(size int64) error {
	if err := f.fs.step(); err != nil {
		return err
	}
	if int(size) <= len(f.ino.data) {
		f.ino.data = f.ino.data[:size]
	} else {
		f.ino.data = append(f.ino.data, make([]byte, int(size)-len(f.ino.data))...)
	}
	return nil
}

func (f *memSpare) Datasync() error { return f.fs.sync(f.ino) }

func (f *memSpare) Close() error { return f.fs.step() }

// memFile is a file of a memFS being written.
type memFile struct {
	fs   *memFS
	path string
	ino  *inode
}

func (f *memFile) Name() string { return f.path }

func (f *memFile) Write(p []byte) (int, error) {
	if err := f.fs.step(); err != nil {
		if f.fs.calls == f.fs.crashAt {
			f.ino.data = append(f.ino.data, p[:len(p)/2]...) // torn
		}
		return 0, err
	}
	f.ino.data = append(f.ino.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error { return f.fs.sync(f.ino) }

// sync counts a call that makes ino's content durable (unless the disk
// lies).
func (m *memFS) sync(ino *inode) error {
	if err := m.step(); err != nil {
		return err
	}
	if !m.lyingSync {
		ino.synced = bytes.Clone(ino.data)
	}
	return nil
}

func (f *memFile) Close() error { return f.fs.step() }

// crashKind is what a crash of the system keeps.
type crashKind int

const (
	// powerLoss keeps what was synced: file contents as of their last
	// Sync, the directory as of its last SyncDir.
	powerLoss crashKind = iota
	// metadataKept keeps every directory change but only the synced file
	// contents, as a file system that journals metadata but not data may.
	metadataKept
	// processKilled keeps everything the system saw (the process died,
	// not the machine); the disk still holds what was synced, until the
	// next sync or a power loss after the restart.
	processKilled
)

func (k crashKind) String() string {
	return [...]string{"power loss", "metadata kept, unsynced data lost", "process killed"}[k]
}

// after returns the file system as a restart after a crash of kind k
// finds it.
func (m *memFS) after(k crashKind) *memFS {
	out := newMemFS(m.dir)
	if k == processKilled {
		// The running system's names and contents, and the disk's names
		// and contents as of the last syncs, over the same files.
		kept := map[*inode]*inode{}
		keep := func(ino *inode) *inode {
			if kept[ino] == nil {
				kept[ino] = &inode{data: bytes.Clone(ino.data), synced: bytes.Clone(ino.synced)}
			}
			return kept[ino]
		}
		for name, ino := range m.files {
			out.files[name] = keep(ino)
		}
		for name, ino := range m.durable {
			out.durable[name] = keep(ino)
		}
		return out
	}
	names := m.durable
	if k != powerLoss {
		names = m.files
	}
	for name, ino := range names {
		kept := &inode{data: bytes.Clone(ino.synced), synced: bytes.Clone(ino.synced)}
		out.files[name], out.durable[name] = kept, kept
	}
	return out
}

// powerLossWorkload returns the states a plugin saves one after the other
// from base: everything base holds released, then creations, resizes up
// and down (with the CPUs of a decrease held for the pod for a while),
// pod resources, a re-created container, configuration records and
// removals.
func powerLossWorkload(t *testing.T, base *State) []*State {
	since := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	steps := []func(s *State){
		func(s *State) { // a Synchronize that finds nothing running
			for _, pod := range s.PodUIDs() {
				s.DeletePod(pod)
			}
			clear(s.pods)
			s.SetDefaultCPUSet(kepOnline)
			s.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "0"), Keys: map[string]string{"reservedSystemCPUs": "0"}})
		},
		func(s *State) {
			s.SetAssignment("pod-a", "app", Assignment{Baseline: cpus(t, "1-2")})
			s.SetContainer("c-app", ContainerRef{PodUID: "pod-a", Name: "app"})
			s.SetDefaultCPUSet(cpus(t, "0,3-15"))
		},
		func(s *State) {
			s.SetAssignment("pod-b", "db", Assignment{Baseline: cpus(t, "3-4")})
			s.SetContainer("c-db", ContainerRef{PodUID: "pod-b", Name: "db"})
			s.SetPodResources("pod-b", PodRecord{Resources: ResourceRecord{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000}})
			s.SetDefaultCPUSet(cpus(t, "0,5-15"))
		},
		func(s *State) {
			s.SetAssignment("pod-a", "app", Assignment{Baseline: cpus(t, "1-2"), Resized: cpus(t, "1-2,5-6")})
			s.SetPodResources("pod-a", PodRecord{Resources: ResourceRecord{CPUQuota: 400000, CPUPeriod: 100000}})
			s.SetDefaultCPUSet(cpus(t, "0,7-15"))
		},
		func(s *State) { // a decrease whose CPUs stay with the pod
			s.SetAssignment("pod-a", "app", Assignment{Baseline: cpus(t, "1-2"), Resized: cpus(t, "1-2")})
			s.SetHold("pod-a", Hold{CPUs: cpus(t, "5-6"), Since: since})
		},
		func(s *State) {
			s.DeleteHold("pod-a")
			s.SetPodResources("pod-a", PodRecord{Resources: ResourceRecord{CPUQuota: 200000, CPUPeriod: 100000}})
			s.SetDefaultCPUSet(cpus(t, "0,5-15"))
		},
		func(s *State) {
			s.SetAssignment("pod-c", "web", Assignment{Baseline: cpus(t, "7")})
			s.SetAssignment("pod-c", "side", Assignment{Baseline: cpus(t, "8")})
			s.SetContainer("c-web", ContainerRef{PodUID: "pod-c", Name: "web"})
			s.SetDefaultCPUSet(cpus(t, "0,5-6,9-15"))
		},
		func(s *State) {
			s.SetHold("pod-b", Hold{CPUs: cpus(t, "9"), Since: since.Add(time.Second)})
			s.SetDefaultCPUSet(cpus(t, "0,5-6,10-15"))
		},
		func(s *State) { // its hold goes with it
			s.DeletePod("pod-b")
			s.SetDefaultCPUSet(cpus(t, "0,3-6,9-15"))
		},
		func(s *State) { // the kubelet re-created a container
			s.DeleteContainer("c-app")
			s.SetContainer("c-app-2", ContainerRef{PodUID: "pod-a", Name: "app"})
		},
		func(s *State) {
			s.SetConfigRecord(ConfigRecord{ReservedCPUs: cpus(t, "0"), Keys: map[string]string{
				"reservedSystemCPUs": "0", "cpuManagerPolicyOptions.full-pcpus-only": "true"}})
		},
		func(s *State) {
			s.DeletePod("pod-a")
			s.SetDefaultCPUSet(cpus(t, "0-6,9-15"))
		},
	}
	states := make([]*State, 0, len(steps))
	s := base
	for _, step := range steps {
		s = s.Clone()
		step(s)
		if err := s.Validate(kepOnline); err != nil {
			t.Fatalf("workload state %d: %v", len(states), err)
		}
		states = append(states, s)
	}
	return states
}

// powerLossStarts are the directories the workload starts in: an empty
// one, and one with a checkpoint file, which the first Save replaces.
func powerLossStarts(t *testing.T) map[string]func() (*memFS, *State) {
	const dir = "/state"
	return map[string]func() (*memFS, *State){
		"empty directory": func() (*memFS, *State) { return newMemFS(dir), nil },
		"a checkpoint file": func() (*memFS, *State) {
			m := newMemFS(dir)
			data := referenceEncoding(t, sampleStateFull(t))
			ino := &inode{data: data, synced: data}
			m.files[CheckpointFile], m.durable[CheckpointFile] = ino, ino
			return m, sampleStateFull(t)
		},
	}
}

// TestPowerLossAtEveryStep runs a plugin's start (Load) and a workload of
// Saves, cuts the power before each call it makes to the file system in
// turn, and restarts from what each kind of crash keeps: the state loads,
// and it is the last one a Save acknowledged, or the one being saved;
// nothing acknowledged is lost. The restarted store then saves and loads
// again, so what the crash left never stands in the way.
func TestPowerLossAtEveryStep(t *testing.T) {
	for name, start := range powerLossStarts(t) {
		t.Run(name, func(t *testing.T) {
			_, initial := start()
			workload := powerLossWorkload(t, cmpOr(initial, New(kepOnline)))
			points := 0
			for crashAt := 1; ; crashAt++ {
				m, initial := start()
				m.crashAt = crashAt
				acked, inFlight := runUntilCrash(t, m, initial, workload)
				if !m.crashed {
					break // the whole run made fewer calls
				}
				points++
				for _, kind := range []crashKind{powerLoss, metadataKept, processKilled} {
					survivor := m.after(kind)
					where := fmt.Sprintf("crash before call %d (%s)", crashAt, kind)
					got, err := loadSurvivor(t, survivor)
					switch {
					case err != nil && !(errors.Is(err, ErrNoCheckpoint) && acked == nil):
						t.Fatalf("%s: Load: %v (acknowledged: %v)", where, err, acked != nil)
					case err == nil && !got.Equal(acked) && !got.Equal(inFlight):
						t.Fatalf("%s: Load gives a state that is neither the last acknowledged one nor the one in flight", where)
					}
					checkRecovers(t, where, survivor, workload[len(workload)-1])
				}
			}
			if points < 6*len(workload) {
				t.Fatalf("only %d crash points for %d Saves", points, len(workload))
			}
			t.Logf("%d crash points, 3 kinds of crash each", points)
		})
	}
}

// TestPowerLossTestNoticesALyingDisk runs the power-loss test with a disk
// whose file Syncs do nothing: what a crash keeps is then sometimes a
// file cut short, which Load must refuse as corrupt, never take for a
// state. (The test would not notice a missing fsync otherwise.)
func TestPowerLossTestNoticesALyingDisk(t *testing.T) {
	start := powerLossStarts(t)["empty directory"]
	workload := powerLossWorkload(t, New(kepOnline))
	refused := 0
	for crashAt := 1; ; crashAt++ {
		m, _ := start()
		m.crashAt, m.lyingSync = crashAt, true
		acked, inFlight := runUntilCrash(t, m, nil, workload)
		if !m.crashed {
			break
		}
		got, err := loadSurvivor(t, m.after(metadataKept))
		var cerr *CorruptError
		switch {
		case errors.As(err, &cerr):
			refused++
		case err != nil && !errors.Is(err, ErrNoCheckpoint):
			t.Fatalf("crash before call %d: Load: %v", crashAt, err)
		case err == nil && !got.Equal(acked) && !got.Equal(inFlight):
			t.Fatalf("crash before call %d: a file the disk lied about loads as another state", crashAt)
		}
	}
	if refused == 0 {
		t.Fatal("a disk that ignores fsync lost nothing: the power-loss test cannot see a missing fsync")
	}
}

// runUntilCrash loads the state of m, as the plugin does at start, and
// saves the workload until a call fails. It returns the last state a Save
// acknowledged (initial if none: what was on disk) and the one being
// saved when the power went out (nil if none).
func runUntilCrash(t *testing.T, m *memFS, initial *State, workload []*State) (acked, inFlight *State) {
	t.Helper()
	st := quietStore(newStore(m.dir, m))
	if _, err := st.Load(kepOnline); err != nil && !errors.Is(err, ErrNoCheckpoint) {
		if !m.crashed {
			t.Fatalf("Load before any crash: %v", err)
		}
		return initial, nil
	}
	acked = initial
	for _, s := range workload {
		if err := st.Save(s); err != nil {
			if !m.crashed {
				t.Fatalf("Save failed without a crash: %v", err)
			}
			return acked, s
		}
		acked = s
	}
	return acked, nil
}

// loadSurvivor loads the state a restart finds on m.
func loadSurvivor(t *testing.T, m *memFS) (*State, error) {
	t.Helper()
	return quietStore(newStore(m.dir, m)).Load(kepOnline)
}

// checkRecovers saves s on what a crash left and checks that it loads,
// and that nothing but the checkpoint file is left.
func checkRecovers(t *testing.T, where string, m *memFS, s *State) {
	t.Helper()
	st := quietStore(newStore(m.dir, m))
	// Two Saves: the restart's first, then one through the spare. Neither
	// may write a file the disk still calls the checkpoint.
	for _, saved := range []*State{s, s.Clone()} {
		if err := st.Save(saved); err != nil {
			t.Fatalf("%s: Save after the restart: %v", where, err)
		}
		if m.unsafeSpare {
			t.Fatalf("%s: a Save after the restart rewrote the file the disk names as the checkpoint", where)
		}
	}
	if got, err := st.Load(kepOnline); err != nil || !got.Equal(s) {
		t.Fatalf("%s: Load after the restart's Save: %v", where, err)
	}
	for name := range m.files {
		if name != CheckpointFile && name != SpareFile && !strings.Contains(name, corruptSuffix) {
			t.Fatalf("%s: %s is left after the restart's first Save", where, name)
		}
	}
}

// cmpOr returns s, or def when s is nil.
func cmpOr(s, def *State) *State {
	if s == nil {
		return def
	}
	return s
}
