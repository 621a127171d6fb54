package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestMetricValue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP x y\nnri_cpumanager_kubernetes_api_available{feature=\"events\"} 0\nnri_cpumanager_kubernetes_api_available{feature=\"pods\"} 1\nother 2.5\n")
	}))
	defer srv.Close()
	for _, tc := range []struct {
		series  string
		want    float64
		wantErr string
	}{
		{`nri_cpumanager_kubernetes_api_available{feature="pods"}`, 1, ""},
		{`nri_cpumanager_kubernetes_api_available{feature="events"}`, 0, ""},
		{"other", 2.5, ""},
		{"missing", 0, "no missing in the metrics"},
	} {
		got, err := MetricValue(context.Background(), srv.URL, tc.series)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.series, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s = %v (%v), want %v", tc.series, got, err, tc.want)
		}
	}
}

func TestDeployOverlayWrite(t *testing.T) {
	root := t.TempDir()
	deploy, dir := filepath.Join(root, "deploy"), filepath.Join(root, "run", "overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o := DeployOverlay{Deploy: deploy, Components: []string{"components/nrt"}, Image: "localhost/p", Tag: "e2e",
		NRISocketDir: "/run/nri", StateDir: "/var/lib/p", APIHost: "127.0.0.1", APIPort: "6443",
		KubeletCheckpoint: "/tmp/kube-1/kubelet/cpu_manager_state"}
	if err := o.Write(dir); err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources  []string `json:"resources"`
		Components []string `json:"components"`
		Images     []struct {
			NewName, NewTag string
		} `json:"images"`
	}
	read := func(name string, v any) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, data)
		}
	}
	read("kustomization.yaml", &k)
	if len(k.Resources) != 1 || k.Resources[0] != "../../deploy" || len(k.Components) != 1 || k.Components[0] != "../../deploy/components/nrt" {
		t.Errorf("kustomization: resources %v, components %v, want deploy/ and its component as relative paths", k.Resources, k.Components)
	}
	if len(k.Images) != 1 || k.Images[0].NewName != "localhost/p" || k.Images[0].NewTag != "e2e" {
		t.Errorf("kustomization images %+v", k.Images)
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					HostNetwork bool `json:"hostNetwork"`
					Containers  []struct {
						Env []struct{ Name, Value string } `json:"env"`
					} `json:"containers"`
					Volumes []struct {
						Name     string
						HostPath struct{ Path string } `json:"hostPath"`
					} `json:"volumes"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var patch map[string]any
	read("daemonset-patch.yaml", &patch)
	data, _ := yaml.Marshal(patch)
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || len(spec.Containers) != 1 || len(spec.Containers[0].Env) != 2 ||
		spec.Containers[0].Env[0].Value != "127.0.0.1" || spec.Containers[0].Env[1].Value != "6443" {
		t.Errorf("daemonset patch: %+v", spec)
	}
	paths := map[string]string{}
	for _, v := range spec.Volumes {
		paths[v.Name] = v.HostPath.Path
	}
	if paths["nri"] != "/run/nri" || paths["state"] != "/var/lib/p" || paths["kubelet-checkpoint"] != o.KubeletCheckpoint {
		t.Errorf("daemonset patch volumes %v", paths)
	}
	// deploy/'s host files point at the overlay's directory: the suite
	// creates nothing in the host's /etc or /var/lib/kubelet.
	for _, name := range []string{"host-kubelet-config", "host-kubelet-dropins", "host-containerd-config", "host-containerd-dropins"} {
		if !strings.HasPrefix(paths[name], dir+"/") {
			t.Errorf("daemonset patch: volume %s at %q, want under %s", name, paths[name], dir)
		}
	}
}

// TestDeployOverlayValidatorPatch: with deploy/'s adjustment-validator
// component the patch drops its container's CPU request too; without it
// the patch names no such container (it would add one).
func TestDeployOverlayValidatorPatch(t *testing.T) {
	for _, with := range []bool{false, true} {
		root := t.TempDir()
		dir := filepath.Join(root, "overlay")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		o := DeployOverlay{Deploy: filepath.Join(root, "deploy"), Image: "localhost/p", Tag: "e2e", NRISocketDir: "/run/nri", StateDir: "/var/lib/p"}
		if with {
			o.Components = []string{AdjustmentValidatorComponent}
		}
		if err := o.Write(dir); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "daemonset-patch.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var ds struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name      string
							Resources struct{ Requests map[string]string }
						}
					}
				}
			}
		}
		if err := yaml.Unmarshal(data, &ds); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range ds.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
			if c.Resources.Requests["cpu"] != "0" {
				t.Errorf("component %v: container %s keeps its CPU request: %v", with, c.Name, c.Resources.Requests)
			}
		}
		want := []string{"nri-cpumanager"}
		if with {
			want = append(want, "validate-adjustments")
		}
		if strings.Join(names, " ") != strings.Join(want, " ") {
			t.Errorf("component %v: the patch names containers %v, want %v", with, names, want)
		}
	}
}

// TestPodManifest: the manifest is a pod whose containers carry their
// names and resources in order, on the node, with the local busybox image.
func TestPodManifest(t *testing.T) {
	m := PodManifest("multi", "node1",
		PodContainer{Name: "c1", Resources: GuaranteedCPUs(2, "64Mi")},
		PodContainer{Name: "c2", Resources: `{"requests": {"memory": "32Mi"}}`})
	var pod struct {
		Metadata struct{ Name string }
		Spec     struct {
			NodeName   string
			Containers []struct {
				Name, Image, ImagePullPolicy string
				Resources                    struct{ Requests, Limits map[string]string }
			}
		}
	}
	if err := json.Unmarshal([]byte(m), &pod); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, m)
	}
	cs := pod.Spec.Containers
	if pod.Metadata.Name != "multi" || pod.Spec.NodeName != "node1" || len(cs) != 2 ||
		cs[0].Name != "c1" || cs[0].Resources.Requests["cpu"] != "2" || cs[0].Resources.Limits["cpu"] != "2" ||
		cs[0].Resources.Limits["memory"] != "64Mi" || cs[0].Image != BusyboxImage || cs[0].ImagePullPolicy != "Never" ||
		cs[1].Name != "c2" || cs[1].Resources.Requests["memory"] != "32Mi" || cs[1].Resources.Limits != nil {
		t.Errorf("manifest read back as %+v:\n%s", pod, m)
	}
}

// TestPodManifestInitContainers: init containers and sidecars go to
// initContainers in order, with their commands and restart policy; the
// pod's own restart policy stays the default.
func TestPodManifestInitContainers(t *testing.T) {
	m := PodManifest("lives", "node1",
		PodContainer{Name: "init", Resources: GuaranteedCPUs(1, "64Mi"), Init: true, Command: []string{"sh", "-c", `echo "a b" > /x`}},
		PodContainer{Name: "sidecar", Resources: GuaranteedCPUs(1, "64Mi"), Init: true, RestartPolicy: "Always"},
		PodContainer{Name: "app", Resources: GuaranteedCPUs(1, "64Mi")})
	var pod struct {
		Spec struct {
			RestartPolicy  *string
			InitContainers []struct {
				Name, RestartPolicy string
				Command             []string
			}
			Containers []struct {
				Name    string
				Command []string
			}
		}
	}
	if err := json.Unmarshal([]byte(m), &pod); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, m)
	}
	inits, apps := pod.Spec.InitContainers, pod.Spec.Containers
	if pod.Spec.RestartPolicy != nil || len(inits) != 2 || len(apps) != 1 ||
		inits[0].Name != "init" || inits[0].RestartPolicy != "" || len(inits[0].Command) != 3 || inits[0].Command[2] != `echo "a b" > /x` ||
		inits[1].Name != "sidecar" || inits[1].RestartPolicy != "Always" || inits[1].Command != nil ||
		apps[0].Name != "app" || apps[0].Command != nil {
		t.Errorf("manifest read back as %+v:\n%s", pod, m)
	}
}

// TestJobManifest: a Job of one pod that is never restarted nor retried,
// on the node's host network.
func TestJobManifest(t *testing.T) {
	m := JobManifest("once", "node1", PodContainer{Name: "work", Resources: GuaranteedCPUs(1, "64Mi"), Command: []string{"true"}})
	var job struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
		Spec             struct {
			BackoffLimit *int
			Template     struct {
				Spec struct {
					NodeName, RestartPolicy string
					HostNetwork             bool
					Containers              []struct {
						Name    string
						Command []string
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(m), &job); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, m)
	}
	spec := job.Spec.Template.Spec
	if job.APIVersion != "batch/v1" || job.Kind != "Job" || job.Metadata.Name != "once" || job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 ||
		spec.NodeName != "node1" || spec.RestartPolicy != "Never" || !spec.HostNetwork ||
		len(spec.Containers) != 1 || spec.Containers[0].Name != "work" || len(spec.Containers[0].Command) != 1 {
		t.Errorf("manifest read back as %+v:\n%s", job, m)
	}
}
