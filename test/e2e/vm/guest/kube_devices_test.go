//go:build vmguest

package guest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The test device plugin's resource and what it gives a container.
const (
	diskResource      = "nri-cpumanager.test/numa-disk"
	diskContainerPath = "/dev/numa-disk"
	diskPluginSocket  = "nri-cpumanager-test.sock"
)

// devicePlugin is a device plugin of the kubelet's API (v1beta1) that
// advertises one device, a disk of the guest, with its NUMA node — as an
// SR-IOV or a GPU device plugin advertises a virtual function or a GPU —
// and gives a container the disk's device node when the kubelet allocates
// it. The kubelet's topology manager takes the device's NUMA node as its
// hint.
type devicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	disk nodeDisk
}

// startDevicePlugin serves the device plugin on its socket in the
// kubelet's device plugin directory and registers it with the kubelet;
// it stops when the test ends.
func (k *kube) startDevicePlugin(ctx context.Context, disk nodeDisk) {
	t := k.t
	socket := filepath.Join(pluginapi.DevicePluginPath, diskPluginSocket)
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatalf("device plugin: %v", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, &devicePlugin{disk: disk})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		_ = os.Remove(socket)
	})
	conn, err := grpc.NewClient("unix://"+pluginapi.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("device plugin: connect to the kubelet: %v", err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: diskPluginSocket, ResourceName: diskResource,
	})
	if err != nil {
		t.Fatalf("device plugin: register with the kubelet: %v", err)
	}
}

// GetDevicePluginOptions implements pluginapi.DevicePluginServer.
func (p *devicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch implements pluginapi.DevicePluginServer: the one device,
// healthy, on its disk's NUMA node, until the kubelet hangs up.
func (p *devicePlugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: []*pluginapi.Device{{
		ID: filepath.Base(p.disk.path), Health: pluginapi.Healthy,
		Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(p.disk.node)}}},
	}}})
	if err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// Allocate implements pluginapi.DevicePluginServer: each container gets
// the disk's device node, read-only.
func (p *devicePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: diskContainerPath, HostPath: p.disk.path, Permissions: "r"}},
		})
	}
	return resp, nil
}

