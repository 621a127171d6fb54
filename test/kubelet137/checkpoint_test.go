package kubelet137

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	kstate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// checkpointName is the kubelet's file in its root directory.
const checkpointName = "cpu_manager_state"

// reserved is the kubelet's reservedSystemCPUs on the test node.
var reserved = cpuset.New(0)

// eightCores is a node of one socket, one NUMA node and eight cores
// without SMT: CPUs 0-7.
func eightCores() *topology.CPUTopology {
	details := topology.CPUDetails{}
	for cpu := range 8 {
		details[cpu] = topology.CPUInfo{CoreID: cpu}
	}
	return &topology.CPUTopology{NumCPUs: 8, NumCores: 8, NumUncoreCache: 1, NumSockets: 1, NumNUMANodes: 1, CPUDetails: details}
}

// pluginState is the plugin's state on the node at the move out: web's
// app pinned to 1-2; db's app admitted on 3 and resized to 3-5; db's init
// container's entry, which the export leaves out.
func pluginState() *state.State {
	st := state.New(cpuset.New(0, 6, 7))
	st.SetAssignment("web-uid", "app", state.Assignment{Baseline: cpuset.New(1, 2)})
	st.SetAssignment("db-uid", "app", state.Assignment{Baseline: cpuset.New(3), Resized: cpuset.New(3, 4, 5)})
	st.SetAssignment("db-uid", "setup", state.Assignment{Baseline: cpuset.New(3), Init: true})
	return st
}

// guaranteedPod is a Guaranteed pod of one container "app" with an integer
// CPU request, as the kubelet admits it again after its restart.
func guaranteedPod(uid string, cpus int64) *v1.Pod {
	quantities := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse("64Mi"),
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:      "app",
			Resources: v1.ResourceRequirements{Requests: quantities, Limits: quantities},
		}}},
	}
}

