package harness

import (
	"path/filepath"
	"testing"
)

func TestParseRequiredVersion(t *testing.T) {
	gomod := `module x

go 1.26.0

require k8s.io/kubernetes v1.36.3

require (
	go.etcd.io/etcd/server/v3 v3.6.8 // indirect
	k8s.io/api v0.36.3
)

replace k8s.io/api => k8s.io/api v0.36.4
`
	for module, want := range map[string]string{
		"k8s.io/kubernetes":         "v1.36.3",
		"go.etcd.io/etcd/server/v3": "v3.6.8",
		"k8s.io/api":                "v0.36.3",
		"k8s.io/apimachinery":       "",
	} {
		got, ok := parseRequiredVersion(gomod, module)
		if got != want || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", module, got, ok, want)
		}
	}
}

// TestPinnedVersions reads the versions the two wrapper modules pin: the
// Kubernetes release and the etcd its client is built against.
func TestPinnedVersions(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, module string }{
		{kubernetesModuleDir, kubernetesModule},
		{etcdModuleDir, etcdModule},
	} {
		v, err := requiredVersion(filepath.Join(root, c.dir, "go.mod"), c.module)
		if err != nil || v == "" {
			t.Errorf("%s: %q, %v", c.dir, v, err)
		}
	}
	k8s, _ := requiredVersion(filepath.Join(root, kubernetesModuleDir, "go.mod"), "go.etcd.io/etcd/client/v3")
	etcd, _ := requiredVersion(filepath.Join(root, etcdModuleDir, "go.mod"), etcdModule)
	if k8s != etcd {
		t.Errorf("Kubernetes' etcd client is %s, the etcd server %s: keep them the same release", k8s, etcd)
	}
}

func TestKubernetesLDFlags(t *testing.T) {
	want := "-X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36" +
		" -X k8s.io/client-go/pkg/version.gitVersion=v1.36.3 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=36"
	if got := kubernetesLDFlags("v1.36.3"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
