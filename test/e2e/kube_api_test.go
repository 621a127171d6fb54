//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"
	"sigs.k8s.io/yaml"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/e2etest"
	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// The plugin's Kubernetes side in the real cluster: its RBAC is enough
// (no request forbidden) under the API server's RBAC authorization, its
// events on pods, its NodeResourceTopology object, and the node working
// on NRI alone when the plugin loses the API server.

// forbidden matches what the plugin, or client-go in it, logs when the API
// server denies a request.
var forbidden = regexp.MustCompile(`(?i)forbidden`)

// apiAccessAllowed scans the plugin's log for a denied request: the RBAC
// of deploy/ must be enough for everything the plugin did so far.
func (k *kube) apiAccessAllowed(ctx context.Context, t *testing.T) {
	plugin := k.Attach(ctx, t, k.pluginPod(ctx, t), "nri-cpumanager")
	st, err := plugin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(st.GetLogPath())
	if err != nil {
		t.Fatal(err)
	}
	var denied []string
	for _, l := range strings.Split(string(data), "\n") {
		if forbidden.MatchString(l) {
			denied = append(denied, l)
		}
	}
	if len(denied) > 0 {
		t.Errorf("the API server denied the plugin %d requests: deploy/'s RBAC is not enough:\n%s", len(denied), strings.Join(denied, "\n"))
	}
	for _, feature := range []string{"pods", "events"} {
		if v, err := e2etest.PluginMetricValue(ctx, `nri_cpumanager_kubernetes_api_available{feature="`+feature+`"}`); err != nil || v != 1 {
			t.Errorf("kubernetes_api_available{feature=%q} = %v (%v), want 1", feature, v, err)
		}
	}
}

// eventsOnRefusal: the refused growth of "refused growth" is an event of
// the plugin's on the pod (events.k8s.io, reporting controller
// nri-cpumanager) that kubectl describe pod shows.
func (k *kube) eventsOnRefusal(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	n := k.mach.cpus.Size()
	k.resize(ctx, t, "pinned", fmt.Sprintf("%d", n), "64Mi")
	t.Cleanup(func() { k.putBack(t, "pinned", k.units(1), "64Mi") })
	want := regexp.MustCompile(`(Infeasible|Deferred): [A-Za-z]+: .*default/pinned`)
	k.wantEvent(ctx, t, "pinned", "ResizeRefused", want)
	var list struct {
		Items []struct {
			Reason              string `json:"reason"`
			Note                string `json:"note"`
			Type                string `json:"type"`
			Action              string `json:"action"`
			ReportingController string `json:"reportingController"`
			Regarding           struct {
				Kind, Name, UID string
			} `json:"regarding"`
		} `json:"items"`
	}
	if err := k.Cluster.KubectlJSON(ctx, &list, "get", "events.v1.events.k8s.io", "-n", "default"); err != nil {
		t.Fatal(err)
	}
	uid := k.Pod(ctx, t, "pinned").Metadata.UID
	var found bool
	for _, e := range list.Items {
		if e.Regarding.UID == uid && e.Reason == "ResizeRefused" {
			found = true
			if e.ReportingController != "nri-cpumanager" || e.Type != "Warning" || e.Action != "Resize" || !want.MatchString(e.Note) {
				t.Errorf("event %+v: want a Warning of nri-cpumanager, action Resize, with the refusal as its note", e)
			}
		}
	}
	if !found {
		t.Errorf("no ResizeRefused event regards pod pinned (%s): %+v", uid, list.Items)
	}
	out, err := k.Cluster.Kubectl(ctx, "describe", "pod", "pinned")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "ResizeRefused") || !strings.Contains(out, "nri-cpumanager") {
		t.Errorf("kubectl describe pod pinned does not show the plugin's event:\n%s", out)
	}
}

// nrt is the part of a NodeResourceTopology object the suite reads.
type nrt struct {
	Metadata struct {
		Labels          map[string]string `json:"labels"`
		OwnerReferences []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			UID        string `json:"uid"`
		} `json:"ownerReferences"`
	} `json:"metadata"`
	Zones []struct {
		Name      string `json:"name"`
		Type      string `json:"type"`
		Resources []struct {
			Name        string `json:"name"`
			Capacity    string `json:"capacity"`
			Allocatable string `json:"allocatable"`
			Available   string `json:"available"`
		} `json:"resources"`
	} `json:"zones"`
	Attributes []struct{ Name, Value string } `json:"attributes"`
}

