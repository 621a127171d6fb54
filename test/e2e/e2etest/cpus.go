package e2etest

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/test/e2e/harness"
)

// Wait bounds each wait for what the plugin applies asynchronously (the
// shared containers' growth after a shrink, re-sent updates): a few
// seconds on a machine of its own; the VM guest, emulated, sets a minute.
var Wait = 5 * time.Second

// RunPod starts a pod with one container "app".
func RunPod(ctx context.Context, t testing.TB, env *harness.Env, name string, r harness.Resources) *harness.Pod {
	t.Helper()
	pod, err := env.CRI.RunPod(ctx, harness.PodSpec{Name: name, Containers: []harness.ContainerSpec{{Name: "app", Resources: r}}})
	if err != nil {
		t.Fatalf("run pod %s: %v", name, err)
	}
	return pod
}

// CPUsOf is what a container runs on, read everywhere it shows.
type CPUsOf struct {
	// Cgroup is its cgroup's cpuset (harness.Cgroup.AllowedCPUs: its
	// cpuset.cpus, or on cgroup v2 the set it inherits while none was
	// written), Effective the kernel's effective set of the cgroup.
	Cgroup, Effective cpuset.CPUSet
	// NewProcess and Command are the Cpus_allowed_list of a process
	// started in the container and of its own command.
	NewProcess, Command cpuset.CPUSet
}

// Agree reports whether every reading is the same set.
func (c CPUsOf) Agree() bool {
	return c.Cgroup.Equals(c.Effective) && c.Cgroup.Equals(c.NewProcess) && c.Cgroup.Equals(c.Command)
}

func (c CPUsOf) String() string {
	return fmt.Sprintf("cgroup cpuset %q, effective %q, Cpus_allowed_list %q (new process) and %q (the container's command)",
		c.Cgroup, c.Effective, c.NewProcess, c.Command)
}

// ReadCPUs reads what c runs on, and returns its cgroup too.
func ReadCPUs(ctx context.Context, c *harness.Container) (CPUsOf, *harness.Cgroup, error) {
	var r CPUsOf
	cg, err := c.Cgroup(ctx)
	if err != nil {
		return r, nil, err
	}
	if r.Cgroup, err = cg.AllowedCPUs(); err != nil {
		return r, cg, err
	}
	if r.Effective, err = cg.EffectiveCPUs(); err != nil {
		return r, cg, err
	}
	if r.NewProcess, r.Command, err = c.ProcessesCPUsAllowed(ctx); err != nil {
		return r, cg, err
	}
	return r, cg, nil
}

// WaitCPUs waits (up to Wait: some updates are asynchronous) until the
// readings of what c runs on agree and ok accepts them, and returns the
// last ones read.
func WaitCPUs(ctx context.Context, c *harness.Container, ok func(cpuset.CPUSet) bool) (CPUsOf, *harness.Cgroup, error) {
	ctx, cancel := context.WithTimeout(ctx, Wait)
	defer cancel()
	var got CPUsOf
	var cg *harness.Cgroup
	err := harness.Poll(ctx, func() (bool, error) {
		var err error
		got, cg, err = ReadCPUs(ctx, c)
		return err == nil && got.Agree() && ok(got.Cgroup), err
	})
	return got, cg, err
}

// WantCPUs checks, waiting up to Wait, that c runs on exactly want: its
// cgroup's cpuset and effective set, and the CPUs a new process and its
// own command may use. It returns the cgroup it read.
func WantCPUs(ctx context.Context, t testing.TB, c *harness.Container, want cpuset.CPUSet) *harness.Cgroup {
	t.Helper()
	got, cg, err := WaitCPUs(ctx, c, want.Equals)
	if err != nil {
		t.Errorf("%s: %s; want %s everywhere (%v)", c, got, want, err)
	}
	return cg
}

