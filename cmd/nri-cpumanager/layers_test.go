package main

import (
	"os/exec"
	"strings"
	"testing"
)

// module is the import path of the project's module.
const module = "github.com/nri-cpumanager/nri-cpumanager/"

// layers ranks the project's packages (docs/design.md, "Architecture"):
// a package imports only packages of a lower rank, so dependencies point
// one way and the two adapters of the edge, plugin (NRI) and kubeapi
// (Kubernetes), sit side by side. A package is ranked by the longest
// prefix listed.
var layers = map[string]int{
	"cpumask":                     0,
	"pmap":                        0,
	"hack/ocilayout":              0,
	"hack/benchreport":            0,
	"state":                       1,
	"cpuallocator":                1,
	"cpuallocator/internal/sysfs": 0,
	"cpuallocator/devices":        2,
	"hack/image":                  1,
	"hack/configdocs":             3,
	"hack/release":                1,
	"config":                      2,
	"policy":                      2,
	"plugin":                      3,
	"adjustguard":                 3,
	"kubeapi":                     3,
	"cmd/nri-cpumanager":          6,
	"scenario":                    3,
	"cmd/nri-cpumanager/assemble": 4,
	"test":                        7,
}

// rank returns the rank of pkg (a path inside the module).
func rank(pkg string) (int, bool) {
	best, r := "", 0
	for prefix, n := range layers {
		if (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && len(prefix) > len(best) {
			best, r = prefix, n
		}
	}
	return r, best != ""
}

// TestDependenciesPointOneWay checks every production import between the
// project's packages against layers: kubeapi does not import plugin, nor
// the policy the NRI adapter, and a new package must be ranked.
func TestDependenciesPointOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from, ok := rank(pkg)
		if !ok {
			t.Errorf("package %s has no place in the layers: rank it in layers (and docs/design.md)", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			to, ok := rank(dep)
			if ok && to >= from && !strings.HasPrefix(dep, pkg+"/") {
				t.Errorf("%s (rank %d) imports %s (rank %d): dependencies point from higher ranks to lower ones only", pkg, from, dep, to)
			}
		}
	}
}

// heavyPackages are packages the plugin's binary must not link, each for
// the resident memory its code and initialisation cost the long-running
// process (docs/performance.md, "Memory"): a package listed is refused,
// and, unless exact, every package under it.
var heavyPackages = []struct {
	pkg, why string
	exact    bool
}{
	// grpc-go's status and codes packages, which ttrpc uses, are not its
	// client.
	{"google.golang.org/grpc", "grpc-go's client and server (with the CRI's generated code, a quarter of the binary): doctor's one CRI call is criversion.go", true},
	{"k8s.io/cri-api", "the CRI's generated code: doctor's one CRI call is criversion.go", false},
	{"k8s.io/client-go/kubernetes", "client-go's clientset, whose scheme registers every API group at start: kubeapi uses REST clients of core/v1 and events/v1", false},
	{"k8s.io/client-go/informers", "client-go's informer factories, which link the clientset", false},
}

// TestBinaryLinksNoHeavyPackages checks the plugin's dependencies against
// heavyPackages.
func TestBinaryLinksNoHeavyPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"cmd/nri-cpumanager").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, h := range heavyPackages {
			if dep == h.pkg || (!h.exact && strings.HasPrefix(dep, h.pkg+"/")) {
				t.Errorf("the plugin's binary links %s: %s", dep, h.why)
			}
		}
	}
}
