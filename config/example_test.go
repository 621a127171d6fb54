package config

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// The example states every default; it deliberately changes no value.
func TestExampleIsTheDefaults(t *testing.T) {
	c, err := Parse(Example())
	if err != nil {
		t.Fatalf("example.yaml does not parse: %v", err)
	}
	requireSame(t, c, Default())
}

func TestExampleWritesEveryKeyAndOptionWithAComment(t *testing.T) {
	var keys []string
	var prev string
	sc := bufio.NewScanner(bytes.NewReader(Example()))
	for sc.Scan() {
		line := sc.Text()
		if key, _, ok := strings.Cut(line, ":"); ok && line[0] != ' ' && line[0] != '#' {
			keys = append(keys, key)
			// A key is documented by the comment block right above it or
			// by being part of a group whose first key is.
			if prev == "" {
				t.Errorf("example.yaml: key %s has no comment above it", key)
			}
		}
		prev = strings.TrimSpace(line)
	}
	if want := append([]string{"apiVersion", "kind"}, schemaKeys()...); !slices.Equal(keys, want) {
		t.Errorf("example.yaml writes keys %v, want its type and every key in schema order %v", keys, want)
	}

	d, _, err := decode(Example())
	if err != nil {
		t.Fatal(err)
	}
	if d.value("cpuManagerPolicyOptions").Len() != len(cpuallocator.StaticPolicyOptionNames()) || d.value("topologyManagerPolicyOptions").Len() != 2 {
		t.Errorf("example.yaml leaves options out: %v %v", d.value("cpuManagerPolicyOptions"), d.value("topologyManagerPolicyOptions"))
	}
}
