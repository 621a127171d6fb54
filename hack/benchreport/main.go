// Command benchreport reads the output of the policy's
// BenchmarkDecisionScale (go test -bench) on its standard input and prints,
// for each machine and number of containers, every decision's cost over
// the allocator's part of it, and how each decision's cost grows from the
// fewest containers to the most. A growth above -limit (2×) is reported
// on a line of its own starting with "GROWTH"; the exit status is 0 all
// the same: the figures are ratios of one run on a possibly busy machine,
// a guard for a human to read (make bench), never a failing test.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	limit := flag.Float64("limit", 2, "report a decision whose cost grows more than this from the fewest containers to the most")
	flag.Parse()
	runs, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	if len(runs) == 0 {
		fmt.Fprintln(os.Stderr, "benchreport: no BenchmarkDecisionScale result on the input")
		os.Exit(1)
	}
	report(os.Stdout, runs, *limit)
}

// run is one result: a decision on a machine with a number of containers.
type run struct {
	cpus, containers int
	// decision is create, grow, shrink or release; allocator marks the
	// allocator's part of it.
	decision  string
	allocator bool
	nsPerOp   float64
}

// line matches a result of BenchmarkDecisionScale, with or without the
// -GOMAXPROCS suffix.
var line = regexp.MustCompile(`^BenchmarkDecisionScale/cpus=(\d+)/containers=(\d+)/(\w+)(/allocator)?(?:-\d+)?\s+\d+\s+([0-9.]+) ns/op`)

// parse reads the results of a go test -bench output, passing every line
// through to nothing; the last result of a benchmark wins (-count > 1).
func parse(r io.Reader) ([]run, error) {
	var runs []run
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		cpus, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		ns, err := strconv.ParseFloat(m[5], 64)
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", sc.Text(), err)
		}
		runs = append(runs, run{cpus: cpus, containers: n, decision: m[3], allocator: m[4] != "", nsPerOp: ns})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the benchmarks' output: %w", err)
	}
	return runs, nil
}

// key names a decision on a machine with a number of containers.
type key struct {
	cpus, containers int
	decision         string
	allocator        bool
}

// report prints the table of ratios and the growths above limit.
func report(w io.Writer, runs []run, limit float64) {
	ns := map[key]float64{}
	var cpus, loads []int
	var decisions []string
	for _, r := range runs {
		ns[key{r.cpus, r.containers, r.decision, r.allocator}] = r.nsPerOp
		if !slices.Contains(cpus, r.cpus) {
			cpus = append(cpus, r.cpus)
		}
		if !slices.Contains(loads, r.containers) {
			loads = append(loads, r.containers)
		}
		if !r.allocator && !slices.Contains(decisions, r.decision) {
			decisions = append(decisions, r.decision)
		}
	}
	slices.Sort(cpus)
	slices.Sort(loads)
	fmt.Fprintln(w, "| CPUs | containers | decision | policy | allocator | policy ÷ allocator |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, c := range cpus {
		for _, n := range loads {
			for _, d := range decisions {
				p, ok := ns[key{c, n, d, false}]
				if !ok {
					continue
				}
				a, hasAlloc := ns[key{c, n, d, true}]
				alloc, ratio := "—", "—"
				if hasAlloc && a > 0 {
					alloc, ratio = duration(a), fmt.Sprintf("%.1f×", p/a)
				}
				fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s |\n", c, n, d, duration(p), alloc, ratio)
			}
		}
	}
	if len(loads) < 2 {
		return
	}
	first, last := loads[0], loads[len(loads)-1]
	fmt.Fprintf(w, "\ngrowth of each decision's cost from %d to %d containers (reported above %.1f×):\n", first, last, limit)
	for _, c := range cpus {
		for _, d := range decisions {
			a, okA := ns[key{c, first, d, false}]
			b, okB := ns[key{c, last, d, false}]
			if !okA || !okB || a <= 0 {
				continue
			}
			g := b / a
			mark := "  "
			if g > limit {
				mark = "GROWTH"
			}
			fmt.Fprintf(w, "%s %d CPUs %s: %.2f× (%s → %s)\n", mark, c, d, g, duration(a), duration(b))
		}
	}
}

// duration formats nanoseconds for a human.
func duration(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}
