package scenario

import (
	"fmt"

	"github.com/nri-cpumanager/nri-cpumanager/policy"
)

// The kubelet's CFS period and share conversion.
const (
	cfsPeriod    = 100000
	minShares    = 2
	defaultBytes = 256 << 20
)

// KubeletPod returns a pod the way the kubelet's cgroupfs driver places it:
// cgroup parent /kubepods/pod<uid> (Guaranteed), /kubepods/burstable/pod<uid>
// or /kubepods/besteffort/pod<uid>.
func KubeletPod(name, qos string) (policy.Pod, error) {
	uid := name + "-uid"
	parent := map[string]string{
		"guaranteed": "/kubepods/pod" + uid,
		"burstable":  "/kubepods/burstable/pod" + uid,
		"besteffort": "/kubepods/besteffort/pod" + uid,
	}[qos]
	if parent == "" {
		return policy.Pod{}, fmt.Errorf("unknown QoS %q (want guaranteed, burstable or besteffort)", qos)
	}
	return policy.Pod{UID: uid, Namespace: "default", Name: name, CgroupParent: parent}, nil
}

// KubeletResources returns a container's resources as the kubelet sets them
// through CRI: shares = max(2, request·1024/1000), quota = limit·period/1000
// with period 100000 (no quota without a limit), memory limit in bytes.
func KubeletResources(qos string, requestMilli, limitMilli, memory int64) policy.Resources {
	r := policy.Resources{CPUShares: minShares}
	if qos == "besteffort" {
		return r
	}
	if s := uint64(requestMilli * 1024 / 1000); s > minShares {
		r.CPUShares = s
	}
	if limitMilli > 0 {
		r.CPUPeriod = cfsPeriod
		r.CPUQuota = max(limitMilli*cfsPeriod/1000, 1000)
	}
	r.MemoryLimit = memory
	return r
}

// resourcesOf turns a container step into the kubelet's resources.
func resourcesOf(c *ContainerStep, qos string, memory int64) (policy.Resources, error) {
	req, err := MilliCPU(c.CPU)
	if err != nil {
		return policy.Resources{}, err
	}
	limit := req
	if qos == "burstable" {
		if limit, err = MilliCPU(c.CPULimit); err != nil {
			return policy.Resources{}, err
		}
	}
	if c.Memory != "" {
		if memory, err = Bytes(c.Memory); err != nil {
			return policy.Resources{}, err
		}
	}
	if qos == "guaranteed" && memory == 0 {
		memory = defaultBytes
	}
	return KubeletResources(qos, req, limit, memory), nil
}
