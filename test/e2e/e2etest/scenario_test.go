package e2etest

import (
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/scenario"
)

// TestHarnessResourcesConvertBack: the resources the scenario package
// converts the kubelet's way come back out of the harness's conversion,
// so the plugin gets over CRI what it gets in the fixture suites.
func TestHarnessResourcesConvertBack(t *testing.T) {
	for _, c := range []struct {
		qos                string
		request, limit, mb int64
		// back is the limit that comes back: the same quota.
		back int64
	}{
		{"guaranteed", 1000, 1000, 256, 1000},
		{"guaranteed", 2500, 2500, 64, 2500},
		{"guaranteed", 500, 500, 1, 500},
		{"burstable", 100, 0, 0, 0},
		{"burstable", 250, 1000, 0, 1000},
		{"burstable", 1, 5, 0, 10}, // the kubelet's smallest quota, 1000 µs
		{"burstable", 333, 777, 128, 777},
		{"besteffort", 0, 0, 0, 0},
	} {
		r := scenario.KubeletResources(c.qos, c.request, c.limit, c.mb<<20)
		h, err := harnessResources(r)
		if err != nil {
			t.Errorf("%+v: %v", c, err)
			continue
		}
		if h.CPULimitMilli != c.back {
			t.Errorf("%+v: limit %dm, want %dm", c, h.CPULimitMilli, c.back)
		}
	}
}
