package cpuallocator_test

import (
	"reflect"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

func TestNodeMask(t *testing.T) {
	tests := []struct {
		nodes  []int
		count  int
		list   []int
		str    string
		has    int
		hasNot int
	}{
		{nodes: nil, count: 0, list: []int{}, str: "", has: -1, hasNot: 0},
		{nodes: []int{0}, count: 1, list: []int{0}, str: "0", has: 0, hasNot: 1},
		{nodes: []int{3, 0, 2}, count: 3, list: []int{0, 2, 3}, str: "0,2-3", has: 2, hasNot: 1},
		{nodes: []int{63, 1, 2, 3, 7}, count: 5, list: []int{1, 2, 3, 7, 63}, str: "1-3,7,63", has: 63, hasNot: 62},
		{nodes: []int{2, 2, 64, -1}, count: 1, list: []int{2}, str: "2", has: 2, hasNot: 64},
	}
	for _, tc := range tests {
		m := cpuallocator.NewNodeMask(tc.nodes...)
		if got := m.Count(); got != tc.count {
			t.Errorf("NewNodeMask(%v).Count() = %d, want %d", tc.nodes, got, tc.count)
		}
		if got := m.Nodes(); !reflect.DeepEqual(got, tc.list) {
			t.Errorf("NewNodeMask(%v).Nodes() = %v, want %v", tc.nodes, got, tc.list)
		}
		if got := m.String(); got != tc.str {
			t.Errorf("NewNodeMask(%v).String() = %q, want %q", tc.nodes, got, tc.str)
		}
		if tc.has >= 0 && !m.Has(tc.has) {
			t.Errorf("NewNodeMask(%v).Has(%d) = false", tc.nodes, tc.has)
		}
		if m.Has(tc.hasNot) {
			t.Errorf("NewNodeMask(%v).Has(%d) = true", tc.nodes, tc.hasNot)
		}
	}
}

func TestNodeMaskSetOperations(t *testing.T) {
	a, b := cpuallocator.NewNodeMask(0, 1), cpuallocator.NewNodeMask(1, 2)
	if got, want := a.Union(b), cpuallocator.NewNodeMask(0, 1, 2); got != want {
		t.Errorf("Union = %v, want %v", got, want)
	}
	tests := []struct {
		x, y cpuallocator.NodeMask
		want bool
	}{
		{a, a, true},
		{a, b, false},
		{cpuallocator.NewNodeMask(1), a, true},
		{0, a, true},
		{a, 0, false},
		{a, a.Union(b), true},
	}
	for _, tc := range tests {
		if got := tc.x.IsSubsetOf(tc.y); got != tc.want {
			t.Errorf("%v.IsSubsetOf(%v) = %v, want %v", tc.x, tc.y, got, tc.want)
		}
	}
}
