package deploy

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// twoGroups are the groups both the chart's values and the kustomize
// overlay of testdata/groups write: a canary that only observes, and
// nodes that reserve a core of each socket and give whole cores only.
func twoGroups() map[string]*config.Config {
	canary := shippedDefaults()
	canary.ObserveOnly = true
	big := shippedDefaults()
	big.ReservedSystemCPUs = cpuset.New(0, 32, 64, 96)
	big.CPUManagerPolicyOptions.FullPCPUsOnly = true
	return map[string]*config.Config{"canary": canary, "big-nodes": big}
}

// checkGroups fails unless p's ConfigMap holds exactly the groups of want,
// each read by the plugin's parser over the common file as want says,
// and the common configuration is still the shipped one.
func checkGroups(t *testing.T, p *deployed, want map[string]*config.Config) {
	t.Helper()
	if got := slices.Sorted(maps.Keys(p.groups)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Fatalf("groups %q, want %q", got, slices.Sorted(maps.Keys(want)))
	}
	for name, w := range want {
		sameConfig(t, "group "+name, p.groups[name], w)
	}
	sameConfig(t, "the common configuration", p.cfg, shippedDefaults())
}

// TestChartConfigGroups: configGroups writes a file per group beside
// config.yaml in the ConfigMap, which the plugin reads over it; the schema
// refuses a key only the common file sets and a name no label can have.
func TestChartConfigGroups(t *testing.T) {
	values := map[string]any{"configGroups": map[string]any{
		"canary":    map[string]any{"observeOnly": true},
		"big-nodes": map[string]any{"reservedSystemCPUs": "0,32,64,96", "cpuManagerPolicyOptions": map[string]any{"full-pcpus-only": "true"}},
	}}
	p := pluginOf(t, chart(t, values))
	checkSafe(t, p)
	checkGroups(t, p, twoGroups())

	empty := pluginOf(t, chart(t, map[string]any{"configGroups": map[string]any{"same": map[string]any{}}}))
	checkGroups(t, empty, map[string]*config.Config{"same": shippedDefaults()})

	for _, tt := range []struct {
		name  string
		group map[string]any
		want  string
	}{
		{"stateDir", map[string]any{"node": map[string]any{"stateDir": "/elsewhere"}}, "stateDir"},
		{"kubernetesAPI", map[string]any{"node": map[string]any{"kubernetesAPI": false}}, "kubernetesAPI"},
		{"an unknown key", map[string]any{"node": map[string]any{"observeOnyl": true}}, "observeOnyl"},
		{"a name no label can have", map[string]any{"big nodes": map[string]any{"observeOnly": true}}, "big nodes"},
		{"a value of the wrong type", map[string]any{"node": map[string]any{"observeOnly": "yes"}}, "observeOnly"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(loadChart(t), releaseName, map[string]any{"configGroups": tt.group})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("configGroups %v rendered (%v), want the schema's refusal naming %s", tt.group, err, tt.want)
			}
		})
	}
}

// TestKustomizeConfigGroups renders docs/install.md's way of adding
// groups to deploy/ (a configMapGenerator merging their files into the
// ConfigMap): the DaemonSet still mounts the same ConfigMap, whole, and
// the plugin reads each group over the common file.
func TestKustomizeConfigGroups(t *testing.T) {
	m := kustomize(t, filepath.Join("testdata", "groups"))
	p := pluginOf(t, m)
	checkSafe(t, p)
	if base := pluginOf(t, kustomize(t, deployDir)); p.cm.Name != base.cm.Name {
		t.Errorf("the ConfigMap is %s, deploy/'s %s: a renamed ConfigMap rolls the DaemonSet at every edit", p.cm.Name, base.cm.Name)
	}
	checkGroups(t, p, twoGroups())
}