// kubeletStart is what the kubelet v1.37's CPU manager does at start with
// policy static: it restores its state from the checkpoint in dir (the
// loader that tries V4, then V3, then V2) and starts the static policy on
// it (validateState). It fails as the kubelet would refuse to start.
func kubeletStart(t *testing.T, dir string) (cpumanager.Policy, kstate.State) {
	t.Helper()
	file, _ := os.ReadFile(filepath.Join(dir, checkpointName))
	ks, err := kstate.NewCheckpointState(logr.Discard(), dir, checkpointName, "static", containermap.NewContainerMap())
	if err != nil {
		t.Fatalf("the kubelet v1.37 does not read the file: %v\n%s", err, file)
	}
	policy, err := cpumanager.NewStaticPolicy(logr.Discard(), eightCores(), reserved.Size(), reserved, noAffinity{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := policy.Start(logr.Discard(), ks); err != nil {
		t.Fatalf("the kubelet v1.37's static policy refuses the file: %v\n%s", err, file)
	}
	return policy, ks
}

// TestKubeletStartsOnTheExport: the kubelet v1.37's own checkpoint code
// and static policy start on the plugin's export, in the format V4 that
// release writes and in V2 (which it migrates); they re-admit the running
// pods on the CPUs they have (a resized container on its resized set) and
// give a new pod only CPUs no pinned container holds. With the feature
// gate InPlacePodVerticalScalingExclusiveCPUs the kubelet keeps V4's
// baselines, the plugin's original CPUs, and writes them back on its next
// change; from V2 it takes a container's CPUs now as its baseline (V2 has
// none). The file the kubelet writes is then imported by the plugin (the
// way back in): the originals come back where the kubelet kept them.
func TestKubeletStartsOnTheExport(t *testing.T) {
	online := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	for _, tc := range []struct {
		name   string
		export func(*state.State, cpuset.CPUSet) ([]byte, error)
		gate   bool
		// dbBaseline is db's app's baseline in the kubelet, and its
		// original CPUs once the plugin imports the kubelet's file; ""
		// where the kubelet keeps none.
		dbBaseline string
	}{
		{name: "V4, exclusive-CPU resize gate on", export: state.ExportKubeletV4, gate: true, dbBaseline: "3"},
		{name: "V4, gate off", export: state.ExportKubeletV4, gate: false},
		{name: "V2, gate on", export: state.ExportKubeletV2, gate: true, dbBaseline: "3-5"},
		{name: "V2, gate off", export: state.ExportKubeletV2, gate: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.InPlacePodVerticalScalingExclusiveCPUs, tc.gate)
			file, err := tc.export(pluginState(), online)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, checkpointName), file, 0o600); err != nil {
				t.Fatal(err)
			}
			policy, ks := kubeletStart(t, dir)

			for _, c := range []struct {
				pod  *v1.Pod
				want string
			}{{guaranteedPod("web-uid", 2), "1-2"}, {guaranteedPod("db-uid", 3), "3-5"}, {guaranteedPod("new-uid", 2), "6-7"}} {
				if err := policy.Allocate(logr.Discard(), ks, c.pod, &c.pod.Spec.Containers[0], lifecycle.AddOperation); err != nil {
					t.Fatalf("the kubelet v1.37 refuses %s: %v", c.pod.UID, err)
				}
				if got, _ := ks.GetCPUSet(string(c.pod.UID), "app"); got.String() != c.want {
					t.Errorf("the kubelet v1.37 has %s/app on %q, want %s", c.pod.UID, got, c.want)
				}
			}
			if got := ks.GetDefaultCPUSet(); !got.Equals(reserved) {
				t.Errorf("the kubelet v1.37's default set is %s, want %s", got, reserved)
			}
			baseline, ok := ks.GetBaselineCPUSet("db-uid", "app")
			if got := map[bool]string{true: baseline.String()}[ok]; got != tc.dbBaseline {
				t.Errorf("the kubelet v1.37's baseline of db-uid/app is %q (%v), want %q", got, ok, tc.dbBaseline)
			}

			// Back in: the plugin imports what the kubelet wrote.
			back, warnings, err := state.ImportKubelet(filepath.Join(dir, checkpointName), online, nil)
			if err != nil {
				written, _ := os.ReadFile(filepath.Join(dir, checkpointName))
				t.Fatalf("the plugin does not import the kubelet v1.37's file: %v\n%s", err, written)
			}
			if len(warnings) > 0 {
				t.Errorf("import warnings: %q", warnings)
			}
			original := tc.dbBaseline
			if original == "" {
				original = "3-5"
			}
			for _, c := range []struct{ pod, original, now string }{
				{"web-uid", "1-2", "1-2"}, {"db-uid", original, "3-5"}, {"new-uid", "6-7", "6-7"},
			} {
				a, ok := back.Assignment(c.pod, "app")
				if !ok || a.Baseline.String() != c.original || a.Held().String() != c.now {
					t.Errorf("imported %s/app: original %q, on %q (%v); want original %s on %s", c.pod, a.Baseline, a.Held(), ok, c.original, c.now)
				}
			}
			if got := back.DefaultCPUSet(); !got.Equals(reserved) {
				t.Errorf("imported default set %s, want %s", got, reserved)
			}
		})
	}
}

// TestKubeletRefusesAnExportOfOtherCPUs: the kubelet v1.37 refuses to
// start on an export whose CPUs are not the ones its static policy
// manages (here made as if the reserved CPU were outside them, under
// strict-cpu-reservation, for a kubelet without that option): the export
// must be made with the kubelet's own reservation.
func TestKubeletRefusesAnExportOfOtherCPUs(t *testing.T) {
	file, err := state.ExportKubeletV4(pluginState(), cpuset.New(1, 2, 3, 4, 5, 6, 7))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, checkpointName), file, 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := kstate.NewCheckpointState(logr.Discard(), dir, checkpointName, "static", containermap.NewContainerMap())
	if err != nil {
		t.Fatalf("the kubelet v1.37 does not read the file: %v\n%s", err, file)
	}
	policy, err := cpumanager.NewStaticPolicy(logr.Discard(), eightCores(), reserved.Size(), reserved, noAffinity{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := policy.Start(logr.Discard(), ks); err == nil {
		t.Errorf("the kubelet v1.37's static policy started on an export without its reserved CPU in the default set:\n%s", file)
	}
}

// noAffinity is the topology manager with topologyManagerPolicy: none.
type noAffinity struct{}

func (noAffinity) GetAffinity(klog.Logger, string, string) topologymanager.TopologyHint {
	return topologymanager.TopologyHint{}
}
func (noAffinity) GetPolicy() topologymanager.Policy { return topologymanager.NewNonePolicy() }
func (noAffinity) Name() string                      { return "none" }
