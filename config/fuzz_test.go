package config

import "testing"

// FuzzParse checks that Parse never panics, and that every config it
// accepts survives a YAML round trip unchanged. The seed corpus is in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(Example())
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned both a config and an error: %v", err)
			}
			return
		}
		out, err := c.YAML()
		if err != nil {
			t.Fatalf("YAML of an accepted config: %v", err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(YAML(c)) failed: %v\ninput: %q\nYAML: %s", err, data, out)
		}
		if ch := Diff(c, back); !ch.Empty() {
			t.Fatalf("round trip changed %s\ninput: %q\nYAML: %s", ch, data, out)
		}
	})
}
