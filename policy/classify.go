package policy

import (
	"fmt"
	"math"
	"path"
	"strings"
)

// QoSClass is a pod's Kubernetes QoS class as its cgroup parent tells it.
type QoSClass string

// The QoS classes. QoSUnknown is a container outside the kubelet's cgroup
// hierarchy (e.g. started with ctr): it always runs on the shared pool.
const (
	QoSGuaranteed QoSClass = "Guaranteed"
	QoSBurstable  QoSClass = "Burstable"
	QoSBestEffort QoSClass = "BestEffort"
	QoSUnknown    QoSClass = ""
)

// The kubelet's conversion constants (pkg/kubelet/cm/helpers_linux.go).
const (
	milliCPUPerCPU = 1000
	sharesPerCPU   = 1024
	minShares      = 2
	// MaxShares is the kernel's largest cpu.shares.
	MaxShares = 262144
)

// QoSFromCgroupParent derives the QoS class from a pod's cgroup parent, for
// both kubelet cgroup drivers:
//
//	cgroupfs: /kubepods/pod<uid>, /kubepods/burstable/pod<uid>, /kubepods/besteffort/pod<uid>
//	systemd:  kubepods-pod<uid>.slice, kubepods-burstable-pod<uid>.slice,
//	          kubepods-besteffort-pod<uid>.slice (alone or as the last element
//	          of a /kubepods.slice/... path)
func QoSFromCgroupParent(parent string) QoSClass {
	if parent == "" {
		return QoSUnknown
	}
	last := path.Base(strings.TrimRight(parent, "/"))
	if strings.HasSuffix(last, ".slice") {
		switch {
		case strings.HasPrefix(last, "kubepods-burstable-"):
			return QoSBurstable
		case strings.HasPrefix(last, "kubepods-besteffort-"):
			return QoSBestEffort
		case strings.HasPrefix(last, "kubepods-pod"):
			return QoSGuaranteed
		}
		return QoSUnknown
	}
	elems := strings.Split(strings.Trim(parent, "/"), "/")
	for i, e := range elems {
		if e != "kubepods" {
			continue
		}
		rest := elems[i+1:]
		if len(rest) == 0 {
			return QoSUnknown
		}
		switch rest[0] {
		case "burstable":
			return QoSBurstable
		case "besteffort":
			return QoSBestEffort
		}
		if strings.HasPrefix(rest[0], "pod") {
			return QoSGuaranteed
		}
		return QoSUnknown
	}
	return QoSUnknown
}

// Class is where a container runs: on Exclusive CPUs (and how many), or on
// the shared pool.
type Class struct {
	// Exclusive is true for a container of a Guaranteed pod whose CPU
	// request is a whole number of CPUs equal to its limit.
	Exclusive bool
	// CPUs is the number of exclusive CPUs (0 when shared).
	CPUs int
	// RequestMilli and LimitMilli are the CPU request and limit in
	// milli-CPU as derived from shares and quota/period (0 = none).
	RequestMilli int64
	LimitMilli   int64
	// Why explains a shared classification of a Guaranteed container (for
	// logs and refusal messages); empty otherwise.
	Why string
}

// MilliCPUFromShares turns cgroup CPU shares into milli-CPU the way the
// kubelet reads them back (kuberuntime sharesToMilliCPU): ceil(shares·1000/1024)
// for shares ≥ 2, else 0. The kubelet writes shares = milli·1024/1000
// rounded down, so rounding up recovers the original request exactly for
// every request of at least 1m (e.g. 999m → 1022 shares → 999m).
func MilliCPUFromShares(shares uint64) int64 {
	if shares < minShares {
		return 0
	}
	return int64(math.Ceil(float64(shares) * milliCPUPerCPU / sharesPerCPU))
}

// MilliCPUFromQuota turns a CFS quota and period into milli-CPU, rounded
// down (0 when there is no quota); cpuLimitMilli is the kubelet's limit
// recovered exactly, rounded up.
func MilliCPUFromQuota(quota int64, period uint64) int64 {
	return milliFromQuota(quota, period, false)
}

