package harness

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// maxSocketPath is the longest unix socket path Linux accepts (sun_path is
// 108 bytes including the terminating NUL).
const maxSocketPath = 107

// containerdLayout names the files and directories of one throwaway
// containerd, all inside dir.
type containerdLayout struct {
	dir string
}

func (l containerdLayout) config() string           { return filepath.Join(l.dir, "config.toml") }
func (l containerdLayout) log() string              { return filepath.Join(l.dir, "containerd.log") }
func (l containerdLayout) root() string             { return filepath.Join(l.dir, "root") }
func (l containerdLayout) state() string            { return filepath.Join(l.dir, "state") }
func (l containerdLayout) address() string          { return filepath.Join(l.dir, "containerd.sock") }
func (l containerdLayout) nriSocketDir() string     { return filepath.Join(l.dir, "nri") }
func (l containerdLayout) nriSocket() string        { return filepath.Join(l.nriSocketDir(), "nri.sock") }
func (l containerdLayout) nriPluginDir() string     { return filepath.Join(l.dir, "nri-plugins") }
func (l containerdLayout) nriPluginConfDir() string { return filepath.Join(l.dir, "nri-conf.d") }
func (l containerdLayout) runcRoot() string         { return filepath.Join(l.dir, "runc") }
func (l containerdLayout) opt() string              { return filepath.Join(l.dir, "opt") }

// checkSocketPaths fails when a socket of the layout would not fit in a
// unix socket address.
func (l containerdLayout) checkSocketPaths() error {
	// containerd also listens on <address>.ttrpc.
	for _, p := range []string{l.address() + ".ttrpc", l.nriSocket()} {
		if len(p) > maxSocketPath {
			return fmt.Errorf("socket path %s is %d bytes, longer than the %d a unix socket allows: use a shorter temporary directory", p, len(p), maxSocketPath)
		}
	}
	return nil
}

// containerdSettings are the tunables of the generated configuration.
type containerdSettings struct {
	logLevel                     string
	nriPluginRequestTimeout      time.Duration
	nriPluginRegistrationTimeout time.Duration
	nriValidator                 *NRIValidator
	systemdCgroup                bool
}

// NRIValidator configures containerd's built-in NRI default validator
// (containerd 2.4, NRI v0.12): to fail container creation while a
// required plugin is not registered, and to reject adjustments.
type NRIValidator struct {
	// Reject are the validator's rejection keys to turn on
	// ("reject_oci_hook_adjustment", ...).
	Reject []string
	// RequiredPlugins are plugin names ("cpumanager") or index-names
	// ("90-cpumanager") that must be registered for a container to be
	// created.
	RequiredPlugins []string
	// TolerateMissingAnnotation is the pod annotation key that, set to
	// "true", exempts a pod from the requirement.
	TolerateMissingAnnotation string
}

// render returns the containerd configuration (version 3): NRI enabled with
// its socket and plugin directories inside the layout, the native
// snapshotter, the harness's pause image pinned as the sandbox image,
// restrict_oom_score_adj (this kind of VM refuses negative OOM score
// adjustments, which fails every sandbox otherwise), and runc's state kept
// inside the layout too so that leftovers can be found and removed; runc
// with the systemd cgroup driver when asked.
func (l containerdLayout) render(s containerdSettings) string {
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "version = 3\nroot = %s\nstate = %s\n\n", q(l.root()), q(l.state()))
	fmt.Fprintf(&b, "[grpc]\n  address = %s\n\n", q(l.address()))
	if s.logLevel != "" {
		fmt.Fprintf(&b, "[debug]\n  level = %s\n\n", q(s.logLevel))
	}
	fmt.Fprintf(&b, "[plugins.'io.containerd.internal.v1.opt']\n  path = %s\n\n", q(l.opt()))
	fmt.Fprintf(&b, "[plugins.'io.containerd.nri.v1.nri']\n  disable = false\n  socket_path = %s\n  plugin_path = %s\n  plugin_config_path = %s\n",
		q(l.nriSocket()), q(l.nriPluginDir()), q(l.nriPluginConfDir()))
	if s.nriPluginRegistrationTimeout > 0 {
		fmt.Fprintf(&b, "  plugin_registration_timeout = %s\n", q(s.nriPluginRegistrationTimeout.String()))
	}
	if s.nriPluginRequestTimeout > 0 {
		fmt.Fprintf(&b, "  plugin_request_timeout = %s\n", q(s.nriPluginRequestTimeout.String()))
	}
	if v := s.nriValidator; v != nil {
		required := make([]string, len(v.RequiredPlugins))
		for i, name := range v.RequiredPlugins {
			required[i] = q(name)
		}
		fmt.Fprintf(&b, "[plugins.'io.containerd.nri.v1.nri'.default_validator]\n  enable = true\n")
		for _, key := range v.Reject {
			fmt.Fprintf(&b, "  %s = true\n", key)
		}
		if len(required) > 0 {
			fmt.Fprintf(&b, "  required_plugins = [%s]\n", strings.Join(required, ", "))
		}
		if v.TolerateMissingAnnotation != "" {
			fmt.Fprintf(&b, "  tolerate_missing_plugins_annotation = %s\n", q(v.TolerateMissingAnnotation))
		}
	}
	fmt.Fprintf(&b, "\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = \"native\"\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = %s\n\n", q(PauseImage))
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = true\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n  sandboxer = \"podsandbox\"\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  Root = %s\n", q(l.runcRoot()))
	if s.systemdCgroup {
		fmt.Fprintf(&b, "  SystemdCgroup = true\n")
	}
	return b.String()
}
