package cpuallocator

import (
	"math/rand"
	"testing"
)

// naiveSums is the subset-sum table of the parts, one part at a time.
func naiveSums(s coreSizes) []bool {
	reach := make([]bool, s.total()+1)
	reach[0] = true
	for w, n := range s {
		for range n {
			for sum := len(reach) - 1; sum >= w && w > 0; sum-- {
				reach[sum] = reach[sum] || reach[sum-w]
			}
		}
	}
	return reach
}

// TestCoreSizesSums checks the bitmap knapsack against the naive table,
// with totals across several 64-bit words.
func TestCoreSizesSums(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for range 500 {
		threads := 1 + r.Intn(8)
		s := make(coreSizes, threads+1)
		for w := 1; w <= threads; w++ {
			if r.Intn(3) > 0 {
				s[w] = int32(r.Intn(40))
			}
		}
		want := naiveSums(s)
		sums := s.sums(s.total())
		for x, ok := range want {
			if sums.Has(x) != ok || s.canMake(x) != ok {
				t.Fatalf("%v: %d reachable = %v (bitmap %v, canMake %v)", s, x, ok, sums.Has(x), s.canMake(x))
			}
		}
		if s.canMake(s.total() + 1) {
			t.Fatalf("%v: more than the total is reachable", s)
		}
	}
}

func TestLargestSplit(t *testing.T) {
	tests := []struct {
		name     string
		in, out  coreSizes
		r, limit int
		want     int
	}{
		{name: "uniform: all it can", in: coreSizes{0, 0, 3}, out: coreSizes{0, 0, 2}, r: 8, limit: 6, want: 6},
		{name: "uniform: up to the limit", in: coreSizes{0, 0, 3}, out: coreSizes{0, 0, 2}, r: 4, limit: 4, want: 4},
		{name: "a single thread would leave an odd rest", in: coreSizes{0, 1, 1}, out: coreSizes{0, 0, 2}, r: 4, limit: 3, want: 2},
		{name: "nothing here", in: coreSizes{0, 1, 0}, out: coreSizes{0, 0, 2}, r: 2, limit: 1, want: 0},
		{name: "no split", in: coreSizes{0, 0, 0, 0, 1}, out: coreSizes{0, 0, 0, 1, 0}, r: 5, limit: 4, want: -1},
		{name: "three threads twice, not the whole core", in: coreSizes{0, 0, 0, 2, 1}, out: coreSizes{0, 0, 1, 0, 0}, r: 8, limit: 8, want: 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := largestSplit(tc.in, tc.out, tc.r, tc.limit); got != tc.want {
				t.Errorf("largestSplit(%v, %v, %d, %d) = %d, want %d", tc.in, tc.out, tc.r, tc.limit, got, tc.want)
			}
		})
	}
}
