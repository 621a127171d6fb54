package policy

import (
	"testing"
)

func TestQoSFromCgroupParent(t *testing.T) {
	tests := []struct {
		parent string
		want   QoSClass
	}{
		{"/kubepods/pod1234", QoSGuaranteed},
		{"/kubepods/burstable/pod1234", QoSBurstable},
		{"/kubepods/besteffort/pod1234", QoSBestEffort},
		{"kubepods/burstable/pod1234/", QoSBurstable},
		{"/custom-root/kubepods/pod1234", QoSGuaranteed},
		{"kubepods-pod1234.slice", QoSGuaranteed},
		{"kubepods-burstable-pod1234.slice", QoSBurstable},
		{"kubepods-besteffort-pod1234.slice", QoSBestEffort},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice", QoSBurstable},
		{"/kubepods.slice/kubepods-pod12_34.slice", QoSGuaranteed},
		{"/kubepods", QoSUnknown},
		{"/kubepods/weird", QoSUnknown},
		{"system.slice", QoSUnknown},
		{"/docker/abc", QoSUnknown},
		{"", QoSUnknown},
	}
	for _, tt := range tests {
		if got := QoSFromCgroupParent(tt.parent); got != tt.want {
			t.Errorf("QoSFromCgroupParent(%q) = %q, want %q", tt.parent, got, tt.want)
		}
	}
}

// TestMilliCPUFromSharesRoundTrip checks that reading shares back recovers
// every request the kubelet could have written (shares = milli·1024/1000,
// rounded down, at least 2).
func TestMilliCPUFromSharesRoundTrip(t *testing.T) {
	for milli := int64(2); milli <= 64000; milli++ {
		shares := uint64(milli * 1024 / 1000)
		if shares < 2 {
			shares = 2
		}
		if got := MilliCPUFromShares(shares); got != milli {
			t.Fatalf("%dm → %d shares → %dm", milli, shares, got)
		}
	}
	if got := MilliCPUFromShares(0); got != 0 {
		t.Errorf("0 shares → %dm, want 0", got)
	}
}

func TestClassify(t *testing.T) {
	res := func(milliReq, milliLimit, mem int64) Resources {
		r := Resources{CPUShares: uint64(milliReq * 1024 / 1000), MemoryLimit: mem}
		if milliLimit > 0 {
			r.CPUPeriod, r.CPUQuota = 100000, milliLimit*100
		}
		return r
	}
	tests := []struct {
		name      string
		qos       QoSClass
		r         Resources
		exclusive bool
		cpus      int
		why       string
	}{
		{"guaranteed 2 CPUs", QoSGuaranteed, res(2000, 2000, 1<<30), true, 2, ""},
		{"guaranteed 1 CPU", QoSGuaranteed, res(1000, 1000, 1<<30), true, 1, ""},
		{"guaranteed fractional", QoSGuaranteed, res(1500, 1500, 1<<30), false, 0, "its CPU limit 1500m is not a whole number of CPUs"},
		{"guaranteed without limit", QoSGuaranteed, res(1000, 0, 1<<30), false, 0, "it has no CPU limit"},
		{"request below limit", QoSGuaranteed, res(1000, 2000, 1<<30), false, 0, "its CPU request 1000m differs from its limit 2000m"},
		{"no memory limit", QoSGuaranteed, res(2000, 2000, 0), false, 0, "it has no memory limit, so it is not Guaranteed"},
		{"odd period", QoSGuaranteed, Resources{CPUShares: 3072, CPUQuota: 150000, CPUPeriod: 50000, MemoryLimit: 1}, true, 3, ""},
		{"burstable with integer CPUs", QoSBurstable, res(2000, 2000, 1<<30), false, 0, ""},
		{"best effort", QoSBestEffort, Resources{CPUShares: 2}, false, 0, ""},
		{"outside kubernetes", QoSUnknown, res(2000, 2000, 1<<30), false, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Classify(tt.qos, tt.r)
			if c.Exclusive != tt.exclusive || c.CPUs != tt.cpus || c.Why != tt.why {
				t.Errorf("Classify = {exclusive %v, cpus %d, why %q}, want {%v, %d, %q}", c.Exclusive, c.CPUs, c.Why, tt.exclusive, tt.cpus, tt.why)
			}
		})
	}
}

func TestMergeResources(t *testing.T) {
	cur := Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 1 << 30}
	tests := []struct {
		name   string
		update Resources
		want   Resources
	}{
		{"zero keeps everything", Resources{}, cur},
		{"memory only", Resources{MemoryLimit: 2 << 30}, Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 2 << 30}},
		{"cpu only", Resources{CPUShares: 4096, CPUQuota: 400000}, Resources{CPUShares: 4096, CPUQuota: 400000, CPUPeriod: 100000, MemoryLimit: 1 << 30}},
	}
	for _, tt := range tests {
		if got := MergeResources(cur, tt.update); got != tt.want {
			t.Errorf("%s: MergeResources = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestRefusalIsOneLine(t *testing.T) {
	r := refuse(Infeasible, ReasonProhibitedCPUAllocation, "container %s cannot shrink to %d CPUs", "ns/pod/c", 1)
	want := "Infeasible: prohibitedCPUAllocationError: container ns/pod/c cannot shrink to 1 CPUs"
	if r.Error() != want {
		t.Errorf("Error() = %q, want %q", r.Error(), want)
	}
	if got, ok := AsRefusal(r); !ok || got != r {
		t.Errorf("AsRefusal did not find the refusal")
	}
}
