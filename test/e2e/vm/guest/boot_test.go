//go:build vmguest

package guest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// readSys returns a sysfs or procfs file's content without surrounding
// white space.
func readSys(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// TestTopology checks that the guest is the node the expected cpusets are
// written for: 16 online CPUs, sockets 0-7 and 8-15, NUMA nodes the same
// (distance 20 between them), SMT siblings 2k and 2k+1, the boot's
// isolated CPUs; cgroup v2 with the cpuset, cpu and memory controllers;
// the boot's init as PID 1; a disk on each NUMA node, which the plugin's
// device lookup places on its node.
func TestTopology(t *testing.T) {
	if got := readSys(t, "/sys/devices/system/cpu/online"); got != online {
		t.Fatalf("online CPUs %s, want %s", got, online)
	}
	for cpu := range 16 {
		dir := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/", cpu)
		if got, want := readSys(t, dir+"physical_package_id"), fmt.Sprint(cpu/8); got != want {
			t.Errorf("cpu%d: socket %s, want %s", cpu, got, want)
		}
		if got, want := readSys(t, dir+"thread_siblings_list"), fmt.Sprintf("%d-%d", cpu&^1, cpu|1); got != want {
			t.Errorf("cpu%d: SMT siblings %s, want %s", cpu, got, want)
		}
	}
	for node, want := range []string{"0-7", "8-15"} {
		if got := readSys(t, fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", node)); got != want {
			t.Errorf("NUMA node %d: CPUs %s, want %s", node, got, want)
		}
	}
	if _, err := os.Stat("/sys/devices/system/node/node2"); err == nil {
		t.Error("a third NUMA node")
	}
	if got := strings.Fields(readSys(t, "/sys/devices/system/node/node0/distance")); len(got) != 2 || got[1] != "20" {
		t.Errorf("NUMA distances from node 0: %v, want [10 20]", got)
	}
	if got := readSys(t, "/sys/devices/system/cpu/isolated"); got != isolated {
		t.Errorf("isolated CPUs %q, want the boot's isolcpus %q", got, isolated)
	}
	wantNodeDisks(t)
	if err := harness.RequireCpusetCgroups(); err != nil {
		t.Error(err)
	}
	root, err := harness.NewCgroup("/")
	if err != nil {
		t.Fatal(err)
	}
	if root.Version() != 2 {
		t.Errorf("cgroup v%d, want v2", root.Version())
	}
	if got, err := root.EffectiveCPUs(); err != nil || got.String() != online {
		t.Errorf("the root cgroup's cpuset.cpus.effective: %q (%v), want %s", got, err, online)
	}
	pid1 := readSys(t, "/proc/1/comm")
	want := map[harness.CgroupDriver]string{harness.CgroupfsDriver: "sh", harness.SystemdDriver: "systemd"}[driver]
	if pid1 != want {
		t.Errorf("PID 1 is %q, want %q for the %s driver", pid1, want, driver)
	}
	t.Logf("kernel %s, PID 1 %s, cgroup driver %s, cmdline %s", readSys(t, "/proc/sys/kernel/osrelease"), pid1, driver, readSys(t, "/proc/cmdline"))
}
