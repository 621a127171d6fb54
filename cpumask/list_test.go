package cpumask

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestFormatMatchesTheLibrary(t *testing.T) {
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
		{"the largest CPU", cpuset.New(0, MaxID-1, MaxID)},
		{"negative CPU (library's text)", cpuset.New(-1, 0, 1)},
		{"above the largest CPU (library's text)", cpuset.New(1, MaxID+1)},
		{"a big machine's shared pool", bigPool()},
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
		if got, want := Format(tc.set), tc.set.String(); got != want {
			t.Errorf("%s: Format = %q, String() = %q", tc.name, got, want)
		}
	}
}

func TestFormatParsesBack(t *testing.T) {
	set := bigPool()
	back, err := Parse(Format(set), MaxID)
	if err != nil || !Equal(back, set) {
		t.Errorf("Parse(Format(set)): %v, equal %v", err, Equal(back, set))
	}
}

// bigPool is a shared pool of a 4096-CPU machine with scattered holes.
func bigPool() cpuset.CPUSet {
	var ids []int
	for cpu := range 4096 {
		if cpu%7 != 3 && cpu%61 != 0 {
			ids = append(ids, cpu)
		}
	}
	return cpuset.New(ids...)
}

func TestParse(t *testing.T) {
	tests := []struct {
		text  string
		maxID int
		want  string
		err   string
	}{
		{text: "", maxID: 7, want: ""},
		{text: "0-3,8,10-11", maxID: 15, want: "0-3,8,10-11"},
		{text: "3,1-2,2-3", maxID: 15, want: "1-3"},
		{text: "0-7", maxID: 7, want: "0-7"},
		{text: "0-8", maxID: 7, err: "CPU 8 is above the largest supported CPU 7"},
		{text: "0-9999999", maxID: 63, err: "above the largest supported CPU 63"},
		{text: "0-99999999999999999999", maxID: -1, err: "above the largest supported CPU 65535"},
		{text: "3-1", maxID: 7, err: "range runs backwards"},
		{text: "1,,2", maxID: 7, err: "missing CPU number"},
		{text: " 1", maxID: 7, err: "is not a CPU number"},
		{text: "+1", maxID: 7, err: "is not a CPU number"},
		{text: "-1", maxID: 7, err: "missing CPU number"},
		{text: "1-2-3", maxID: 7, err: "is not a CPU number"},
		// The longest list without repeats passes; one byte more is
		// refused before it is split (a 4 MiB "1,1,1,…" cost 0.3 s and
		// 114 MB).
		{text: "0,1,2,3,4,5,6,7,8,9,10,11", maxID: 11, want: "0-11"},
		{text: "0,1,2,3,4,5,6,7,8,9,10,11,", maxID: 11, err: "26 bytes is longer than any list of CPUs 0-11 (25 bytes)"},
		{text: strings.Repeat("1,", 2<<20) + "1", maxID: -1, err: "is longer than any list of CPUs 0-65535"},
	}
	for _, tc := range tests {
		got, err := Parse(tc.text, tc.maxID)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q, %d) = %v, %v; want error containing %q", tc.text, tc.maxID, got, err, tc.err)
			}
		case err != nil || got.String() != tc.want:
			t.Errorf("Parse(%q, %d) = %q, %v; want %q", tc.text, tc.maxID, got, err, tc.want)
		}
	}
}
