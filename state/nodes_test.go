package state

import (
	"slices"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"
)

func TestParseNodeSet(t *testing.T) {
	for _, tc := range []struct {
		in    string
		nodes []int
		text  string // String of the parsed set
		err   string
	}{
		{in: "", nodes: []int{}, text: ""},
		{in: "1", nodes: []int{1}, text: "1"},
		{in: "0-1", nodes: []int{0, 1}, text: "0-1"},
		{in: "0,2-3", nodes: []int{0, 2, 3}, text: "0,2-3"},
		{in: "3,0,1-2", nodes: []int{0, 1, 2, 3}, text: "0-3"},
		{in: "0-0", nodes: []int{0}, text: "0"},
		{in: "63", nodes: []int{63}, text: "63"},
		{in: "0-63", nodes: seq(0, 63), text: "0-63"},
		{in: "62-63,0", nodes: []int{0, 62, 63}, text: "0,62-63"},
		{in: "64", err: `"64": node 64 is above the largest supported node 63`},
		{in: "0-64", err: `"0-64": node 64 is above the largest supported node 63`},
		{in: "99999999999999999999", err: "node 99999999999999999999 is above the largest supported node 63"},
		{in: "-1", err: `"-1": missing node number`},
		{in: "1,", err: `"": missing node number`},
		{in: "1-", err: `"1-": missing node number`},
		{in: "x", err: `"x": "x" is not a node number`},
		{in: " 1", err: `" 1" is not a node number`},
		{in: "+1", err: `"+1" is not a node number`},
		{in: "2-1", err: `"2-1": range runs backwards`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			set, err := ParseNodeSet(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || set != 0 {
					t.Fatalf("ParseNodeSet(%q) = %v, %v; want an error containing %q", tc.in, set, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseNodeSet(%q): %v", tc.in, err)
			}
			if got := set.Nodes(); !slices.Equal(got, tc.nodes) {
				t.Errorf("ParseNodeSet(%q).Nodes() = %v, want %v", tc.in, got, tc.nodes)
			}
			if got := set.String(); got != tc.text {
				t.Errorf("ParseNodeSet(%q).String() = %q, want %q", tc.in, got, tc.text)
			}
			if again, err := ParseNodeSet(set.String()); err != nil || again != set {
				t.Errorf("String %q does not parse back to the set: %v, %v", set.String(), again, err)
			}
		})
	}
}

// seq returns the integers lo to hi.
func seq(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// FuzzParseNodeSet checks ParseNodeSet against cpumask.Parse, which reads
// the same Linux list syntax (up to its length bound): both accept the
// same lists, with the same members, and String parses back to the set.
func FuzzParseNodeSet(f *testing.F) {
	for _, s := range []string{"", "1", "0-1", "0,2-3", "63", "64", "2-1", "1,,2", "0-63,5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseNodeSet(s)
		if len(s) <= 181 { // cpumask.Parse refuses longer lists of ids 0-63
			want, werr := cpumask.Parse(s, MaxNode)
			if (err == nil) != (werr == nil) {
				t.Fatalf("ParseNodeSet(%q): %v; cpumask.Parse: %v", s, err, werr)
			}
			if err == nil && !slices.Equal(set.Nodes(), want.List()) {
				t.Fatalf("ParseNodeSet(%q) = %v, cpumask.Parse = %v", s, set.Nodes(), want.List())
			}
		}
		if err != nil {
			return
		}
		if again, err := ParseNodeSet(set.String()); err != nil || again != set {
			t.Fatalf("ParseNodeSet(%q).String() = %q does not parse back: %v, %v", s, set.String(), again, err)
		}
	})
}
