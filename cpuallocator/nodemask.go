package cpuallocator

import (
	"math/bits"
	"strconv"
	"strings"
)

// maxNUMANodes is the number of node ids a NodeMask can hold.
const maxNUMANodes = 64

func newNodeMask(nodes ...int) NodeMask {
	var m NodeMask
	for _, n := range nodes {
		if n >= 0 && n < maxNUMANodes {
			m |= 1 << uint(n)
		}
	}
	return m
}

// Count returns the number of nodes in the mask.
func (m NodeMask) Count() int { return bits.OnesCount64(uint64(m)) }

// Has reports whether node is in the mask.
func (m NodeMask) Has(node int) bool {
	return node >= 0 && node < maxNUMANodes && m&(1<<uint(node)) != 0
}

// Nodes returns the node ids of the mask, ascending.
func (m NodeMask) Nodes() []int {
	nodes := make([]int, 0, m.Count())
	for rest := uint64(m); rest != 0; rest &= rest - 1 {
		nodes = append(nodes, bits.TrailingZeros64(rest))
	}
	return nodes
}

// IsSubsetOf reports whether every node of m is in other.
func (m NodeMask) IsSubsetOf(other NodeMask) bool { return m&^other == 0 }

// Union returns the nodes that are in m or in other.
func (m NodeMask) Union(other NodeMask) NodeMask { return m | other }

// String lists the nodes in the kernel's list format, e.g. "0,2-3"; the
// empty mask is "".
func (m NodeMask) String() string {
	var b strings.Builder
	nodes := m.Nodes()
	for i := 0; i < len(nodes); {
		j := i
		for j+1 < len(nodes) && nodes[j+1] == nodes[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(nodes[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(nodes[j]))
		}
		i = j + 1
	}
	return b.String()
}

// lessByIDs orders masks of equal width by their node ids: the mask holding
// the lowest node that is in only one of them comes first.
func (m NodeMask) lessByIDs(other NodeMask) bool {
	diff := uint64(m ^ other)
	if diff == 0 {
		return false
	}
	return uint64(m)&(diff&-diff) != 0
}