// cpu returns a zone's cpu capacity, allocatable and available.
func (n *nrt) cpu(zone string) (capacity, allocatable, available int, ok bool) {
	for _, z := range n.Zones {
		if z.Name != zone {
			continue
		}
		for _, r := range z.Resources {
			if r.Name == "cpu" {
				c, e1 := strconv.Atoi(r.Capacity)
				a, e2 := strconv.Atoi(r.Allocatable)
				f, e3 := strconv.Atoi(r.Available)
				return c, a, f, e1 == nil && e2 == nil && e3 == nil
			}
		}
	}
	return 0, 0, 0, false
}

// nodeResourceTopology: the node's NodeResourceTopology object (the
// suite deploys components/noderesourcetopology) has a zone per NUMA node
// that `nri-cpumanager topology` shows, with the CPUs it lists and those
// it leaves for exclusive containers, and the topology manager's policy
// and scope; a pinned pod takes its CPUs out of "available", and gives
// them back when it goes.
func (k *kube) nodeResourceTopology(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	numa, exclusive := k.topologyCommand(ctx, t)
	cfg := deployedConfig(t)
	// The plugin creates the object once the CRD is served (it retries).
	var lastErr error
	get := func() *nrt {
		var n nrt
		if lastErr = k.Cluster.KubectlJSON(ctx, &n, "get", "noderesourcetopologies.v1alpha2.topology.node.k8s.io", k.Cluster.NodeName); lastErr != nil {
			return &n
		}
		return &n
	}
	// waitAvailable waits for every zone to show the CPUs free in want.
	waitAvailable := func(free cpuset.CPUSet) *nrt {
		t.Helper()
		var n *nrt
		err := harness.Poll(ctx, func() (bool, error) {
			n = get()
			for node, cpus := range numa {
				if _, _, a, ok := n.cpu(fmt.Sprintf("node-%d", node)); !ok || a != cpus.Intersection(free).Size() {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("NodeResourceTopology %s: %+v (last error %v), want the free CPUs %s per NUMA node: %v", k.Cluster.NodeName, n, lastErr, free, err)
		}
		return n
	}
	n := waitAvailable(exclusive)
	if len(n.Zones) != len(numa) {
		t.Errorf("%d zones, `nri-cpumanager topology` shows %d NUMA nodes", len(n.Zones), len(numa))
	}
	for node, cpus := range numa {
		zone := fmt.Sprintf("node-%d", node)
		c, a, _, _ := n.cpu(zone)
		if c != cpus.Size() || a != cpus.Intersection(exclusive).Size() {
			t.Errorf("zone %s: capacity %d, allocatable %d; `nri-cpumanager topology` shows %s (%d CPUs), %d for exclusive containers",
				zone, c, a, cpus, cpus.Size(), cpus.Intersection(exclusive).Size())
		}
	}
	attrs := map[string]string{}
	for _, a := range n.Attributes {
		attrs[a.Name] = a.Value
	}
	if attrs["topologyManagerPolicy"] != string(cfg.TopologyManagerPolicy) || attrs["topologyManagerScope"] != string(cfg.TopologyManagerScope) {
		t.Errorf("attributes %v, want the ConfigMap's policy %s and scope %s", attrs, cfg.TopologyManagerPolicy, cfg.TopologyManagerScope)
	}
	k.topologyOwnership(ctx, t, n)

	k.Apply(ctx, t, harness.PodManifest("nrt-pinned", k.Cluster.NodeName, harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(k.unit, "64Mi")}))
	pinned := k.Attach(ctx, t, k.WaitReady(ctx, t, "nrt-pinned"), "app")
	cpus := e2etest.SettledCPUs(ctx, t, pinned, fmt.Sprintf("%d CPUs", k.unit), func(s cpuset.CPUSet) bool { return s.Size() == k.unit })
	waitAvailable(exclusive.Difference(cpus))
	t.Logf("pinned to %s: the object shows it", cpus)
	k.DeletePod(t, "nrt-pinned")
	waitAvailable(exclusive)
}

// topologyOwnership: the node's object is owned by its Node (the garbage
// collector deletes it with the Node), and the ValidatingAdmissionPolicy
// of components/noderesourcetopology denies the plugin's own pod-bound
// token a write to another node's object, saying why.
func (k *kube) topologyOwnership(ctx context.Context, t *testing.T, n *nrt) {
	t.Helper()
	var node struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := k.Cluster.KubectlJSON(ctx, &node, "get", "node", k.Cluster.NodeName); err != nil {
		t.Fatal(err)
	}
	owners := n.Metadata.OwnerReferences
	if len(owners) != 1 || owners[0].Kind != "Node" || owners[0].APIVersion != "v1" || owners[0].Name != k.Cluster.NodeName || owners[0].UID != node.Metadata.UID {
		t.Errorf("owner references %+v, want the Node %s (%s)", owners, k.Cluster.NodeName, node.Metadata.UID)
	}
	if n.Metadata.Labels["app.kubernetes.io/managed-by"] != "nri-cpumanager" {
		t.Errorf("labels %v, want managed-by nri-cpumanager", n.Metadata.Labels)
	}

	plugin := k.pluginPod(ctx, t)
	token, err := k.Cluster.Kubectl(ctx, "create", "token", "-n", e2etest.PluginNamespace, "nri-cpumanager",
		"--bound-object-kind", "Pod", "--bound-object-name", plugin.Metadata.Name, "--bound-object-uid", plugin.Metadata.UID)
	if err != nil {
		t.Fatal(err)
	}
	other := `apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {name: another-node}
zones: []
`
	out, err := k.Cluster.KubectlWithToken(ctx, strings.TrimSpace(token), other, "create", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "may write only the NodeResourceTopology object of its own node, not another-node") {
		t.Errorf("the plugin's token creating another node's object: %q, %v; want it denied by the policy", out, err)
	}
	// Its own node's object, through the same token: the policy admits it
	// (a dry run writes nothing).
	own := strings.Replace(other, "another-node", k.Cluster.NodeName, 1)
	if _, err := k.Cluster.KubectlWithToken(ctx, strings.TrimSpace(token), own, "create", "--dry-run=server", "-f", "-"); err != nil &&
		!strings.Contains(err.Error(), "AlreadyExists") && !strings.Contains(err.Error(), "already exists") {
		t.Errorf("the plugin's token and its own node's object: %v, want only AlreadyExists", err)
	}
}

// topologyCommand runs `nri-cpumanager topology` with the deployed
// configuration and returns each NUMA node's CPUs and the CPUs it leaves
// for exclusive containers.
func (k *kube) topologyCommand(ctx context.Context, t *testing.T) (map[int]cpuset.CPUSet, cpuset.CPUSet) {
	t.Helper()
	bin, err := harness.GoBuild(ctx, "", "./cmd/nri-cpumanager")
	if err != nil {
		t.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "topology", "--config", file).CombinedOutput()
	if err != nil {
		t.Fatalf("nri-cpumanager topology: %v\n%s", err, out)
	}
	t.Logf("nri-cpumanager topology:\n%s", out)
	numa := map[int]cpuset.CPUSet{}
	for _, m := range regexp.MustCompile(`(?m)^NUMA node (\d+): CPUs (\d[0-9,-]*\d|\d)\b`).FindAllStringSubmatch(string(out), -1) {
		node, _ := strconv.Atoi(m[1])
		if numa[node], err = cpuset.Parse(m[2]); err != nil {
			t.Fatal(err)
		}
	}
	m := regexp.MustCompile(`(?m)CPUs for exclusive containers: ([0-9,-]+)`).FindStringSubmatch(string(out))
	if len(numa) == 0 || m == nil {
		t.Fatalf("nri-cpumanager topology shows no NUMA node or exclusive CPUs:\n%s", out)
	}
	exclusive, err := cpuset.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return numa, exclusive
}

// withoutTheAPI points the plugin at an address where no API server
// listens (a partition between the plugin and the API server; the
// kubelet still reaches it): the plugin says once what it lost, in its
// log and kubernetes_api_available, and pins and refuses on NRI alone;
// pointed back, it has the API again.
func (k *kube) withoutTheAPI(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	_, port, err := k.Cluster.APIServerHostPort()
	if err != nil {
		t.Fatal(err)
	}
	setPort := func(ctx context.Context, p string) *harness.KubePod {
		t.Helper()
		old := k.pluginPod(ctx, t)
		if _, err := k.Cluster.Kubectl(ctx, "set", "env", "daemonset/nri-cpumanager", "-n", e2etest.PluginNamespace, "KUBERNETES_SERVICE_PORT="+p); err != nil {
			t.Fatal(err)
		}
		return k.WaitPluginReady(ctx, t, old.Metadata.UID)
	}
	// Port 1 of the loopback: nothing listens, connections are refused.
	cut := setPort(ctx, "1")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		setPort(ctx, port)
	})
	plugin := k.Attach(ctx, t, cut, "nri-cpumanager")
	line, err := k.waitLog(ctx, plugin, 0, regexp.MustCompile(`Kubernetes API unavailable.*feature=pods`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plugin: %s", strings.TrimSpace(line))
	if v, err := e2etest.PluginMetricValue(ctx, `nri_cpumanager_kubernetes_api_available{feature="pods"}`); err != nil || v != 0 {
		t.Errorf("kubernetes_api_available{feature=pods} = %v (%v), want 0", v, err)
	}

	// Pinning and refusing on NRI alone.
	k.Apply(ctx, t, harness.PodManifest("nri-only", k.Cluster.NodeName, harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(k.unit, "64Mi")}))
	t.Cleanup(func() { k.DeletePod(t, "nri-only") })
	app := k.Attach(ctx, t, k.WaitReady(ctx, t, "nri-only"), "app")
	if got, _, err := e2etest.WaitCPUs(ctx, app, func(s cpuset.CPUSet) bool { return s.Size() == k.unit && s.IsSubsetOf(k.available()) }); err != nil {
		t.Errorf("nri-only pod: cpuset %s, want %d exclusive CPUs of %s: %v", got, k.unit, k.available(), err)
	}
	k.resize(ctx, t, "nri-only", fmt.Sprint(k.mach.cpus.Size()), "64Mi")
	cond := k.WaitResizeError(ctx, t, "nri-only", regexp.MustCompile(`(Infeasible|Deferred): [A-Za-z]+: .*default/nri-only`))
	t.Logf("refused on NRI alone: %q", cond.Message)
	k.putBack(t, "nri-only", k.units(1), "64Mi")
	lines, err := os.ReadFile(mustLogPath(ctx, t, plugin))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(lines), "Kubernetes API unavailable"); n > 3 {
		t.Errorf("the plugin said %d times that the API is unavailable; once per feature is enough", n)
	}
}

