package scenario

import (
	"slices"
	"testing"
)

func TestDeviceNodes(t *testing.T) {
	const head = "name: n\ntopology: {sockets: 2, coresPerNUMA: 2, threadsPerCore: 1}\nsteps:\n"
	for _, tc := range []struct {
		name, steps string
		want        []int
	}{
		{"no devices", "- create: {pod: a, container: c, cpu: \"1\"}\n", nil},
		{"one creation", "- create: {pod: a, container: c, cpu: \"1\", devices: [1]}\n", []int{1}},
		{"sorted, each once, creations only", "" +
			"- create: {pod: a, container: c, cpu: \"1\", devices: [1, 0]}\n" +
			"- resize: {pod: a, container: c, cpu: \"2\"}\n" +
			"- create: {pod: b, container: c, cpu: \"1\", devices: [1]}\n", []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(head + tc.steps))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.DeviceNodes(); !slices.Equal(got, tc.want) {
				t.Errorf("DeviceNodes() = %v, want %v", got, tc.want)
			}
		})
	}
}
