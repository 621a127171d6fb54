package kubelet137

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	kstate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/state"
)

// checkpointName is the kubelet's file in its root directory.
const checkpointName = "cpu_manager_state"

// online is the test node's CPUs, and reserved its kubelet's
// reservedSystemCPUs.
var online, reserved = cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), cpuset.New(0)

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

// TestKubeletReadsTheExport: the kubelet v1.37's own checkpoint code —
// the loader its CPU manager starts with under policy static, which tries
// V4, then V3, then V2 and refuses a file none of them reads — reads the
// plugin's export in the format V4 that release writes, and in V2 (which
// it migrates), with each pinned container on the CPUs it holds (a
// resized one on its resized set) and the rest in the default set. With
// the feature gate InPlacePodVerticalScalingExclusiveCPUs it keeps V4's
// baselines, the plugin's original CPUs; from V2 it takes a container's
// CPUs now as its baseline (V2 has none). When the kubelet then pins a
// new pod, it writes its own V4 file, which the plugin imports (the way
// back in): the originals come back where the kubelet kept them.
//
// What the kubelet's static policy checks at its start (validateState:
// the reserved CPUs in the default set, no CPU both pinned and shared,
// every CPU somewhere) is the same code in v1.37.2 as in v1.36.3, the
// type of its logger aside; test/kubernetes/lifecycle runs v1.36.3's on
// both formats. Building v1.37.2's policy package here would compile most
// of the kubelet's dependencies a second time (3½ minutes more of a cold
// make test); its checkpoint package is about 30 packages beyond what
// test/kubernetes compiles.
func TestKubeletReadsTheExport(t *testing.T) {
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
			path := filepath.Join(dir, checkpointName)
			if err := os.WriteFile(path, file, 0o600); err != nil {
				t.Fatal(err)
			}
			ks, err := kstate.NewCheckpointState(logr.Discard(), dir, checkpointName, "static", containermap.NewContainerMap())
			if err != nil {
				t.Fatalf("the kubelet v1.37 does not read the export: %v\n%s", err, file)
			}
			for _, c := range []struct{ pod, want string }{{"web-uid", "1-2"}, {"db-uid", "3-5"}} {
				if got, ok := ks.GetCPUSet(c.pod, "app"); !ok || got.String() != c.want {
					t.Errorf("the kubelet v1.37 has %s/app on %q (%v), want %s", c.pod, got, ok, c.want)
				}
			}
			if _, ok := ks.GetCPUSet("db-uid", "setup"); ok {
				t.Errorf("the kubelet v1.37 has an entry for db-uid's init container")
			}
			if got := ks.GetDefaultCPUSet(); !got.Equals(cpuset.New(0, 6, 7)) {
				t.Errorf("the kubelet v1.37's default set is %s, want 0,6-7", got)
			}
			if got, ok := ks.GetBaselineCPUSet("db-uid", "app"); got.String() != tc.dbBaseline || ok != (tc.dbBaseline != "") {
				t.Errorf("the kubelet v1.37's baseline of db-uid/app is %q (%v), want %q", got, ok, tc.dbBaseline)
			}

			// The kubelet pins a new pod on the free CPUs, as its static
			// policy does: its state writes its file.
			ks.SetCPUSet("new-uid", "app", cpuset.New(6, 7))
			ks.SetDefaultCPUSet(reserved)

			// Back in: the plugin imports what the kubelet wrote.
			back, warnings, err := state.ImportKubelet(path, online, nil)
			if err != nil {
				written, _ := os.ReadFile(path)
				t.Fatalf("the plugin does not import the kubelet v1.37's file: %v\n%s", err, written)
			}
			if len(warnings) > 0 {
				t.Errorf("import warnings: %q", warnings)
			}
			// Without a baseline, the import takes the CPUs now as original.
			for _, c := range []struct{ pod, original, now string }{
				{"web-uid", "1-2", "1-2"}, {"db-uid", cmp.Or(tc.dbBaseline, "3-5"), "3-5"}, {"new-uid", "6-7", "6-7"},
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

// TestKubeletRefusesACorruptedExport: the V4 data's checksum is what the
// kubelet v1.37 checks: a file whose data was changed after the export is
// refused, not read as V2 (the kubelet tells the operator to drain the
// node and remove the file).
func TestKubeletRefusesACorruptedExport(t *testing.T) {
	file, err := state.ExportKubeletV4(pluginState(), online)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(file), `\"baseline\":\"3\"`, `\"baseline\":\"4\"`, 1)
	if edited == string(file) {
		t.Fatalf("no baseline 3 in the export:\n%s", file)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, checkpointName), []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = kstate.NewCheckpointState(logr.Discard(), dir, checkpointName, "static", containermap.NewContainerMap())
	if err == nil || !strings.Contains(err.Error(), "could not load v4 checkpoint") {
		t.Errorf("the kubelet v1.37 on an export edited after its checksum: %v, want the V4 load refused\n%s", err, edited)
	}
}
