package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// validatorTable returns the lines of deploy/containerd-nri.toml's NRI
// default_validator table: those in force, and those commented out (the
// opt-ins), each without its "#".
func validatorTable(t *testing.T) (on, commented []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, "containerd-nri.toml"))
	if err != nil {
		t.Fatal(err)
	}
	const header = "[plugins.'io.containerd.nri.v1.nri'.default_validator]"
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == header:
			in = true
		case in && (l == "" || strings.HasPrefix(l, "[")):
			in = false
		case in && strings.HasPrefix(l, "#"):
			commented = append(commented, strings.TrimSpace(strings.TrimPrefix(l, "#")))
		case in:
			on = append(on, l)
		}
	}
	if len(on) == 0 {
		t.Fatalf("containerd-nri.toml has no %s table in force", header)
	}
	return on, commented
}

// TestValidatorRejectsWhatThePluginNeverAdjusts: the drop-in turns on the
// default validator's rejections of every adjustment nri-cpumanager never
// makes (the e2e suite checks them on a real containerd), and nothing that
// stops containers by default.
func TestValidatorRejectsWhatThePluginNeverAdjusts(t *testing.T) {
	on, _ := validatorTable(t)
	for _, want := range []string{
		"enable = true",
		"reject_oci_hook_adjustment = true",
		"reject_namespace_adjustment = true",
		"reject_sysctl_adjustment = true",
		"reject_runtime_default_seccomp_adjustment = true",
		"reject_unconfined_seccomp_adjustment = true",
		"reject_custom_seccomp_adjustment = true",
	} {
		if !slices.Contains(on, want) {
			t.Errorf("the validator table lacks %q in force:\n%s", want, strings.Join(on, "\n"))
		}
	}
	for _, l := range on {
		if strings.HasPrefix(l, "required_plugins") {
			t.Errorf("%q is in force: failing closed must stay an opt-in", l)
		}
	}
}

// TestFailClosedOptIn checks the commented fail-closed lines of
// deploy/containerd-nri.toml against what deploy/ runs: uncommented, they
// require the name the plugin registers with (pluginName) and name the
// annotation the DaemonSet's pod carries, so that the plugin's own pod is
// created while the plugin is away.
func TestFailClosedOptIn(t *testing.T) {
	_, commented := validatorTable(t)
	p := pluginOf(t, kustomize(t, deployDir))
	for _, want := range []string{
		`required_plugins = ["` + p.cfg.PluginName + `"]`,
		`tolerate_missing_plugins_annotation = "` + tolerateMissing + `"`,
	} {
		if !slices.Contains(commented, want) {
			t.Errorf("the fail-closed opt-in lacks %q:\n%s", want, strings.Join(commented, "\n"))
		}
	}
	if p.ds.Spec.Template.Annotations[tolerateMissing] != "true" {
		t.Errorf("the DaemonSet's pod does not carry %s: \"true\"", tolerateMissing)
	}
}
