package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DeployOverlay is how a suite runs the DaemonSet of the repository's
// deploy/ on its cluster: deploy/ as it is, pointed at the suite's
// containerd, state directory, image and API server.
type DeployOverlay struct {
	// Deploy is the deploy/ directory.
	Deploy string
	// Components are deploy/'s kustomize components to add, by their path
	// under deploy/ (e.g. "components/noderesourcetopology").
	Components []string
	// Image and Tag name the plugin's image as the suite imported it.
	Image, Tag string
	// NRISocketDir is the directory of containerd's NRI socket; StateDir the
	// plugin's state directory on the node.
	NRISocketDir, StateDir string
	// APIHost and APIPort are the API server's loopback address.
	APIHost, APIPort string
	// With the component components/adjustment-validator, the validating
	// plugin's container has its CPU request dropped too.
	//
	// KubeletCheckpoint, with the component components/kubelet-checkpoint,
	// is where the node's kubelet keeps cpu_manager_state (its root
	// directory is not /var/lib/kubelet here): the component's volume is
	// pointed at it, as an operator's overlay patches it.
	KubeletCheckpoint string
	// KubeletConfig and ContainerdConfig are the node's kubelet's and
	// containerd's configuration files, which deploy/ mounts read-only for
	// the plugin's check of its node (as /var/lib/kubelet/config.yaml and
	// /etc/containerd/config.toml, not where they are here); the drop-in
	// directories deploy/ mounts beside them are pointed at empty
	// directories under the overlay's, so that the suite creates nothing
	// in the host's /etc or /var/lib/kubelet. Empty: files under the
	// overlay's directory, created empty.
	KubeletConfig, ContainerdConfig string
}

// Write writes the overlay's kustomization into dir, for `kubectl apply
// -k dir`. The test nodes have no CNI and no kube-proxy: the DaemonSet runs
// on the host network and reaches the API server at its loopback address.
// Its CPU request is dropped so that the kubelet leaves every CPU of the
// node to the suites' pods and asks the plugin about every resize.
func (o DeployOverlay) Write(dir string) error {
	// kustomize takes a relative path to its base only.
	base, err := filepath.Rel(dir, o.Deploy)
	if err != nil {
		return fmt.Errorf("deploy overlay: %w", err)
	}
	var components strings.Builder
	if len(o.Components) > 0 {
		components.WriteString("components:\n")
		for _, c := range o.Components {
			fmt.Fprintf(&components, "- %s\n", filepath.Join(base, c))
		}
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
%simages:
- name: ghcr.io/nri-cpumanager/nri-cpumanager
  newName: %s
  newTag: %s
patches:
- path: daemonset-patch.yaml
`, base, components.String(), o.Image, o.Tag)
	patch := fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nri-cpumanager
  namespace: nri-cpumanager
spec:
  template:
    spec:
      hostNetwork: true
      containers:
      - name: nri-cpumanager
        resources:
          requests: {cpu: "0"}
        env:
        - {name: KUBERNETES_SERVICE_HOST, value: %q}
        - {name: KUBERNETES_SERVICE_PORT, value: %q}
%s      volumes:
      - name: nri
        hostPath: {path: %q, type: Directory}
      - name: state
        hostPath: {path: %q, type: DirectoryOrCreate}
`, o.APIHost, o.APIPort, o.validatorPatch(), o.NRISocketDir, o.StateDir)
	if o.KubeletCheckpoint != "" {
		patch += fmt.Sprintf("      - name: kubelet-checkpoint\n        hostPath: {path: %q, type: File}\n", o.KubeletCheckpoint)
	}
	hostFiles, err := filepath.Abs(filepath.Join(dir, "host"))
	if err != nil {
		return fmt.Errorf("deploy overlay: %w", err)
	}
	kubeletConfig, containerdConfig := o.KubeletConfig, o.ContainerdConfig
	if kubeletConfig == "" {
		kubeletConfig = filepath.Join(hostFiles, "kubelet", "config.yaml")
	}
	if containerdConfig == "" {
		containerdConfig = filepath.Join(hostFiles, "containerd", "config.toml")
	}
	for _, v := range []struct{ name, path, kind string }{
		{"host-kubelet-config", kubeletConfig, "FileOrCreate"},
		{"host-kubelet-dropins", filepath.Join(hostFiles, "kubelet.conf.d"), "DirectoryOrCreate"},
		{"host-containerd-config", containerdConfig, "FileOrCreate"},
		{"host-containerd-dropins", filepath.Join(hostFiles, "conf.d"), "DirectoryOrCreate"},
	} {
		if err := os.MkdirAll(filepath.Dir(v.path), 0o755); err != nil && v.kind == "FileOrCreate" {
			return fmt.Errorf("deploy overlay: %w", err)
		}
		patch += fmt.Sprintf("      - name: %s\n        hostPath: {path: %q, type: %s}\n", v.name, v.path, v.kind)
	}
	for name, content := range map[string]string{"kustomization.yaml": kustomization, "daemonset-patch.yaml": patch} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("deploy overlay: %w", err)
		}
	}
	return nil
}

// AdjustmentValidatorComponent is deploy/'s component that adds the
// validating NRI plugin's container.
const AdjustmentValidatorComponent = "components/adjustment-validator"

// validatorPatch is the patch's entry for the validating plugin's
// container: its CPU request dropped, as the plugin's. None without the
// component (a patch of a container the DaemonSet does not have would add
// one).
func (o DeployOverlay) validatorPatch() string {
	for _, c := range o.Components {
		if c == AdjustmentValidatorComponent {
			return "      - name: validate-adjustments\n        resources:\n          requests: {cpu: \"0\"}\n"
		}
	}
	return ""
}
