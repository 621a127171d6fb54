package harness

import (
	"path/filepath"
	"testing"
)

func TestModuleOf(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ pkg, dir, rel string }{
		{"./cmd/nri-cpumanager", root, "./cmd/nri-cpumanager"},
		{"./test/e2e/internal/pinall", filepath.Join(root, "test", "e2e"), "./internal/pinall"},
		{"./test/e2e/demo", filepath.Join(root, "test", "e2e"), "./demo"},
	} {
		dir, rel, err := moduleOf(root, tc.pkg)
		if err != nil || dir != tc.dir || rel != tc.rel {
			t.Errorf("moduleOf(%s) = %s, %s, %v; want %s, %s", tc.pkg, dir, rel, err, tc.dir, tc.rel)
		}
	}
	if _, _, err := moduleOf(root, "./no/such/package/../../../.."); err == nil {
		t.Error("moduleOf above the repository root succeeded")
	}
}
