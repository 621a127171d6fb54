package lifecycle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager/checksum"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	kstate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/kubernetes/placement"
)

// TestKubeletStartsOnTheExport: the plugin's checkpoint exported for the
// kubelet (nri-cpumanager export-kubelet) is a file the kubelet v1.36.3's
// own code reads (its checkpoint state, checksum 0 accepted) and its
// static policy starts on (validateState: reserved CPUs in the default
// set, no CPU both assigned and default, every CPU somewhere), with each
// pinned container's CPUs as the plugin had them, a resized one's too.
func TestKubeletStartsOnTheExport(t *testing.T) {
	m, err := placement.NewMachine(placement.MachineSpec{Name: "8 cores", Spec: fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}})
	if err != nil {
		t.Fatal(err)
	}
	online := m.Ours.CPUs()
	reserved := cpuset.New(0)
	st := state.New(online)
	st.SetAssignment("web-uid", "app", state.Assignment{Baseline: cpuset.New(1, 2)})
	st.SetAssignment("db-uid", "app", state.Assignment{Baseline: cpuset.New(3), Resized: cpuset.New(3, 4, 5)})
	st.SetAssignment("db-uid", "setup", state.Assignment{Baseline: cpuset.New(3), Init: true})
	st.SetDefaultCPUSet(cpuset.New(0, 6, 7))
	data, err := state.ExportKubeletV2(st, online)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cpu_manager_state"), data, 0o600); err != nil {
		t.Fatal(err)
	}

	ks, err := kstate.NewCheckpointState(logr.Discard(), dir, "cpu_manager_state", "static", containermap.NewContainerMap())
	if err != nil {
		t.Fatalf("the kubelet does not read the export: %v\n%s", err, data)
	}
	p, err := cpumanager.NewStaticPolicy(logr.Discard(), m.Kubelet, reserved.Size(), reserved, noAffinity{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(logr.Discard(), ks); err != nil {
		t.Fatalf("the kubelet's static policy refuses the export: %v\n%s", err, data)
	}
	for _, c := range []struct{ pod, name, want string }{{"web-uid", "app", "1-2"}, {"db-uid", "app", "3-5"}} {
		if got, ok := ks.GetCPUSet(c.pod, c.name); !ok || got.String() != c.want {
			t.Errorf("the kubelet has %s/%s on %s (%v), want %s", c.pod, c.name, got, ok, c.want)
		}
	}
	if got := ks.GetDefaultCPUSet(); !got.Equals(cpuset.New(0, 6, 7)) {
		t.Errorf("the kubelet's default set is %s, want 0,6-7", got)
	}

	// The managed CPUs matter: an export made as if under
	// strict-cpu-reservation (the reserved CPU in no set) is refused by a
	// kubelet without it, as the file would be on the node.
	strict, err := state.ExportKubeletV2(st, online.Difference(reserved))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu_manager_state"), strict, 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err = kstate.NewCheckpointState(logr.Discard(), dir, "cpu_manager_state", "static", containermap.NewContainerMap())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(logr.Discard(), ks); err == nil {
		t.Errorf("the kubelet's static policy started on an export without its reserved CPU in the default set:\n%s", strict)
	}
}

// TestV4Export: the export in the kubelet 1.37's format V4 carries its
// data with the kubelet's own checksum of it (checksum.New, the code the
// kubelet 1.37 verifies V4 with: pkg/kubelet/checkpointmanager/checksum
// and pkg/util/hash are the same files in v1.36.3 and v1.37.2, over the
// same go-spew), its baselines the plugin's original CPUs; and the
// kubelet v1.36.3, which reads V2 only, starts on the same file, the V2
// fields' checksum 0 accepted, its static policy's start check passed.
func TestV4Export(t *testing.T) {
	m, err := placement.NewMachine(placement.MachineSpec{Name: "8 cores", Spec: fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}})
	if err != nil {
		t.Fatal(err)
	}
	online := m.Ours.CPUs()
	st := state.New(online)
	st.SetAssignment("web-uid", "app", state.Assignment{Baseline: cpuset.New(1, 2)})
	st.SetAssignment("db-uid", "app", state.Assignment{Baseline: cpuset.New(3), Resized: cpuset.New(3, 4, 5)})
	st.SetDefaultCPUSet(cpuset.New(0, 6, 7))
	file, err := state.ExportKubeletV4(st, online)
	if err != nil {
		t.Fatal(err)
	}
	var v4 struct {
		Data         string            `json:"data"`
		DataChecksum checksum.Checksum `json:"dataChecksum"`
	}
	if err := json.Unmarshal(file, &v4); err != nil {
		t.Fatal(err)
	}
	if err := v4.DataChecksum.Verify(v4.Data); err != nil {
		t.Errorf("the kubelet's checksum of the V4 data: %v\n%s", err, file)
	}
	var data struct {
		Entries   map[string]map[string]string            `json:"entries"`
		Baselines map[string]map[string]map[string]string `json:"baselines"`
	}
	if err := json.Unmarshal([]byte(v4.Data), &data); err != nil {
		t.Fatal(err)
	}
	if got := data.Entries["db-uid"]["app"]; got != "3-5" {
		t.Errorf("V4 data: db-uid/app on %q, want 3-5", got)
	}
	if got := data.Baselines["db-uid"]["app"]["baseline"]; got != "3" {
		t.Errorf("V4 data: db-uid/app's baseline %q, want its original CPUs 3", got)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cpu_manager_state"), file, 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := kstate.NewCheckpointState(logr.Discard(), dir, "cpu_manager_state", "static", containermap.NewContainerMap())
	if err != nil {
		t.Fatalf("the kubelet v1.36.3 does not read the V4 export: %v\n%s", err, file)
	}
	if got, ok := ks.GetCPUSet("db-uid", "app"); !ok || got.String() != "3-5" {
		t.Errorf("the kubelet v1.36.3 has db-uid/app on %s (%v), want 3-5", got, ok)
	}
	// The static policy's start check, the same code in v1.37.2
	// (test/kubelet137 reads the file with that release's loader).
	reserved := cpuset.New(0)
	p, err := cpumanager.NewStaticPolicy(logr.Discard(), m.Kubelet, reserved.Size(), reserved, noAffinity{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(logr.Discard(), ks); err != nil {
		t.Errorf("the kubelet's static policy refuses the V4 export: %v\n%s", err, file)
	}
}

// noAffinity is the topology manager with topologyManagerPolicy: none.
type noAffinity struct{}

func (noAffinity) GetAffinity(string, string) topologymanager.TopologyHint {
	return topologymanager.TopologyHint{}
}
func (noAffinity) GetPolicy() topologymanager.Policy { return topologymanager.NewNonePolicy() }
func (noAffinity) Name() string                      { return "none" }
