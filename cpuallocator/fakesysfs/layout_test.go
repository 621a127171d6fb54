package fakesysfs

import (
	"reflect"
	"testing"
)

func TestLayouts(t *testing.T) {
	tests := []struct {
		name    string
		cpus    int
		nodes   int
		sockets int
		l3      int
		// nodeOf spot-checks CPU → NUMA node.
		nodeOf map[int]int
	}{
		{
			name: "amd-epyc-7313-2s-nps2", cpus: 64, nodes: 4, sockets: 2, l3: 8,
			nodeOf: map[int]int{0: 0, 8: 1, 16: 2, 31: 3, 32: 0, 63: 3},
		},
		{
			name: "intel-xeon-gold-6338-snc2", cpus: 128, nodes: 4, sockets: 2, l3: 2,
			nodeOf: map[int]int{0: 0, 16: 1, 32: 2, 63: 3, 64: 0, 80: 1, 127: 3},
		},
	}
	if got, want := LayoutNames(), []string{"amd-epyc-7313-2s-nps2", "intel-xeon-gold-6338-snc2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("LayoutNames() = %v, want %v", got, want)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Layout(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			sockets, l3 := map[int]bool{}, map[int]bool{}
			for _, c := range m.CPUs {
				sockets[c.Socket] = true
				l3[c.L3] = true
				if want, ok := tc.nodeOf[c.ID]; ok && c.Node != want {
					t.Errorf("cpu %d on node %d, want %d", c.ID, c.Node, want)
				}
			}
			if len(m.CPUs) != tc.cpus || m.NumNodes() != tc.nodes || len(sockets) != tc.sockets || len(l3) != tc.l3 {
				t.Errorf("got %d CPUs, %d nodes, %d sockets, %d L3; want %d, %d, %d, %d",
					len(m.CPUs), m.NumNodes(), len(sockets), len(l3), tc.cpus, tc.nodes, tc.sockets, tc.l3)
			}
			if err := Write(t.TempDir(), m); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := Layout("no-such-machine"); err == nil {
		t.Error("Layout of an unknown name succeeded")
	}
}
