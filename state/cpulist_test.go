package state

import (
	"math/rand/v2"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestFormatCPUListMatchesTheLibrary(t *testing.T) {
	tests := []struct {
		name string
		set  cpuset.CPUSet
	}{
		{"zero value", cpuset.CPUSet{}},
		{"empty", cpuset.New()},
		{"one CPU", cpuset.New(5)},
		{"CPU 0", cpuset.New(0)},
		{"a pair", cpuset.New(1, 2)},
		{"ranges and singles", cpuset.New(0, 1, 2, 3, 8, 10, 11)},
		{"a range across a word", cpuset.New(62, 63, 64, 65)},
		{"word edges", cpuset.New(63, 64, 127, 128)},
		{"the largest CPU", cpuset.New(0, maxCPUID-1, maxCPUID)},
		{"negative CPU (library's text)", cpuset.New(-1, 0, 1)},
		{"above the largest CPU (library's text)", cpuset.New(1, maxCPUID+1)},
		{"a big machine's shared pool", benchState(200).DefaultCPUSet},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		var ids []int
		for range rng.IntN(300) {
			ids = append(ids, rng.IntN(64*(1+i%20)))
		}
		tests = append(tests, struct {
			name string
			set  cpuset.CPUSet
		}{"random", cpuset.New(ids...)})
	}
	for _, tc := range tests {
		if got, want := FormatCPUList(tc.set), tc.set.String(); got != want {
			t.Errorf("%s: FormatCPUList = %q, String() = %q", tc.name, got, want)
		}
	}
}

func TestFormatCPUListParsesBack(t *testing.T) {
	set := benchState(200).DefaultCPUSet
	back, err := parseCPUList(FormatCPUList(set))
	if err != nil || !SameCPUs(back, set) {
		t.Errorf("parseCPUList(FormatCPUList(set)): %v, equal %v", err, SameCPUs(back, set))
	}
}
