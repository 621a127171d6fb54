package deploy

import (
	"path"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/engine"
)

// TestChartNotesDoctorCommand: the doctor command the chart's NOTES show
// names what the release installs: the pods by the release's label in its
// namespace, the plugin's container, its configuration file where the
// ConfigMap is mounted, and the root the host files are mounted under;
// and pipes in the kubelet's /configz, with which doctor passes on a
// healthy node (cmd/nri-cpumanager's TestDocumentedCommands runs it on
// one). Under another release name and namespace, and with the host
// files off (the command still runs, saying what it cannot see).
func TestChartNotesDoctorCommand(t *testing.T) {
	ch := loadChart(t)
	command := regexp.MustCompile(`kubectl -n (\S+) get pods -l app.kubernetes.io/instance=(\S+) -o name --field-selector spec.nodeName=<node>\)\n` +
		`\s+kubectl get --raw /api/v1/nodes/<node>/proxy/configz \|\n` +
		`\s+kubectl -n (\S+) exec -i "\$POD" -c (\S+) -- nri-cpumanager doctor --config (\S+) --host-root (\S+) --kubelet-config -\n`)
	for _, tc := range []struct {
		name, release, namespace string
		values                   map[string]any
	}{
		{"defaults", releaseName, releaseNamespace, nil},
		{"another release and namespace", "cpus", "kube-system", nil},
		{"no host files", releaseName, releaseNamespace, map[string]any{"doctor": map[string]any{"enabled": false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := chartutil.ToRenderValues(ch, tc.values, common.ReleaseOptions{Name: tc.release, Namespace: tc.namespace, Revision: 1, IsInstall: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			files, err := engine.Render(ch, vals)
			if err != nil {
				t.Fatal(err)
			}
			notes := files[ch.Name()+"/templates/NOTES.txt"]
			m := command.FindStringSubmatch(notes)
			if m == nil {
				t.Fatalf("the NOTES show no doctor command with the kubelet's /configz piped in:\n%s", notes)
			}
			ns, instance, execNS, container, configPath, root := m[1], m[2], m[3], m[4], m[5], m[6]
			p := pluginOf(t, must(t)(render(ch, tc.release, tc.namespace, tc.values)))
			if ns != tc.namespace || execNS != tc.namespace || p.ds.Namespace != tc.namespace {
				t.Errorf("the NOTES look in namespaces %s and %s, the DaemonSet is in %s", ns, execNS, p.ds.Namespace)
			}
			if got := p.ds.Spec.Template.Labels["app.kubernetes.io/instance"]; got != instance {
				t.Errorf("the NOTES select pods with app.kubernetes.io/instance=%s, the pods have %q", instance, got)
			}
			if container != p.ctr.Name {
				t.Errorf("the NOTES exec into container %s, the plugin's is %s", container, p.ctr.Name)
			}
			mounted := false
			for _, vm := range p.ctr.VolumeMounts {
				for _, v := range p.pod.Volumes {
					if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == p.cm.Name && vm.MountPath == path.Dir(configPath) {
						_, mounted = p.cm.Data[path.Base(configPath)]
					}
				}
			}
			if !mounted {
				t.Errorf("the NOTES' --config %s is not the plugin's ConfigMap's file in its container", configPath)
			}
			if root != hostRoot {
				t.Errorf("the NOTES' --host-root %s, the host files are mounted under %s", root, hostRoot)
			}
			if strings.Contains(notes, "<no value>") {
				t.Errorf("the NOTES have an unset value:\n%s", notes)
			}
		})
	}
}

// must fails the test on a rendering's error.
func must(t *testing.T) func(*manifests, error) *manifests {
	return func(m *manifests, err error) *manifests {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}
