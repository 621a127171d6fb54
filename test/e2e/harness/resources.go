package harness

import (
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// MiB is a mebibyte, for memory amounts.
const MiB int64 = 1 << 20

// The kubelet's CPU conversion constants (pkg/kubelet/cm).
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliPerCPU   = 1000
	quotaPeriod   = 100000 // µs, the kubelet's default CFS period
	minQuotaValue = 1000   // µs, the smallest quota the kubelet sets
)

// Resources are the requests and limits of a container, or the totals of a
// pod, as written in a pod spec. A zero request with a non-zero limit means
// request = limit, as the API server defaults it.
type Resources struct {
	CPURequestMilli int64 // milli-CPU
	CPULimitMilli   int64 // milli-CPU; 0 = no limit
	MemoryRequest   int64 // bytes
	MemoryLimit     int64 // bytes; 0 = no limit
}

// Guaranteed returns resources whose requests equal their limits.
func Guaranteed(milliCPU, memory int64) Resources {
	return Resources{CPURequestMilli: milliCPU, CPULimitMilli: milliCPU, MemoryRequest: memory, MemoryLimit: memory}
}

// String formats r for messages, e.g. "cpu 1000m/1000m memory 64Mi/64Mi".
func (r Resources) String() string {
	r = r.defaulted()
	return fmt.Sprintf("cpu %dm/%dm memory %dMi/%dMi", r.CPURequestMilli, r.CPULimitMilli, r.MemoryRequest/MiB, r.MemoryLimit/MiB)
}

// defaulted applies the API server's defaulting of requests to limits.
func (r Resources) defaulted() Resources {
	if r.CPURequestMilli == 0 {
		r.CPURequestMilli = r.CPULimitMilli
	}
	if r.MemoryRequest == 0 {
		r.MemoryRequest = r.MemoryLimit
	}
	return r
}

// LinuxResources returns the CRI resources the kubelet sends for r (its
// calculateLinuxResources with CFS quota enabled): shares from the CPU
// request, quota from the CPU limit over a 100 ms period (no quota without
// a limit), and the memory limit.
func (r Resources) LinuxResources() *runtimeapi.LinuxContainerResources {
	r = r.defaulted()
	return &runtimeapi.LinuxContainerResources{
		CpuShares:          MilliCPUToShares(r.CPURequestMilli),
		CpuPeriod:          quotaPeriod,
		CpuQuota:           MilliCPUToQuota(r.CPULimitMilli, quotaPeriod),
		MemoryLimitInBytes: r.MemoryLimit,
	}
}

// MilliCPUToShares converts a CPU request to cgroup v1 CPU shares as the
// kubelet does: max(2, milli·1024/1000), at most 262144.
func MilliCPUToShares(milliCPU int64) int64 {
	shares := milliCPU * sharesPerCPU / milliPerCPU
	switch {
	case shares < minShares:
		return minShares
	case shares > maxShares:
		return maxShares
	}
	return shares
}

// MilliCPUToQuota converts a CPU limit to a CFS quota for period as the
// kubelet does: 0 (no quota) without a limit, else limit·period/1000 but
// at least 1000 µs.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := milliCPU * period / milliPerCPU
	if quota < minQuotaValue {
		return minQuotaValue
	}
	return quota
}

// SumResources returns the pod totals of container resources, summed field
// by field as the kubelet sums requests and limits for the pod sandbox.
func SumResources(containers ...Resources) Resources {
	var total Resources
	for _, c := range containers {
		c = c.defaulted()
		total.CPURequestMilli += c.CPURequestMilli
		total.CPULimitMilli += c.CPULimitMilli
		total.MemoryRequest += c.MemoryRequest
		total.MemoryLimit += c.MemoryLimit
	}
	return total
}

// QOSClass is a pod's Kubernetes quality of service class.
type QOSClass string

// The QoS classes.
const (
	QOSGuaranteed QOSClass = "Guaranteed"
	QOSBurstable  QOSClass = "Burstable"
	QOSBestEffort QOSClass = "BestEffort"
)

// QOSOf classifies a pod by its containers' resources as the kubelet does:
// Guaranteed when every container has CPU and memory limits equal to its
// requests, BestEffort when no container has any request or limit,
// Burstable otherwise.
func QOSOf(containers ...Resources) QOSClass {
	guaranteed, bestEffort := len(containers) > 0, true
	for _, c := range containers {
		c = c.defaulted()
		if c != (Resources{}) {
			bestEffort = false
		}
		if c.CPULimitMilli == 0 || c.MemoryLimit == 0 || c.CPURequestMilli != c.CPULimitMilli || c.MemoryRequest != c.MemoryLimit {
			guaranteed = false
		}
	}
	switch {
	case bestEffort:
		return QOSBestEffort
	case guaranteed:
		return QOSGuaranteed
	}
	return QOSBurstable
}

// CgroupParent returns the cgroup parent the kubelet's cgroupfs driver
// gives a pod of class qos: /kubepods/pod<uid>, /kubepods/burstable/pod<uid>
// or /kubepods/besteffort/pod<uid>.
func CgroupParent(qos QOSClass, uid string) string {
	return CgroupfsDriver.CgroupParent(qos, uid)
}

// CgroupDriver is how the kubelet and the runtime name and make cgroups.
type CgroupDriver string

// The kubelet's cgroup drivers: containerd's runc runtime must use the same
// (its SystemdCgroup option).
const (
	// CgroupfsDriver writes cgroup directories directly.
	CgroupfsDriver CgroupDriver = "cgroupfs"
	// SystemdDriver asks systemd for slices and scopes (kubeadm's default).
	SystemdDriver CgroupDriver = "systemd"
)

// CgroupParent returns the cgroup parent the kubelet gives a pod of class
// qos with the driver: /kubepods/burstable/pod<uid> with cgroupfs,
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice
// with systemd (each "-" of the UID written "_", as systemd reserves "-" for
// the hierarchy of slices); Guaranteed pods sit right under kubepods.
func (d CgroupDriver) CgroupParent(qos QOSClass, uid string) string {
	parts := []string{"kubepods"}
	switch qos {
	case QOSBurstable:
		parts = append(parts, "burstable")
	case QOSBestEffort:
		parts = append(parts, "besteffort")
	}
	parts = append(parts, "pod"+uid)
	if d != SystemdDriver {
		return "/" + strings.Join(parts, "/")
	}
	var dirs []string
	for i := range parts {
		name := parts[:i+1]
		escaped := make([]string, len(name))
		for j, p := range name {
			escaped[j] = strings.ReplaceAll(p, "-", "_")
		}
		dirs = append(dirs, strings.Join(escaped, "-")+".slice")
	}
	return "/" + strings.Join(dirs, "/")
}
