package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The parts of Kubernetes objects the suites read from `kubectl -o json`.
type (
	// KubeMeta is an object's name, UID and resource version.
	KubeMeta struct {
		Name            string `json:"name"`
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
	}
	// KubeResources is a container's resources as its status reports them.
	KubeResources struct {
		Limits map[string]string `json:"limits"`
	}
	// KubeCondition is one of a pod's conditions.
	KubeCondition struct {
		Type    string `json:"type"`
		Status  string `json:"status"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	// KubeContainerStatus is one container's status in a pod.
	KubeContainerStatus struct {
		Name        string `json:"name"`
		ContainerID string `json:"containerID"`
		State       struct {
			Waiting *struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"waiting"`
			Running    *struct{}            `json:"running"`
			Terminated *KubeTerminatedState `json:"terminated"`
		} `json:"state"`
		// LastState is how the container's previous instance ended, once
		// the kubelet has re-created it (or is waiting to: a crash loop's
		// back-off).
		LastState struct {
			Terminated *KubeTerminatedState `json:"terminated"`
		} `json:"lastState"`
		// RestartCount counts the kubelet's re-creations of the container
		// (in one sandbox and across sandboxes).
		RestartCount int            `json:"restartCount"`
		Resources    *KubeResources `json:"resources"`
	}
	// KubeTerminatedState is how a container ended: its exit code, its
	// termination message (what it wrote to /dev/termination-log) and
	// when.
	KubeTerminatedState struct {
		ExitCode   int       `json:"exitCode"`
		Reason     string    `json:"reason"`
		Message    string    `json:"message"`
		FinishedAt time.Time `json:"finishedAt"`
	}
	// KubePod is a pod's name, UID, phase, conditions and container
	// statuses (its init containers', sidecars included, apart).
	KubePod struct {
		Metadata KubeMeta `json:"metadata"`
		Status   struct {
			Phase                 string                `json:"phase"`
			Conditions            []KubeCondition       `json:"conditions"`
			InitContainerStatuses []KubeContainerStatus `json:"initContainerStatuses"`
			ContainerStatuses     []KubeContainerStatus `json:"containerStatuses"`
		} `json:"status"`
	}
)

// Condition returns the pod's condition of type typ, or nil.
func (p *KubePod) Condition(typ string) *KubeCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Ready reports whether the pod's Ready condition is true.
func (p *KubePod) Ready() bool {
	c := p.Condition("Ready")
	return c != nil && c.Status == "True"
}

// Container returns the status of the pod's container called name, or nil.
func (p *KubePod) Container(name string) *KubeContainerStatus {
	return containerStatus(p.Status.ContainerStatuses, name)
}

// InitContainer returns the status of the pod's init container (or
// sidecar) called name, or nil.
func (p *KubePod) InitContainer(name string) *KubeContainerStatus {
	return containerStatus(p.Status.InitContainerStatuses, name)
}

func containerStatus(statuses []KubeContainerStatus, name string) *KubeContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// HTTPGet fetches url within 10 s and returns its status and body.
func HTTPGet(ctx context.Context, url string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return resp.StatusCode, body, nil
}

// MetricValue reads one sample, named with its labels as the exposition
// format writes it (`name{label="value"}`), from the Prometheus metrics
// at url.
func MetricValue(ctx context.Context, url, series string) (float64, error) {
	_, body, err := HTTPGet(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("read metrics: %w", err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in the metrics at %s", series, url)
}

// PodContainer is a container of PodManifest: its name and resources (a
// JSON object), and optionally its command and what kind of container it
// is.
type PodContainer struct {
	Name, Resources string
	// Command replaces the image's (sleep 3600) when set.
	Command []string
	// Init makes it an init container, run to completion before the
	// pod's containers; with RestartPolicy "Always" it is a sidecar (a
	// restartable init container), which keeps running beside them.
	Init          bool
	RestartPolicy string
}

// PodManifest returns a pod for the node on the host network whose
// containers run the busybox image (never pulled).
func PodManifest(name, nodeName string, containers ...PodContainer) string {
	return manifest(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]string{"name": name, "namespace": "default"},
		"spec":     newPodSpec(nodeName, "", containers),
	})
}

// JobManifest returns a Job that runs one pod of PodManifest's kind with
// restartPolicy Never, never retried (backoffLimit 0) and kept after it
// completes (no ttlSecondsAfterFinished).
func JobManifest(name, nodeName string, containers ...PodContainer) string {
	return manifest(map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]string{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"backoffLimit": 0,
			"template":     map[string]any{"spec": newPodSpec(nodeName, "Never", containers)},
		},
	})
}

// manifestPodSpec is the spec of PodManifest's and JobManifest's pods.
type manifestPodSpec struct {
	NodeName                      string              `json:"nodeName"`
	HostNetwork                   bool                `json:"hostNetwork"`
	AutomountServiceAccountToken  bool                `json:"automountServiceAccountToken"`
	EnableServiceLinks            bool                `json:"enableServiceLinks"`
	TerminationGracePeriodSeconds int                 `json:"terminationGracePeriodSeconds"`
	RestartPolicy                 string              `json:"restartPolicy,omitempty"`
	InitContainers                []manifestContainer `json:"initContainers,omitempty"`
	Containers                    []manifestContainer `json:"containers"`
}

type manifestContainer struct {
	Name            string          `json:"name"`
	Image           string          `json:"image"`
	ImagePullPolicy string          `json:"imagePullPolicy"`
	Command         []string        `json:"command,omitempty"`
	RestartPolicy   string          `json:"restartPolicy,omitempty"`
	Resources       json.RawMessage `json:"resources"`
}

// newPodSpec returns a pod spec on the node's host network, without
// service account token or service links, stopped within a second;
// restartPolicy "" leaves the default (Always).
func newPodSpec(nodeName, restartPolicy string, containers []PodContainer) manifestPodSpec {
	spec := manifestPodSpec{NodeName: nodeName, HostNetwork: true, TerminationGracePeriodSeconds: 1, RestartPolicy: restartPolicy}
	for _, c := range containers {
		mc := manifestContainer{Name: c.Name, Image: BusyboxImage, ImagePullPolicy: "Never", Command: c.Command,
			RestartPolicy: c.RestartPolicy, Resources: json.RawMessage(c.Resources)}
		if c.Init {
			spec.InitContainers = append(spec.InitContainers, mc)
		} else {
			spec.Containers = append(spec.Containers, mc)
		}
	}
	return spec
}

// manifest encodes an object for kubectl; it panics on resources that are
// not JSON (a mistake in the test's own constants).
func manifest(object any) string {
	data, err := json.MarshalIndent(object, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("a manifest that is not JSON: %v", err))
	}
	return string(data)
}

// GuaranteedCPUs is a Guaranteed container's resources with whole CPUs.
func GuaranteedCPUs(cpus int, memory string) string {
	return fmt.Sprintf(`{"requests": {"cpu": "%d", "memory": %q}, "limits": {"cpu": "%d", "memory": %q}}`, cpus, memory, cpus, memory)
}