// frozenAPIServer stops the API server (SIGSTOP) for a while: the plugin
// stays healthy and ready, pinned CPUs stay; once the server answers
// again, pods are pinned as before.
func (k *kube) frozenAPIServer(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	k.Apply(ctx, t, harness.PodManifest("frozen", k.Cluster.NodeName, harness.PodContainer{Name: "app", Resources: harness.GuaranteedCPUs(k.unit, "64Mi")}))
	t.Cleanup(func() { k.DeletePod(t, "frozen") })
	app := k.Attach(ctx, t, k.WaitReady(ctx, t, "frozen"), "app")
	pinned := e2etest.SettledCPUs(ctx, t, app, fmt.Sprintf("%d CPUs", k.unit), func(s cpuset.CPUSet) bool { return s.Size() == k.unit })
	before := k.cpusets(ctx, t)
	// (Found while the API server answers: kubectl cannot list pods once
	// it is stopped.)
	plugin := k.Attach(ctx, t, k.pluginPod(ctx, t), "nri-cpumanager")
	if err := k.Cluster.FreezeAPIServer(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := k.Cluster.ThawAPIServer(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(thaw)
	for range 4 { // about 20 s
		time.Sleep(5 * time.Second)
		for _, kind := range []string{"live", "ready"} {
			// The kubelet's exec probe, as the DaemonSet runs it.
			if out, err := plugin.Exec(ctx, "/usr/bin/nri-cpumanager", "probe", kind, "--config", "/etc/nri-cpumanager/config.yaml"); err != nil {
				t.Errorf("while the API server is stopped, the plugin's probe %s says no: %v (%s)", kind, err, out)
			}
		}
		e2etest.WantCPUs(ctx, t, app, pinned)
	}
	thaw()
	if err := harness.Poll(ctx, func() (bool, error) {
		_, err := k.Cluster.Kubectl(ctx, "get", "--raw", "/readyz")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the API server did not come back: %v", err)
	}
	k.wantCPUsets(ctx, t, before)
	// The node goes on: the pod's memory-only resize is applied, CPUs kept.
	k.resize(ctx, t, "frozen", k.units(1), "96Mi")
	k.waitResized(ctx, t, "frozen", k.units(1), "96Mi")
	e2etest.WantCPUs(ctx, t, app, pinned)
}

func mustLogPath(ctx context.Context, t *testing.T, c *harness.Container) string {
	t.Helper()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.GetLogPath()
}
