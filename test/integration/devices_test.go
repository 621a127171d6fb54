package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/state"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// TestCPUsFollowTheDevices: under topologyManagerPolicy: single-numa-node
// on two NUMA nodes (CPUs 0-3 and 4-7), a pinned container given a device
// on NUMA node 1 (a GPU render node, found through sysfs) gets CPUs of
// node 1, and keeps them on a growth; one without a device, or given every
// device of the host (a privileged container: no hint), gets the ordinary
// placement. The checkpoint records the GPU container's device node.
func TestCPUsFollowTheDevices(t *testing.T) {
	n := newNode(t, fakesysfs.Spec{Sockets: 2, CoresPerNUMA: 4}, "reservedSystemCPUs: \"0\"\ntopologyManagerPolicy: single-numa-node\n")
	sysfs := t.TempDir()
	if err := fakesysfs.WriteDevices(sysfs, fakesysfs.TwoNodeDevices()); err != nil {
		t.Fatal(err)
	}
	rt := fakeruntime.New(t, n.topo.CPUs())
	rp := startPluginWith(t, rt, n.pol, t.TempDir(), func(o *plugin.Options) { o.SysfsRoot = sysfs })
	node1 := cpuset.New(4, 5, 6, 7)
	gpu := []*api.LinuxDevice{{Path: "/dev/dri/renderD128", Type: "c", Major: 226, Minor: 128}}
	var host []*api.LinuxDevice
	for i := range 100 {
		host = append(host, &api.LinuxDevice{Path: fmt.Sprintf("/dev/tty%d", i), Type: "c", Major: 4, Minor: int64(i)})
	}
	host = append(host, gpu...)

	plain := mustCreate(t, rt, pod(t, rt, "plain", "guaranteed"), "app", guaranteed(1))
	inference := pod(t, rt, "inference", "guaranteed")
	withGPU, err := rt.CreateContainerWithDevices(inference, "app", guaranteed(2), gpu)
	if err != nil {
		t.Fatal(err)
	}
	privileged, err := rt.CreateContainerWithDevices(pod(t, rt, "privileged", "guaranteed"), "app", guaranteed(1), host)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	for _, c := range []struct {
		ctr    *api.Container
		onNode bool
	}{{plain, false}, {withGPU, true}, {privileged, false}} {
		got, _ := rt.CPUs(c.ctr.Id)
		if got.IsSubsetOf(node1) != c.onNode || got.IsEmpty() {
			t.Errorf("%s runs on %s: on the GPU's NUMA node 1 (4-7): %v, want %v", c.ctr.Name+"@"+c.ctr.PodSandboxId, got, got.IsSubsetOf(node1), c.onNode)
		}
	}
	if v := rp.Snapshot().Containers[withGPU.Id].DeviceNodes; v != "1" {
		t.Errorf("the debug view shows the GPU container's device nodes %q, want 1", v)
	}
	checkDeviceNodesOnDisk(t, rp.stateDir, inference.Uid)
	if v := metricValue(t, rp, "nri_cpumanager_containers_off_device_nodes", nil); v != 0 {
		t.Errorf("containers_off_device_nodes = %v, want 0", v)
	}
	if err := rt.UpdateContainer(withGPU, guaranteed(3)); err != nil {
		t.Fatalf("growth: %v", err)
	}
	waitFor(t, "settled", func() bool { return settled(rp, rt) })
	if got, _ := rt.CPUs(withGPU.Id); got.Size() != 3 || !got.IsSubsetOf(node1) {
		t.Errorf("after the growth the GPU's container runs on %s, want 3 CPUs of node 1", got)
	}
	checkDeviceNodesOnDisk(t, rp.stateDir, inference.Uid)
	noViolations(t, rt)
}

// checkDeviceNodesOnDisk fails the test unless the checkpoint file in
// stateDir records device nodes for one entry only, pod podUID's app,
// on NUMA node 1 (what `nri-cpumanager state` prints).
func checkDeviceNodesOnDisk(t *testing.T, stateDir, podUID string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, state.CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`"` + regexp.QuoteMeta(podUID) + `":\{"app":\{[^}]*,"deviceNodes":"1"\}\}`)
	if n := strings.Count(string(data), `"deviceNodes":`); n != 1 || !entry.Match(data) {
		t.Errorf("the checkpoint records device nodes %d times, want once, node 1 for pod %s's app:\n%s", n, podUID, data)
	}
}