// cpuLimitMilli returns the CPU limit of r in milli-CPU, 0 without a quota.
// It rounds up: the kubelet writes quota = milli·period/1000 rounded down
// and periods are at least 1 ms, so this recovers its milli-CPU exactly.
// CPULimitMilli returns the CPU limit of resources in milli-CPU, rounded
// up (which recovers the kubelet's value exactly); 0 without a quota.
func CPULimitMilli(r Resources) int64 { return cpuLimitMilli(r) }

func cpuLimitMilli(r Resources) int64 {
	return milliFromQuota(r.CPUQuota, r.CPUPeriod, true)
}

// milliFromQuota is quota·1000/period rounded down or up, 0 without a
// quota, and a limit no machine has for values whose product overflows.
func milliFromQuota(quota int64, period uint64, roundUp bool) int64 {
	if quota <= 0 || period == 0 {
		return 0
	}
	if quota > math.MaxInt64/milliCPUPerCPU || period > math.MaxInt64/2 {
		return math.MaxInt64 / milliCPUPerCPU // absurd values: no real limit
	}
	p := int64(period)
	if roundUp {
		return (quota*milliCPUPerCPU + p - 1) / p
	}
	return quota * milliCPUPerCPU / p
}

// sharesFromMilli returns the CPU shares the kubelet writes for a request
// (MilliCPUToShares).
func sharesFromMilli(milli int64) uint64 {
	return uint64(min(max(milli*sharesPerCPU/milliCPUPerCPU, minShares), MaxShares))
}

// Classify decides where a container runs from its pod's QoS class and its
// resources. Exclusive iff the pod is Guaranteed, the container has a CPU
// quota that is a whole multiple of its period (an integer CPU limit ≥ 1),
// its request equals its limit, and it has a memory limit (every Guaranteed
// container has one: a missing one means the cgroup parent and the
// resources disagree, and the container stays shared).
func Classify(qos QoSClass, r Resources) Class {
	c := Class{
		RequestMilli: MilliCPUFromShares(r.CPUShares),
		LimitMilli:   MilliCPUFromQuota(r.CPUQuota, r.CPUPeriod),
	}
	if qos != QoSGuaranteed {
		return c
	}
	switch {
	case r.CPUQuota <= 0 || r.CPUPeriod == 0:
		c.Why = "it has no CPU limit"
	case r.CPUQuota%int64(r.CPUPeriod) != 0:
		c.Why = fmt.Sprintf("its CPU limit %dm is not a whole number of CPUs", c.LimitMilli)
	case c.RequestMilli != c.LimitMilli:
		c.Why = fmt.Sprintf("its CPU request %dm differs from its limit %dm", c.RequestMilli, c.LimitMilli)
	case r.MemoryLimit <= 0:
		c.Why = "it has no memory limit, so it is not Guaranteed"
	default:
		c.Exclusive = true
		c.CPUs = int(r.CPUQuota / int64(r.CPUPeriod))
	}
	return c
}

// MergeResources returns the resources after an update: fields of update
// that are zero keep the value of current (NRI's "zero means keep").
func MergeResources(current, update Resources) Resources {
	merged := current
	if update.CPUShares != 0 {
		merged.CPUShares = update.CPUShares
	}
	if update.CPUQuota != 0 {
		merged.CPUQuota = update.CPUQuota
	}
	if update.CPUPeriod != 0 {
		merged.CPUPeriod = update.CPUPeriod
	}
	if update.MemoryLimit != 0 {
		merged.MemoryLimit = update.MemoryLimit
	}
	return merged
}

// Untrackable says why a container cannot hold exclusive CPUs although its
// resources may ask for them ("" when it can): the checkpoint keys an
// assignment by pod UID and container name, and the runtime's updates name
// the container by id. Such a container runs on the shared pool.
func Untrackable(c Container) string {
	switch {
	case c.ID == "":
		return "it has no container id"
	case c.Pod.UID == "":
		return "its pod has no UID"
	case c.Name == "":
		return "it has no name"
	}
	return ""
}
