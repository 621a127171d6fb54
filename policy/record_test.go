package policy

import (
	"slices"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// TestDeviceRecordKeepsTheNodes: the checkpoint's record of a container's
// device nodes holds the nodes of the NodeMask, from the lowest node to
// the highest, and writes them as the mask does.
func TestDeviceRecordKeepsTheNodes(t *testing.T) {
	masks := []cpuallocator.NodeMask{0, cpuallocator.NewNodeMask(0, 1), cpuallocator.NewNodeMask(0, 2, 3, 63)}
	for n := range 64 {
		masks = append(masks, cpuallocator.NewNodeMask(n))
	}
	for _, m := range masks {
		rec := deviceRecord(m)
		if !slices.Equal(rec.Nodes(), m.Nodes()) || rec.String() != m.String() {
			t.Errorf("deviceRecord(%s) = %s (nodes %v), want nodes %v", m, rec, rec.Nodes(), m.Nodes())
		}
	}
}
