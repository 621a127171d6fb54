package harness

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMilliCPUToShares(t *testing.T) {
	tests := []struct {
		milli, want int64
	}{
		{0, 2},
		{1, 2},
		{2, 2},
		{3, 3},
		{100, 102},
		{250, 256},
		{1000, 1024},
		{1500, 1536},
		{2000, 2048},
		{256000, 262144},
		{1000000, 262144},
	}
	for _, tt := range tests {
		if got := MilliCPUToShares(tt.milli); got != tt.want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	tests := []struct {
		milli, period, want int64
	}{
		{0, 100000, 0},
		{1, 100000, 1000},
		{10, 100000, 1000},
		{11, 100000, 1100},
		{500, 100000, 50000},
		{1000, 100000, 100000},
		{2000, 100000, 200000},
		{1500, 50000, 75000},
	}
	for _, tt := range tests {
		if got := MilliCPUToQuota(tt.milli, tt.period); got != tt.want {
			t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tt.milli, tt.period, got, tt.want)
		}
	}
}

func TestLinuxResources(t *testing.T) {
	tests := []struct {
		name string
		in   Resources
		want *runtimeapi.LinuxContainerResources
	}{
		{
			name: "guaranteed two CPUs",
			in:   Guaranteed(2000, 256*MiB),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2048, CpuPeriod: 100000, CpuQuota: 200000, MemoryLimitInBytes: 256 * MiB},
		},
		{
			name: "burstable with limits",
			in:   Resources{CPURequestMilli: 250, CPULimitMilli: 500, MemoryRequest: 32 * MiB, MemoryLimit: 64 * MiB},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 256, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 64 * MiB},
		},
		{
			name: "request only: no quota, no memory limit",
			in:   Resources{CPURequestMilli: 100, MemoryRequest: 16 * MiB},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000},
		},
		{
			name: "limit only: request defaults to limit",
			in:   Resources{CPULimitMilli: 1000, MemoryLimit: 64 * MiB},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuPeriod: 100000, CpuQuota: 100000, MemoryLimitInBytes: 64 * MiB},
		},
		{
			name: "best effort",
			in:   Resources{},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.LinuxResources()
			if got.CpuShares != tt.want.CpuShares || got.CpuPeriod != tt.want.CpuPeriod ||
				got.CpuQuota != tt.want.CpuQuota || got.MemoryLimitInBytes != tt.want.MemoryLimitInBytes {
				t.Errorf("LinuxResources(%s) = shares %d period %d quota %d memory %d, want shares %d period %d quota %d memory %d",
					tt.in, got.CpuShares, got.CpuPeriod, got.CpuQuota, got.MemoryLimitInBytes,
					tt.want.CpuShares, tt.want.CpuPeriod, tt.want.CpuQuota, tt.want.MemoryLimitInBytes)
			}
			if got.CpusetCpus != "" || got.CpusetMems != "" {
				t.Errorf("LinuxResources(%s) pins cpuset %q/%q; the kubelet with policy none pins nothing", tt.in, got.CpusetCpus, got.CpusetMems)
			}
		})
	}
}

func TestSumResources(t *testing.T) {
	got := SumResources(
		Guaranteed(1000, 64*MiB),
		Resources{CPURequestMilli: 250, MemoryRequest: 16 * MiB},
		Resources{CPULimitMilli: 500, MemoryLimit: 32 * MiB},
	)
	want := Resources{CPURequestMilli: 1750, CPULimitMilli: 1500, MemoryRequest: 112 * MiB, MemoryLimit: 96 * MiB}
	if got != want {
		t.Errorf("SumResources = %+v, want %+v", got, want)
	}
	if got := SumResources(); got != (Resources{}) {
		t.Errorf("SumResources() = %+v, want zero", got)
	}
}

func TestQOSOf(t *testing.T) {
	tests := []struct {
		name       string
		containers []Resources
		want       QOSClass
	}{
		{"one guaranteed", []Resources{Guaranteed(1000, 64*MiB)}, QOSGuaranteed},
		{"fractional guaranteed", []Resources{Guaranteed(500, 64*MiB)}, QOSGuaranteed},
		{"limits only default requests", []Resources{{CPULimitMilli: 2000, MemoryLimit: MiB}}, QOSGuaranteed},
		{"all guaranteed", []Resources{Guaranteed(1000, MiB), Guaranteed(2000, MiB)}, QOSGuaranteed},
		{"one burstable container", []Resources{Guaranteed(1000, MiB), {CPURequestMilli: 100}}, QOSBurstable},
		{"cpu request below limit", []Resources{{CPURequestMilli: 500, CPULimitMilli: 1000, MemoryLimit: MiB}}, QOSBurstable},
		{"no memory limit", []Resources{{CPULimitMilli: 1000}}, QOSBurstable},
		{"one best effort among guaranteed", []Resources{Guaranteed(1000, MiB), {}}, QOSBurstable},
		{"best effort", []Resources{{}, {}}, QOSBestEffort},
		{"no containers", nil, QOSBestEffort},
	}
	for _, tt := range tests {
		if got := QOSOf(tt.containers...); got != tt.want {
			t.Errorf("%s: QOSOf = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestCgroupParent(t *testing.T) {
	const uid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	tests := []struct {
		qos  QOSClass
		want string
	}{
		{QOSGuaranteed, "/kubepods/pod" + uid},
		{QOSBurstable, "/kubepods/burstable/pod" + uid},
		{QOSBestEffort, "/kubepods/besteffort/pod" + uid},
	}
	for _, tt := range tests {
		if got := CgroupParent(tt.qos, uid); got != tt.want {
			t.Errorf("CgroupParent(%s) = %s, want %s", tt.qos, got, tt.want)
		}
	}
	const escaped = "1b4e28ba_2fa1_11d2_883f_0016d3cca427"
	for _, tt := range []struct {
		qos  QOSClass
		want string
	}{
		{QOSGuaranteed, "/kubepods.slice/kubepods-pod" + escaped + ".slice"},
		{QOSBurstable, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice"},
		{QOSBestEffort, "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + escaped + ".slice"},
	} {
		if got := SystemdDriver.CgroupParent(tt.qos, uid); got != tt.want {
			t.Errorf("SystemdDriver.CgroupParent(%s) = %s, want %s", tt.qos, got, tt.want)
		}
	}
}
