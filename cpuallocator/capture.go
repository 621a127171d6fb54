package cpuallocator

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Capture identifiers: `nri-cpumanager topology --json` writes them and
// ParseCapture insists on them, so that a file of another kind is not read
// as a machine with no CPUs.
const (
	CaptureAPIVersion = "topology.nri-cpumanager.io/v1alpha1"
	CaptureKind       = "NodeTopology"
)

// capturedCPU is one CPU of a capture, with the names the file uses.
type capturedCPU struct {
	ID          int  `json:"id"`
	Core        int  `json:"core"`
	Socket      int  `json:"socket"`
	Die         int  `json:"die"`
	NUMANode    int  `json:"numaNode"`
	UncoreCache int  `json:"uncoreCache"`
	Isolated    bool `json:"isolated,omitempty"`
}

// capture is the file `topology --json` writes: what NewTopology needs to
// rebuild the topology on another machine.
type capture struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	CPUs       []capturedCPU `json:"cpus"`
	// Distances maps a NUMA node (as a string, JSON's only key type) to
	// its distance to each node.
	Distances map[string]map[string]int `json:"distances"`
}

// MarshalCapture writes the topology as a capture file, to be checked
// against elsewhere with ParseCapture (validate-config --topology).
func (t *Topology) MarshalCapture() ([]byte, error) {
	c := capture{APIVersion: CaptureAPIVersion, Kind: CaptureKind, Distances: map[string]map[string]int{}}
	for _, cpu := range t.cpus {
		c.CPUs = append(c.CPUs, capturedCPU(cpu))
	}
	for _, a := range t.nodes {
		row := map[string]int{}
		for _, b := range t.nodes {
			row[strconv.Itoa(b)] = t.distances[a][b]
		}
		c.Distances[strconv.Itoa(a)] = row
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the topology: %w", err)
	}
	return append(data, '\n'), nil
}

// ParseCapture rebuilds a topology from a capture file, with the checks
// NewTopology makes of a discovered one.
func ParseCapture(data []byte) (*Topology, error) {
	var c capture
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("reading the topology capture: %w", err)
	}
	if c.APIVersion != CaptureAPIVersion || c.Kind != CaptureKind {
		return nil, fmt.Errorf("not a topology capture: apiVersion %q, kind %q; want %q, %q (written by nri-cpumanager topology --json)",
			c.APIVersion, c.Kind, CaptureAPIVersion, CaptureKind)
	}
	cpus := make([]CPUInfo, len(c.CPUs))
	for i, cpu := range c.CPUs {
		cpus[i] = CPUInfo(cpu)
	}
	var distances map[int]map[int]int
	if len(c.Distances) > 0 {
		distances = map[int]map[int]int{}
		keys := make([]string, 0, len(c.Distances))
		for k := range c.Distances {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			a, err := strconv.Atoi(k)
			if err != nil {
				return nil, fmt.Errorf("topology capture: distances: NUMA node %q is not a number", k)
			}
			distances[a] = map[int]int{}
			for l, d := range c.Distances[k] {
				b, err := strconv.Atoi(l)
				if err != nil {
					return nil, fmt.Errorf("topology capture: distances from node %d: NUMA node %q is not a number", a, l)
				}
				distances[a][b] = d
			}
		}
	}
	topo, err := NewTopology(cpus, distances)
	if err != nil {
		return nil, fmt.Errorf("topology capture: %w", err)
	}
	return topo, nil
}
