package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The parts of Kubernetes objects the suites read from `kubectl -o json`.
type (
	// KubeMeta is an object's name and UID.
	KubeMeta struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
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
			Running *struct{} `json:"running"`
		} `json:"state"`
		Resources *KubeResources `json:"resources"`
	}
	// KubePod is a pod's name, UID, conditions and container statuses.
	KubePod struct {
		Metadata KubeMeta `json:"metadata"`
		Status   struct {
			Conditions        []KubeCondition       `json:"conditions"`
			ContainerStatuses []KubeContainerStatus `json:"containerStatuses"`
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
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
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
// JSON object).
type PodContainer struct {
	Name, Resources string
}

// PodManifest returns a pod for the node on the host network whose
// containers run the busybox image (never pulled).
func PodManifest(name, nodeName string, containers ...PodContainer) string {
	specs := make([]string, len(containers))
	for i, c := range containers {
		specs[i] = fmt.Sprintf(`{"name": %q, "image": %q, "imagePullPolicy": "Never", "resources": %s}`,
			c.Name, BusyboxImage, c.Resources)
	}
	return fmt.Sprintf(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": %q, "namespace": "default"},
  "spec": {
    "nodeName": %q, "hostNetwork": true, "automountServiceAccountToken": false,
    "enableServiceLinks": false, "terminationGracePeriodSeconds": 1,
    "containers": [%s]
  }
}`, name, nodeName, strings.Join(specs, ", "))
}

// GuaranteedCPUs is a Guaranteed container's resources with whole CPUs.
func GuaranteedCPUs(cpus int, memory string) string {
	return fmt.Sprintf(`{"requests": {"cpu": "%d", "memory": %q}, "limits": {"cpu": "%d", "memory": %q}}`, cpus, memory, cpus, memory)
}