// SettledCPUs waits until c runs on one set everywhere it is read and ok
// accepts it (want says what it wants), and returns that set.
func SettledCPUs(ctx context.Context, t testing.TB, c *harness.Container, want string, ok func(cpuset.CPUSet) bool) cpuset.CPUSet {
	t.Helper()
	got, _, err := WaitCPUs(ctx, c, ok)
	if err != nil {
		t.Fatalf("%s: %s; want %s everywhere (%v)", c, got, want, err)
	}
	return got.Cgroup
}

// WantProcessCPUs is WantCPUs for a container without a shell (the
// plugin's image holds only its binary): its cgroup's cpuset and the
// Cpus_allowed_list of its command, read from the node, must be want.
func WantProcessCPUs(ctx context.Context, t testing.TB, c *harness.Container, want cpuset.CPUSet) {
	t.Helper()
	pid, err := c.PID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := c.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cgroupCPUs, allowed cpuset.CPUSet
	ctx, cancel := context.WithTimeout(ctx, Wait)
	defer cancel()
	err = harness.Poll(ctx, func() (bool, error) {
		if cgroupCPUs, err = cg.AllowedCPUs(); err != nil {
			return false, err
		}
		if allowed, err = harness.ProcessCPUsAllowed(pid); err != nil {
			return false, err
		}
		return cgroupCPUs.Equals(want) && allowed.Equals(want), nil
	})
	if err != nil {
		t.Errorf("%s: cgroup cpuset %q, Cpus_allowed_list of pid %d %q, want %q (%v)", c, cgroupCPUs, pid, allowed, want, err)
	}
}

// WantQuota checks the CPU quota of c's cgroup (cpu.cfs_quota_us and
// cpu.cfs_period_us, or cpu.max): cpus whole CPUs over the kubelet's
// 100 ms period.
func WantQuota(ctx context.Context, t testing.TB, c *harness.Container, cpus int64) {
	t.Helper()
	cg, err := c.Cgroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	quota, err := cg.CPUQuota()
	if err != nil {
		t.Fatal(err)
	}
	period, err := cg.CPUPeriod()
	if err != nil {
		t.Fatal(err)
	}
	if quota != cpus*100000 || period != 100000 {
		t.Errorf("%s: CPU quota %d per period %d, want %d per 100000 (%d CPUs)", c, quota, period, cpus*100000, cpus)
	}
}

// WantDriverPath checks that c's cgroup is where the kubelet's driver and
// containerd put it: <pod cgroup>/<id> with cgroupfs,
// <pod slice>/cri-containerd-<id>.scope with systemd.
func WantDriverPath(t testing.TB, c *harness.Container, driver harness.CgroupDriver, path string) {
	t.Helper()
	want := c.Pod.CgroupParent + "/" + c.ID
	if driver == harness.SystemdDriver {
		want = c.Pod.CgroupParent + "/cri-containerd-" + c.ID + ".scope"
	}
	if path != want {
		t.Errorf("%s: cgroup %s, want %s (%s driver)", c, path, want, driver)
	}
}

// WantRefused checks that err is the plugin's refusal: its kind and the
// stem of its reason (KEP-5554's names, with or without their "Error"
// suffix, in any case: smtAlignment or the kubelet's SMTAlignmentError),
// and that its explanation mentions detail (a cpuset or a policy's name;
// "" for none).
func WantRefused(t testing.TB, err error, what, kind, reason, detail string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s succeeded, want it refused with %s: %s…", what, kind, reason)
		return
	}
	t.Logf("%s refused: %v", what, err)
	re := regexp.MustCompile(regexp.QuoteMeta(kind+": ") + `(?i:` + regexp.QuoteMeta(reason) + `)(Error)?: .*` + regexp.QuoteMeta(detail))
	if !re.MatchString(err.Error()) {
		t.Errorf("%s: error %q does not match %q", what, err, re)
	}
}

// UnpinnedCPUs returns the CPUs a container runs on when no plugin sets
// its cpuset: those of the root cpuset cgroup, every online CPU.
func UnpinnedCPUs(t testing.TB) cpuset.CPUSet {
	t.Helper()
	root, err := harness.NewCgroup("/")
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := root.EffectiveCPUs()
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}