// PreStartContainer implements pluginapi.DevicePluginServer (not asked
// for: the options say no).
func (p *devicePlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// GetPreferredAllocation implements pluginapi.DevicePluginServer (not
// asked for: the options say no).
func (p *devicePlugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

// devicesOnTheirNode is issue 31's case on the real kubelet: the kubelet
// runs topologyManagerPolicy single-numa-node (with cpuManagerPolicy none
// its topology manager merges the device manager's hints alone), a test
// device plugin advertises NUMA node 1's disk, and the plugin's
// ConfigMap is set to single-numa-node. A Guaranteed pod of 2 CPUs that
// asks for the disk gets the disk's device node and its CPUs on node 1,
// although node 0 has room, and keeps them on node 1 when it grows to 4.
func (k *kube) devicesOnTheirNode(ctx context.Context, shared *harness.Container) {
	t := k.t
	start := time.Now()
	disk, ok := nodeDisks(t)[1]
	if !ok {
		t.Fatal("no disk on NUMA node 1 (TestTopology says why)")
	}
	// The node's CPUs as the kubelet's topology manager and the plugin see
	// them (TestTopology checks the guest's).
	node0, node1 := must("0-7"), must("8-15")
	// The ConfigMap's change reaches the plugin's file when the kubelet
	// next syncs the volume (up to a minute): it is made first, and waited
	// for last, while the rest of the set-up runs. The pod-life cases'
	// pods go: "pinned" (on node 0) and the shared pod stay, node 1 is
	// free. The rest of the suite (the move out) runs under the policy.
	applied := k.setTopologyPolicy(ctx, "none", "single-numa-node")
	k.DeletePod(t, "multi", "init-reuse", "sidecar")
	k.startDevicePlugin(ctx, disk)
	k.waitAllocatable(ctx, diskResource, "1")
	applied()
	t.Logf("device plugin registered, %s allocatable, the plugin on single-numa-node, %v into the case", diskResource, time.Since(start).Round(time.Second))

	// Node 0 must have room for the pod: otherwise node 1 would prove
	// nothing.
	pool := e2etest.SettledCPUs(ctx, t, shared, "one cpuset", func(cpuset.CPUSet) bool { return true })
	if free := pool.Intersection(node0).Difference(must("0")); free.Size() < 2 {
		t.Fatalf("the shared pool %s leaves node 0 fewer than 2 CPUs (%s): the case needs room on node 0", pool, free)
	}
	resources := func(cpus int) string {
		return fmt.Sprintf(`{"requests": {"cpu": "%d", "memory": "64Mi", %q: "1"}, "limits": {"cpu": "%d", "memory": "64Mi", %q: "1"}}`,
			cpus, diskResource, cpus, diskResource)
	}
	k.Apply(ctx, t, harness.PodManifest("nic", k.Cluster.NodeName, harness.PodContainer{Name: "app", Resources: resources(2)}))
	p := k.WaitReady(ctx, t, "nic")
	app := k.Attach(ctx, t, p, "app")
	original := exclusiveCPUs(ctx, t, app, 2)
	t.Logf("nic: pinned to %s with %s at %s, %v into the case", original, disk, diskContainerPath, time.Since(start).Round(time.Second))
	if !original.IsSubsetOf(node1) {
		t.Errorf("nic: pinned to %s, want CPUs of NUMA node 1 (%s), its disk's", original, node1)
	}
	if out, err := app.Exec(ctx, "stat", "-c", "%t:%T", diskContainerPath); err != nil {
		t.Errorf("nic: the device plugin's device node %s: %v (%s)", diskContainerPath, err, out)
	} else if got, want := strings.TrimSpace(out), fmt.Sprintf("%x:%x", disk.major, disk.minor); got != want {
		t.Errorf("nic: %s is device %s, want the disk's %s", diskContainerPath, got, want)
	}

	k.Resize(ctx, t, "nic", map[string]map[string]string{"app": {"cpu": "4", "memory": "64Mi"}})
	k.WaitResized(ctx, t, "nic", map[string]map[string]string{"app": {"cpu": "4"}})
	grown := exclusiveCPUs(ctx, t, app, 4)
	t.Logf("nic: grown to %s", grown)
	if !original.IsSubsetOf(grown) || !grown.IsSubsetOf(node1) {
		t.Errorf("nic: grown from %s to %s, want its CPUs kept and all on NUMA node 1 (%s)", original, grown, node1)
	}
	if v := k.metric(ctx, "nri_cpumanager_containers_off_device_nodes"); v != 0 {
		t.Errorf("containers_off_device_nodes = %v, want 0", v)
	}
	k.DeletePod(t, "nic")
	t.Logf("devices case done in %v", time.Since(start).Round(time.Second))
}

// setTopologyPolicy edits the plugin's ConfigMap from one
// topologyManagerPolicy to another and returns a function that waits until
// the plugin applied it (it does at once: no pinned container is on a CPU
// the policy does not allow).
func (k *kube) setTopologyPolicy(ctx context.Context, from, to string) (waitApplied func()) {
	t := k.t
	t.Helper()
	const key = "topologyManagerPolicy: "
	out := k.Kubectl(ctx, t, "get", "configmap", "nri-cpumanager-config", "-n", e2etest.PluginNamespace, "-o", `jsonpath={.data.config\.yaml}`)
	if !strings.Contains(out, key+from) {
		t.Fatalf("the ConfigMap's config.yaml has no %q:\n%s", key+from, out)
	}
	changed := regexp.MustCompile(`configuration file changed.*topologyManagerPolicy`)
	before := len(changed.FindAllString(k.Cluster.ContainerLogTails(e2etest.PluginNamespace, 100000), -1))
	patch := fmt.Sprintf(`{"data": {"config.yaml": %q}}`, strings.Replace(out, key+from, key+to, 1))
	k.Kubectl(ctx, t, "patch", "configmap", "nri-cpumanager-config", "-n", e2etest.PluginNamespace, "--type=merge", "-p", patch)
	return func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		var log string
		err := everySecond(ctx, func() (bool, error) {
			log = k.Cluster.ContainerLogTails(e2etest.PluginNamespace, 100000)
			return len(changed.FindAllString(log, -1)) > before, nil
		})
		if err != nil {
			t.Fatalf("the plugin did not see topologyManagerPolicy %s in its ConfigMap: %v; its log:\n%s", to, err, lastLines(log, 30))
		}
		tail := log[changed.FindAllStringIndex(log, -1)[before][0]:]
		if m := regexp.MustCompile(`.*(waits for pinned containers|rejected).*`).FindString(tail); m != "" {
			t.Fatalf("the plugin did not apply topologyManagerPolicy %s: %s", to, m)
		}
	}
}

// waitAllocatable waits until the node's allocatable has the resource
// with the quantity: the kubelet admits a pod that asks for it only then.
func (k *kube) waitAllocatable(ctx context.Context, resource, quantity string) {
	t := k.t
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var got string
	err := everySecond(ctx, func() (bool, error) {
		var node struct {
			Status struct {
				Allocatable map[string]string `json:"allocatable"`
			} `json:"status"`
		}
		err := k.Cluster.GetJSON(ctx, "/api/v1/nodes/"+k.Cluster.NodeName, &node)
		got = node.Status.Allocatable[resource]
		return err == nil && got == quantity, nil
	})
	if err != nil {
		t.Fatalf("the node's allocatable %s is %q, want %s: %v", resource, got, quantity, err)
	}
}
