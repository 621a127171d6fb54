package main

import (
	"fmt"
	"strings"
)

// lineDiff shows how got differs from want: the lines only in want (-)
// and only in got (+), with the line before each run of changes for
// context.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	prev, changed := "", false
	mark := func(sign, line string) {
		if !changed && prev != "" {
			fmt.Fprintf(&out, "  %s\n", prev)
		}
		changed = true
		fmt.Fprintf(&out, "%s %s\n", sign, line)
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			prev, changed = a[i], false
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			mark("-", a[i])
			i++
		default:
			mark("+", b[j])
			j++
		}
	}
	return out.String()
}
