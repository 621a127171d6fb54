package config

import (
	"strings"
	"testing"
)

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		address string
		want    bool
	}{
		{"127.0.0.1:9103", true},
		{"127.3.4.5:9103", true},
		{"[::1]:9103", true},
		{"[0:0:0:0:0:0:0:1]:9103", true},
		{"[::ffff:127.0.0.1]:9103", true},
		{"localhost:9103", true},
		{"LocalHost.:9103", true},
		{":9103", false},
		{"0.0.0.0:9103", false},
		{"[::]:9103", false},
		{"10.0.0.5:9103", false},
		{"[fe80::1]:9103", false},
		{"node-a:9103", false},
		{"", false},
		{"127.0.0.1", false}, // no port: not an address the plugin listens on
	} {
		if got := IsLoopback(tc.address); got != tc.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tc.address, got, tc.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []string // the substrings of each warning, in order; none: no warning
	}{
		{"defaults", "", nil},
		{"health on every address", `healthAddress: ":9103"`, nil},
		{"health on loopback", `healthAddress: "127.0.0.1:9103"`, []string{
			`healthAddress "127.0.0.1:9103" is a loopback address`, "never the kubelet's HTTP probes", `(":9103")`, "probeSocket"}},
		{"health on IPv6 loopback", `healthAddress: "[::1]:9104"`, []string{`healthAddress "[::1]:9104" is a loopback address`, `(":9104")`}},
		{"debug on loopback is its purpose", `debugAddress: "127.0.0.1:9102"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			got := Warnings(c)
			if len(tc.want) == 0 {
				if len(got) != 0 {
					t.Fatalf("warnings %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("warnings %q, want one", got)
			}
			for _, s := range tc.want {
				if !strings.Contains(got[0], s) {
					t.Errorf("warning %q does not say %q", got[0], s)
				}
			}
		})
	}
}
