package plugin

import (
	"io"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
	"github.com/nri-cpumanager/nri-cpumanager/state"
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
	if got := podFromNRI(nil); got != (policy.Pod{}) {
		t.Errorf("podFromNRI(nil) = %+v", got)
	}
	if got := resourcesFromNRI(nil); got != (state.Resources{}) {
		t.Errorf("resourcesFromNRI(nil) = %+v", got)
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
	want := state.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 1 << 30}
	if got := resourcesFromNRI(res); got != want {
		t.Errorf("resourcesFromNRI = %+v, want %+v", got, want)
	}
	pod := &api.PodSandbox{Uid: "u", Namespace: "ns", Name: "p", Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/podu"}}
	if got := podFromNRI(pod); got.QoS() != policy.QoSGuaranteed || got.UID != "u" {
		t.Errorf("podFromNRI = %+v", got)
	}
	u := updateToNRI(policy.Update{ContainerID: "c", CPUs: cpuset.New(1, 2, 5), Mems: cpuset.New(0)})
	if u.GetContainerId() != "c" || u.GetLinux().GetResources().GetCpu().GetCpus() != "1-2,5" || u.GetLinux().GetResources().GetCpu().GetMems() != "0" {
		t.Errorf("updateToNRI = %v", u)
	}
	if u := updateToNRI(policy.Update{ContainerID: "c", CPUs: cpuset.New(3)}); u.GetLinux().GetResources().GetCpu().GetMems() != "" {
		t.Errorf("updateToNRI sets mems without alignment: %v", u)
	}
}
