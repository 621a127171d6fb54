package plugin

import (
	"context"
	"github.com/sirupsen/logrus/hooks/test"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// limits4 are the payload limits of a machine with CPUs 0-3.
var limits4 = payloadLimits{maxCPU: 3}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// TestConvertMissingFields feeds payloads with missing parts: nothing
// panics and missing values read as unset.
func TestConvertMissingFields(t *testing.T) {
	if got := podFromNRI(nil); !reflect.DeepEqual(got, policy.Pod{}) {
		t.Errorf("podFromNRI(nil) = %+v", got)
	}
	if got := boundedResources(nil, nil); got != (policy.Resources{}) {
		t.Errorf("boundedResources(nil, nil) = %+v", got)
	}
	c := limits4.container(policy.Pod{}, &api.Container{Id: "x"}, quietLog())
	if c.ID != "x" || !c.CPUs.IsEmpty() || c.Exited {
		t.Errorf("container without Linux = %+v", c)
	}
	bad := &api.Container{Id: "y", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "1-x"}}}}
	if c := limits4.container(policy.Pod{}, bad, quietLog()); !c.CPUs.IsEmpty() {
		t.Errorf("an invalid cpuset reads as %s, want unknown", c.CPUs)
	}
	stopped := &api.Container{Id: "z", State: api.ContainerState_CONTAINER_STOPPED}
	if c := limits4.container(policy.Pod{}, stopped, quietLog()); !c.Exited {
		t.Errorf("a stopped container is not reported exited")
	}
	if adj := adjustmentFor(nil); adj.GetLinux() != nil {
		t.Errorf("adjustmentFor(nil) adjusts %v", adj.GetLinux())
	}
}

func TestConvertValues(t *testing.T) {
	res := &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(2048), Quota: api.Int64(200000), Period: api.UInt64(100000), Cpus: "1-2"},
		Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
	}
	want := policy.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 1 << 30}
	if got := boundedResources(res, nil); got != want {
		t.Errorf("boundedResources = %+v, want %+v", got, want)
	}
	pod := &api.PodSandbox{Uid: "u", Namespace: "ns", Name: "p", Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/podu"}}
	if got := podFromNRI(pod); got.QoS() != policy.QoSGuaranteed || got.UID != "u" {
		t.Errorf("podFromNRI = %+v", got)
	}
	u := updateToNRI(policy.Update{ContainerID: "c", CPUs: mask(1, 2, 5), Mems: cpuset.New(0)})
	if u.GetContainerId() != "c" || u.GetLinux().GetResources().GetCpu().GetCpus() != "1-2,5" || u.GetLinux().GetResources().GetCpu().GetMems() != "0" {
		t.Errorf("updateToNRI = %v", u)
	}
	if u := updateToNRI(policy.Update{ContainerID: "c", CPUs: mask(3)}); u.GetLinux().GetResources().GetCpu().GetMems() != "" {
		t.Errorf("updateToNRI sets mems without alignment: %v", u)
	}
}

// TestConvertBoundsValues: a cpuset naming CPUs beyond the online ones
// (here a hundred million of them) is unknown, numbers beyond the kernel's
// ranges are absent, over-long names and UIDs are absent.
func TestConvertBoundsValues(t *testing.T) {
	tests := []struct {
		name string
		ctr  *api.Container
		want policy.Container
	}{
		{"a hundred million CPUs", &api.Container{Id: "c", Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu: &api.LinuxCPU{Cpus: "0-99999999"}}}}, policy.Container{ID: "c", Name: "app"}},
		{"a CPU beyond the online ones", &api.Container{Id: "c", Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu: &api.LinuxCPU{Cpus: "0-4"}}}}, policy.Container{ID: "c", Name: "app"}},
		{"numbers out of range", &api.Container{Id: "c", Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
			Cpu:    &api.LinuxCPU{Shares: api.UInt64(1 << 40), Quota: api.Int64(1 << 62), Period: api.UInt64(10)},
			Memory: &api.LinuxMemory{Limit: api.Int64(-5)}}}},
			policy.Container{ID: "c", Name: "app", Resources: policy.Resources{MemoryLimit: -1}}},
		{"names too long", &api.Container{Id: strings.Repeat("i", maxIDLen+1), Name: strings.Repeat("n", maxNameLen+1)}, policy.Container{}},
		{"names that are not UTF-8", &api.Container{Id: "c\xfa", Name: "app\xc3"}, policy.Container{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := limits4.container(policy.Pod{}, tc.ctr, quietLog())
			if got.ID != tc.want.ID || got.Name != tc.want.Name || got.Resources != tc.want.Resources || !got.CPUs.IsEmpty() {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	pod := podFromNRI(&api.PodSandbox{Uid: strings.Repeat("u", maxUIDLen+1), Name: "p", Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/podu"}})
	if pod.UID != "" || pod.Name != "p" {
		t.Errorf("pod with an over-long UID: %+v", pod)
	}
}

// BenchmarkConvertHugeCpuset converts a container whose cpuset names a
// hundred million CPUs (before the bound, the plugin built a set of all of
// them and was disconnected): the cost is reading the text.
func BenchmarkConvertHugeCpuset(b *testing.B) {
	ctr := &api.Container{Id: "c", Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
		Cpu: &api.LinuxCPU{Cpus: "0-99999999"}}}}
	limits := payloadLimits{maxCPU: 4095}
	log := quietLog()
	b.ReportAllocs()
	for b.Loop() {
		limits.container(policy.Pod{}, ctr, log)
	}
}

// TestNRIStubLogsAtDebug: the NRI stub's info lines, one per connection
// attempt every 500 ms while containerd is away, are the plugin's debug
// lines; its warnings and errors stay what they are.
func TestNRIStubLogsAtDebug(t *testing.T) {
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	l := nriLogger{logrus.NewEntry(log)}
	ctx := context.Background()
	l.Infof(ctx, "Created plugin %s", "90-cpumanager")
	l.Warnf(ctx, "failed to infer runtime NRI version")
	l.Errorf(ctx, "failed")
	var levels []logrus.Level
	for _, e := range hook.AllEntries() {
		levels = append(levels, e.Level)
	}
	if want := []logrus.Level{logrus.DebugLevel, logrus.WarnLevel, logrus.ErrorLevel}; !slices.Equal(levels, want) {
		t.Errorf("levels %v, want %v", levels, want)
	}
}
