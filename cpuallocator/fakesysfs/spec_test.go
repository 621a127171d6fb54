package fakesysfs

import (
	"reflect"
	"testing"
)

func TestSpecMachineNumbering(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		// want maps a CPU id to its expected description.
		want map[int]CPU
		cpus int
	}{
		{
			name: "siblings adjacent",
			spec: Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 2, ThreadsPerCore: 2},
			cpus: 16,
			want: map[int]CPU{
				0:  {ID: 0, Socket: 0, Die: 0, Core: 0, Node: 0, L3: 0},
				1:  {ID: 1, Socket: 0, Die: 0, Core: 0, Node: 0, L3: 0},
				5:  {ID: 5, Socket: 0, Die: 0, Core: 2, Node: 1, L3: 1},
				8:  {ID: 8, Socket: 1, Die: 0, Core: 0, Node: 2, L3: 2},
				15: {ID: 15, Socket: 1, Die: 0, Core: 3, Node: 3, L3: 3},
			},
		},
		{
			name: "siblings offset by the core count",
			spec: Spec{Sockets: 2, NUMAPerSocket: 1, CoresPerNUMA: 4, ThreadsPerCore: 2, Numbering: SiblingsOffset},
			cpus: 16,
			want: map[int]CPU{
				0:  {ID: 0, Socket: 0, Core: 0, Node: 0, L3: 0},
				8:  {ID: 8, Socket: 0, Core: 0, Node: 0, L3: 0},
				4:  {ID: 4, Socket: 1, Core: 0, Node: 1, L3: 1},
				12: {ID: 12, Socket: 1, Core: 0, Node: 1, L3: 1},
				15: {ID: 15, Socket: 1, Core: 3, Node: 1, L3: 1},
			},
		},
		{
			name: "dies and L3 groups split cores in consecutive runs",
			spec: Spec{Sockets: 1, DiesPerSocket: 2, NUMAPerSocket: 1, CoresPerNUMA: 8, L3PerNUMA: 4},
			cpus: 8,
			want: map[int]CPU{
				0: {ID: 0, Die: 0, Core: 0, L3: 0},
				3: {ID: 3, Die: 0, Core: 3, L3: 1},
				4: {ID: 4, Die: 1, Core: 4, L3: 2},
				7: {ID: 7, Die: 1, Core: 7, L3: 3},
			},
		},
		{
			name: "no L3",
			spec: Spec{Sockets: 1, CoresPerNUMA: 2, NoL3: true},
			cpus: 2,
			want: map[int]CPU{1: {ID: 1, Core: 1, L3: NoL3}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.spec.Machine()
			if err != nil {
				t.Fatal(err)
			}
			if len(m.CPUs) != tc.cpus || tc.spec.NumCPUs() != tc.cpus {
				t.Fatalf("got %d CPUs (NumCPUs %d), want %d", len(m.CPUs), tc.spec.NumCPUs(), tc.cpus)
			}
			byID := map[int]CPU{}
			for _, c := range m.CPUs {
				byID[c.ID] = c
			}
			for id, want := range tc.want {
				if got := byID[id]; !reflect.DeepEqual(got, want) {
					t.Errorf("cpu %d: got %+v, want %+v", id, got, want)
				}
			}
		})
	}
}

func TestSpecDefaultDistances(t *testing.T) {
	m, err := Spec{Sockets: 2, NUMAPerSocket: 2, CoresPerNUMA: 1}.Machine()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{
		{10, 11, 21, 21},
		{11, 10, 21, 21},
		{21, 21, 10, 11},
		{21, 21, 11, 10},
	}
	if !reflect.DeepEqual(m.Distances, want) {
		t.Errorf("got %v, want %v", m.Distances, want)
	}
}

func TestSpecInvalid(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
	}{
		{"no sockets", Spec{CoresPerNUMA: 2}},
		{"no cores", Spec{Sockets: 1}},
		{"more dies than cores", Spec{Sockets: 1, CoresPerNUMA: 2, DiesPerSocket: 3}},
		{"more L3 groups than cores", Spec{Sockets: 1, CoresPerNUMA: 2, L3PerNUMA: 3}},
		{"unknown offline CPU", Spec{Sockets: 1, CoresPerNUMA: 2, Offline: []int{7}}},
		{"distance matrix too small", Spec{Sockets: 2, CoresPerNUMA: 2, Distances: [][]int{{10}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.spec.Machine(); err == nil {
				t.Errorf("Machine() accepted %+v", tc.spec)
			}
			if err := Generate(t.TempDir(), tc.spec); err == nil {
				t.Errorf("Generate() accepted %+v", tc.spec)
			}
		})
	}
}

func TestKEPMachines(t *testing.T) {
	uc, err := KEP5554UseCases().Machine()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range uc.CPUs {
		if wantNode := c.ID / 6; c.Node != wantNode {
			t.Errorf("use-case machine: cpu %d on node %d, want %d", c.ID, c.Node, wantNode)
		}
		if wantCore := c.ID / 2; c.Core != wantCore {
			t.Errorf("use-case machine: cpu %d on core %d, want %d", c.ID, c.Core, wantCore)
		}
	}
	if len(uc.CPUs) != 12 {
		t.Errorf("use-case machine has %d CPUs, want 12", len(uc.CPUs))
	}
	cp, err := KEP5554Checkpoint().Machine()
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.CPUs) != 16 {
		t.Errorf("checkpoint machine has %d CPUs, want 16", len(cp.CPUs))
	}
}
