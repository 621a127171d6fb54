package fakesysfs

import (
	"bufio"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed layouts/*.csv layouts/*.distance
var layouts embed.FS

// layoutColumns is the header every layout CSV starts with (after comments).
const layoutColumns = "cpu,core,socket,die,node,l3"

// LayoutNames returns the names of the hand-written machine layouts, sorted.
func LayoutNames() []string {
	entries, err := fs.Glob(layouts, "layouts/*.csv")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(path.Base(e), ".csv"))
	}
	sort.Strings(names)
	return names
}

// Layout returns the machine described by layouts/<name>.csv (one line per
// CPU: cpu,core,socket,die,node,l3; an empty l3 means no L3 cache) and
// layouts/<name>.distance (the NUMA distance matrix, one row per node).
// Lines starting with # are comments.
func Layout(name string) (Machine, error) {
	csvPath, distPath := "layouts/"+name+".csv", "layouts/"+name+".distance"
	cpus, err := readLayoutCPUs(csvPath)
	if err != nil {
		return Machine{}, err
	}
	dist, err := readDistances(distPath)
	if err != nil {
		return Machine{}, err
	}
	m := Machine{CPUs: cpus, Distances: dist}
	if err := m.Validate(); err != nil {
		return Machine{}, fmt.Errorf("layout %s: %w", name, err)
	}
	return m, nil
}

// dataLines returns the non-empty, non-comment lines of an embedded file
// with their line numbers.
func dataLines(name string) ([]string, []int, error) {
	data, err := layouts.ReadFile(name)
	if err != nil {
		return nil, nil, fmt.Errorf("read layout: %w", err)
	}
	var lines []string
	var numbers []int
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lines = append(lines, line)
		numbers = append(numbers, n)
	}
	return lines, numbers, sc.Err()
}

func readLayoutCPUs(name string) ([]CPU, error) {
	lines, numbers, err := dataLines(name)
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 || lines[0] != layoutColumns {
		return nil, fmt.Errorf("%s: first data line must be %q", name, layoutColumns)
	}
	cpus := make([]CPU, 0, len(lines)-1)
	for i, line := range lines[1:] {
		fields := strings.Split(line, ",")
		if len(fields) != 6 {
			return nil, fmt.Errorf("%s:%d: want 6 fields, got %d", name, numbers[i+1], len(fields))
		}
		var v [6]int
		for j, f := range fields {
			if j == 5 && f == "" {
				v[j] = NoL3
				continue
			}
			if v[j], err = strconv.Atoi(f); err != nil {
				return nil, fmt.Errorf("%s:%d: field %d: %w", name, numbers[i+1], j+1, err)
			}
		}
		cpus = append(cpus, CPU{ID: v[0], Core: v[1], Socket: v[2], Die: v[3], Node: v[4], L3: v[5]})
	}
	return cpus, nil
}

func readDistances(name string) ([][]int, error) {
	lines, numbers, err := dataLines(name)
	if err != nil {
		return nil, err
	}
	dist := make([][]int, 0, len(lines))
	for i, line := range lines {
		var row []int
		for _, f := range strings.Fields(line) {
			d, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, numbers[i], err)
			}
			row = append(row, d)
		}
		dist = append(dist, row)
	}
	return dist, nil
}
