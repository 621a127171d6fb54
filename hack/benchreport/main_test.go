package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkDecisionScale/cpus=64/containers=10/create-2         	   10000	     20000 ns/op	    5000 B/op	      40 allocs/op
BenchmarkDecisionScale/cpus=64/containers=10/create/allocator-2 	  100000	      2000 ns/op
BenchmarkDecisionScale/cpus=64/containers=10/release-2        	  100000	      1000 ns/op
BenchmarkDecisionScale/cpus=64/containers=500/create-2        	    1000	     60000 ns/op
BenchmarkDecisionScale/cpus=64/containers=500/create/allocator-2	  100000	      2000 ns/op
BenchmarkDecisionScale/cpus=64/containers=500/release-2       	  100000	      1500 ns/op
PASS
`

func TestReport(t *testing.T) {
	tests := []struct {
		name  string
		input string
		limit float64
		want  []string
		not   []string
	}{
		{
			name:  "ratio and a growth above the limit",
			input: sample,
			limit: 2,
			want: []string{
				"| 64 | 10 | create | 20.0 µs | 2.0 µs | 10.0× |",
				"| 64 | 500 | create | 60.0 µs | 2.0 µs | 30.0× |",
				"| 64 | 10 | release | 1.0 µs | — | — |",
				"GROWTH 64 CPUs create: 3.00× (20.0 µs → 60.0 µs)",
				"   64 CPUs release: 1.50×",
			},
			not: []string{"GROWTH 64 CPUs release"},
		},
		{
			name:  "a higher limit reports nothing",
			input: sample,
			limit: 4,
			want:  []string{"   64 CPUs create: 3.00×"},
			not:   []string{"GROWTH"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs, err := parse(strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			report(&out, runs, tt.limit)
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("report has %q:\n%s", n, out.String())
				}
			}
		})
	}
}

func TestParseIgnoresOtherLines(t *testing.T) {
	runs, err := parse(strings.NewReader("BenchmarkOther-2  10  5 ns/op\nok  \tpkg\t1.2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 0 {
		t.Errorf("parsed %d results from lines of no scale benchmark: %+v", len(runs), runs)
	}
}
