package state

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

// MaxNode is the largest NUMA node number a NodeSet holds.
const MaxNode = 63

// NodeSet is a set of NUMA nodes 0 to MaxNode: node n is bit n. It is the
// checkpoint's record of the nodes of a container's devices, the bits of
// the policy's cpuallocator.NodeMask (which this package does not import).
// The zero value is the empty set; a NodeSet is a value, copied with its
// Assignment.
type NodeSet uint64

// Nodes returns the nodes of the set, ascending.
func (n NodeSet) Nodes() []int {
	nodes := make([]int, 0, bits.OnesCount64(uint64(n)))
	for rest := uint64(n); rest != 0; rest &= rest - 1 {
		nodes = append(nodes, bits.TrailingZeros64(rest))
	}
	return nodes
}

// String returns the nodes as a Linux list ("0-1", "0,2"); "" when empty.
func (n NodeSet) String() string { return string(n.appendList(nil)) }

// appendList appends the nodes as a Linux list to b.
func (n NodeSet) appendList(b []byte) []byte { return cpumask.Mask{uint64(n)}.AppendList(b) }

// ParseNodeSet parses a Linux list of NUMA nodes ("1", "0-1", "0,2-3")
// strictly: decimal numbers 0 to MaxNode, ranges written low-high, the
// empty string meaning the empty set.
func ParseNodeSet(s string) (NodeSet, error) {
	var set NodeSet
	if s == "" {
		return set, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		loText, hiText, isRange := strings.Cut(part, "-")
		lo, err := parseNode(loText)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", part, err)
		}
		hi := lo
		if isRange {
			if hi, err = parseNode(hiText); err != nil {
				return 0, fmt.Errorf("%q: %w", part, err)
			}
			if lo > hi {
				return 0, fmt.Errorf("%q: range runs backwards", part)
			}
		}
		// Bits lo to hi: all bits up to hi, less those below lo.
		set |= NodeSet(^uint64(0)>>(MaxNode-hi)) &^ (1<<lo - 1)
	}
	return set, nil
}

// parseNode parses one node number of a node list.
func parseNode(text string) (int, error) {
	if text == "" {
		return 0, fmt.Errorf("missing node number")
	}
	if strings.TrimLeft(text, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a node number", text)
	}
	node, err := strconv.Atoi(text)
	if err != nil || node > MaxNode {
		return 0, fmt.Errorf("node %s is above the largest supported node %d", text, MaxNode)
	}
	return node, nil
}
