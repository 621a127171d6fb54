package config

import "testing"

// BenchmarkParseExample is the cost of one reload of a full config file.
func BenchmarkParseExample(b *testing.B) {
	doc := Example()
	for b.Loop() {
		if _, err := Parse(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatcherCheckUnchanged is the steady-state cost of one poll: read
// the file through the ConfigMap symlinks and hash it.
func BenchmarkWatcherCheckUnchanged(b *testing.B) {
	m := newConfigMapDir(b, string(Example()))
	w, err := NewWatcher(m.path(), Default(), WatchOptions{OnChange: func(*Config) { b.Fatal("unexpected change") }})
	if err != nil {
		b.Fatal(err)
	}
	w.check()
	for b.Loop() {
		w.check()
	}
}
