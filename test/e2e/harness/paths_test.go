package harness

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDeclaresModule(t *testing.T) {
	tests := []struct {
		gomod string
		want  bool
	}{
		{"module " + modulePath + "\n\ngo 1.26\n", true},
		{"// comment\nmodule \"" + modulePath + "\"\n", true},
		{"module " + modulePath + "/test\n", false},
		{"module example.com/other\n", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := declaresModule(tt.gomod, modulePath); got != tt.want {
			t.Errorf("declaresModule(%q) = %v, want %v", tt.gomod, got, tt.want)
		}
	}
}

func TestFindModuleRoot(t *testing.T) {
	root := t.TempDir()
	nested := filepath.Join(root, "test", "e2e", "harness")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "go.mod"), "module "+modulePath+"\n")
	// A nested module of another path does not stop the walk.
	write(filepath.Join(root, "test", "go.mod"), "module example.com/fixtures\n")
	got, err := findModuleRoot(nested)
	if err != nil || got != root {
		t.Errorf("findModuleRoot(%s) = %q, %v; want %q", nested, got, err, root)
	}
	if _, err := findModuleRoot(t.TempDir()); err == nil {
		t.Error("findModuleRoot outside any checkout succeeded")
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !declaresModule(string(data), modulePath) {
		t.Errorf("RepoRoot() = %s, whose go.mod does not declare %s (%v)", root, modulePath, err)
	}
	if _, err := os.Stat(filepath.Join(root, "test", "e2e", "harness", "paths.go")); err != nil {
		t.Errorf("RepoRoot() = %s, which does not hold this package: %v", root, err)
	}
}
