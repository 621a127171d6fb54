package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator/fakesysfs"
	"github.com/nri-cpumanager/nri-cpumanager/plugin"
	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/test/fakeruntime"
)

// systemdPod returns a pod as the kubelet's systemd cgroup driver places
// it: cgroup parent /kubepods.slice/kubepods-pod<uid>.slice (Guaranteed)
// or /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice,
// the UID's dashes written as underscores.
func systemdPod(name, qos string) policy.Pod {
	uid := name + "-uid"
	escaped := strings.ReplaceAll(uid, "-", "_")
	parent := "/kubepods.slice/kubepods-pod" + escaped + ".slice"
	if qos == "burstable" {
		parent = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice"
	}
	return policy.Pod{UID: uid, Namespace: "default", Name: name, CgroupParent: parent}
}

// TestVerificationOnEveryCgroupLayout: on cgroup v1 and v2 trees, with the
// cgroupfs and the systemd driver's cgroups paths as containerd delivers
// them, the plugin finds a container's real cpuset in its cgroup. A shrink
// of a shared container that containerd fails to apply (it only logs
// that) is found there and sent again.
func TestVerificationOnEveryCgroupLayout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v2       bool
		systemd  bool
		wantPath string // the shared container's cgroups path, as NRI delivers it
	}{
		{"v1 cgroupfs", false, false, "/kubepods/burstable/podweb-uid/web-nginx-1"},
		{"v1 systemd", false, true, "kubepods-burstable-podweb_uid.slice:cri-containerd:web-nginx-1"},
		{"v2 cgroupfs", true, false, "/kubepods/burstable/podweb-uid/web-nginx-1"},
		{"v2 systemd", true, true, "kubepods-burstable-podweb_uid.slice:cri-containerd:web-nginx-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, fakesysfs.Spec{Sockets: 1, CoresPerNUMA: 8}, `reservedSystemCPUs: "0"`)
			rt := fakeruntime.New(t, n.topo.CPUs())
			rt.SetCgroupRoot(t.TempDir(), tc.v2)
			rp := startPluginWith(t, rt, n.pol, t.TempDir(), func(o *plugin.Options) { o.VerifyInterval = 0 })
			mkPod := func(name, qos string) policy.Pod {
				if tc.systemd {
					return systemdPod(name, qos)
				}
				return policyPod(t, name, qos)
			}
			sb, err := rt.RunPod(mkPod("web", "burstable"))
			if err != nil {
				t.Fatal(err)
			}
			web := mustCreate(t, rt, sb, "nginx", burstable(500))
			if web.Linux.CgroupsPath != tc.wantPath {
				t.Fatalf("cgroups path %q, want %q", web.Linux.CgroupsPath, tc.wantPath)
			}
			rt.SetChecking(false)
			rt.SetFailing("nginx", true)
			gsb, err := rt.RunPod(mkPod("gu", "guaranteed"))
			if err != nil {
				t.Fatal(err)
			}
			g := mustCreate(t, rt, gsb, "app", guaranteed(2))
			wantCPUs(t, rt, web, "0-7")
			rt.SetFailing("nginx", false)
			waitFor(t, "web put back on the shared pool", func() bool {
				cpus, _ := rt.CPUs(web.Id)
				return cpus.String() == "0,3-7"
			})
			rt.SetChecking(true)
			wantCPUs(t, rt, g, "1-2")
			file := filepath.Join(rt.CgroupDir(web), "cpuset.cpus")
			if data, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(data)) != "0,3-7" {
				t.Errorf("%s: %q (%v), want 0,3-7", file, data, err)
			}
			if v := metricValue(t, rp, "nri_cpumanager_cpuset_drift_total", nil); v < 1 {
				t.Errorf("cpuset_drift_total = %v, want at least 1", v)
			}
			// The runtime applies the update before UpdateContainers returns
			// to the plugin, which counts it only then: wait for the count.
			waitFor(t, "unsolicited_updates_total{ok} at least 1", func() bool {
				return metricValue(t, rp, "nri_cpumanager_unsolicited_updates_total", map[string]string{"result": "ok"}) >= 1
			})
			noViolations(t, rt)
		})
	}
}
