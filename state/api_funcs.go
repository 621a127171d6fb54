package state

// The functions below fix the exported API; their implementation lives in
// the other files of the package.

import "k8s.io/utils/cpuset"

// New returns an empty state whose shared pool is defaultCPUSet.
func New(defaultCPUSet cpuset.CPUSet) *State { return newState(defaultCPUSet) }

// Clone returns a deep copy.
func (s *State) Clone() *State { return s.clone() }

// Equal reports whether two states hold the same data.
func (s *State) Equal(o *State) bool { return s.equal(o) }

// Assignment returns the assignment of a container.
func (s *State) Assignment(podUID, name string) (Assignment, bool) { return s.assignment(podUID, name) }

// SetAssignment records the assignment of a container.
func (s *State) SetAssignment(podUID, name string, a Assignment) { s.setAssignment(podUID, name, a) }

// DeleteAssignment forgets a container's assignment (and the pod's entry map
// when it becomes empty).
func (s *State) DeleteAssignment(podUID, name string) { s.deleteAssignment(podUID, name) }

// ExclusiveCPUs returns the union of every assigned set.
func (s *State) ExclusiveCPUs() cpuset.CPUSet { return s.exclusiveCPUs() }

// ContainersOfPod returns the names of a pod's containers that hold an
// assignment, sorted.
func (s *State) ContainersOfPod(podUID string) []string { return s.containersOfPod(podUID) }

// Store reads and writes the checkpoint file of one state directory.
type Store struct {
	dir  string
	impl storeImpl
}

// NewStore returns a store for <dir>/cpu_manager_state, creating dir (0700)
// if needed.
func NewStore(dir string) (*Store, error) { return newStore(dir) }

// Path returns the checkpoint file's path.
func (st *Store) Path() string { return st.path() }

// Load reads the checkpoint. online is the machine's CPUs: a cpuset outside
// it makes the file untrusted. It returns ErrNoCheckpoint when there is no
// file, and a *CorruptError (after moving the file aside) when the file
// cannot be trusted.
func (st *Store) Load(online cpuset.CPUSet) (*State, error) { return st.load(online) }

// Save writes the state atomically: temp file in the same directory, fsync,
// rename over the checkpoint, fsync of the directory; mode 0600. When Save
// returns nil the state is durable.
func (st *Store) Save(s *State) error { return st.save(s) }

// Marshal encodes a state in the checkpoint format, checksum included.
func Marshal(s *State) ([]byte, error) { return marshal(s) }

// Unmarshal decodes and verifies a checkpoint (checksum, policy name,
// format version, cpusets inside online and not overlapping). It returns
// an error saying what is wrong; it never panics, whatever the input.
func Unmarshal(data []byte, online cpuset.CPUSet) (*State, error) { return unmarshal(data, online) }

// ImportKubelet reads the kubelet's own cpu_manager_state (v1 with
// container-id keys, v2 string entries, and the 1.36 layout with
// podEntries) into a state whose entries hold the kubelet's assignments as
// original sets. resolve maps a kubelet v1 container id to its pod and
// container name; entries it cannot resolve are reported in the returned
// warnings and skipped. The kubelet's checksum is not verified (it hashes Go
// structures this plugin cannot reproduce); the cpusets are verified as in
// Unmarshal.
func ImportKubelet(path string, online cpuset.CPUSet, resolve func(containerID string) (ContainerRef, bool)) (*State, []string, error) {
	return importKubelet(path, online, resolve)
}
