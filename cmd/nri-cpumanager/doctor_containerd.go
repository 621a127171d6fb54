package main

import (
	"debug/buildinfo"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// The NRI plugin's table in containerd's configuration (versions 2 and 3).
const nriPluginID = "io.containerd.nri.v1.nri"

// tolerateMissingAnnotation exempts a pod from containerd's NRI default
// validator; the DaemonSet's pod carries it.
const tolerateMissingAnnotation = "tolerate-missing-nri-plugins.noderesource.dev"

// checkContainerd reports containerd's version, whether NRI is on and on
// which socket, whether drop-ins are imported, and the fail-closed
// validator.
func (d *doctorRun) checkContainerd() {
	major, minor := d.checkContainerdVersion()
	conf := d.loadContainerdConfig()
	d.checkNRI(conf, major, minor)
}

// runtimeInfo is a runtime's name and version as NRI's Configure gives
// them.
type runtimeInfo struct{ name, version string }

// checkContainerdVersion reports containerd's version: as NRI's
// Configure named it (the plugin's start-up check, or the plugin's
// metrics), else asked over its CRI socket when reachable, else read from
// its binary's build information. It returns the major and minor
// version, -1 when unknown.
func (d *doctorRun) checkContainerdVersion() (major, minor int) {
	if d.runtime.name != "" {
		status, text, fix, major, minor := runtimeFinding(d.runtime.name, d.runtime.version, d.runtimeFrom())
		d.report(status, "containerd", text, fix)
		return major, minor
	}
	version, source := "", ""
	var tried []string
	socket := d.containerdSocketPath()
	if !d.view.visible(socket) {
		tried = append(tried, fmt.Sprintf("socket %s: not visible here", socket))
	} else if v, err := criVersion(d.view.path(socket)); err == nil {
		version, source = v, "its CRI socket "+socket
	} else {
		tried = append(tried, fmt.Sprintf("socket %s: %v", socket, err))
	}
	if version == "" {
		candidates := []string{"/usr/bin/containerd", "/usr/local/bin/containerd"}
		if d.containerdBinary != "" {
			candidates = []string{d.containerdBinary}
		}
		for _, bin := range candidates {
			if !d.view.visible(bin) {
				tried = append(tried, fmt.Sprintf("binary %s: not visible here", bin))
				continue
			}
			v, err := binaryVersion(d.view.path(bin))
			if err == nil {
				version, source = v, "its binary "+bin
				break
			}
			tried = append(tried, fmt.Sprintf("binary %s: %v", bin, err))
		}
	}
	if version == "" {
		d.report(statusInfo, "containerd", "version unknown: "+strings.Join(tried, "; "),
			"run doctor on the node itself, or in the plugin's pod once the plugin is connected (it reads the runtime from the plugin's metrics); --containerd-socket or --containerd-binary; containerd --version tells it too")
		return -1, -1
	}
	name, v, _ := strings.Cut(version, " ")
	status, text, fix, major, minor := runtimeFinding(name, v, source)
	d.report(status, "containerd", text, fix)
	return major, minor
}

// minimumContainerd is the oldest containerd the plugin runs on (NRI
// with the update ordering it relies on); podResizeContainerd the first
// that relays UpdatePodSandbox (CRI UpdatePodSandboxResources) to NRI
// plugins, which pod-level resize admission needs (docs/install.md,
// "Prerequisites and versions").
const (
	minimumContainerd   = 2
	podResizeContainerd = 3 // 2.3
)

// runtimeFinding judges a runtime's name and version (told by source)
// against what docs/install.md requires: containerd 2.x, 2.3 or later for
// pod-level resize admission. It returns the finding and the major and
// minor version (-1 when unknown).
func runtimeFinding(name, version, source string) (status, text, fix string, major, minor int) {
	text = strings.TrimSpace(name+" "+version) + " (from " + source + ")"
	if name != "containerd" {
		return statusFail, text + ": the plugin is written and tested against containerd's NRI (docs/install.md, \"Platforms\")",
			"run the plugin on containerd 2.3 or later (tested: 2.4.2)", -1, -1
	}
	if isRancherContainerd(version) {
		text += ", k3s's or RKE2's build"
	}
	major, minor = parseVersion(version)
	switch {
	case major < 0:
		return statusWarning, text + ": not a version doctor can read", "", -1, -1
	case major < minimumContainerd:
		return statusFail, text + ": the plugin needs containerd 2.x (NRI, UpdatePodSandbox for pod-level resizes)",
			"upgrade containerd to 2.x (tested: 2.4.2)", major, minor
	case major == minimumContainerd && minor < podResizeContainerd:
		return statusWarning, text + ": UpdatePodSandbox (CRI UpdatePodSandboxResources), which pod-level resize admission needs, comes with containerd 2.3; " +
			"resizes are admitted container by container meanwhile", "upgrade containerd to 2.3 or later (tested: 2.4.2)", major, minor
	}
	return statusOK, text, "", major, minor
}

// runtimeFrom says where doctor learnt the runtime.
func (d *doctorRun) runtimeFrom() string {
	if d.runtimeSource != "" {
		return d.runtimeSource
	}
	return "NRI's Configure"
}

// readPluginRuntime reads the runtime the plugin is connected to from
// the plugin's metrics (runtime_info, ready), when doctor runs beside it
// (kubectl exec into the plugin's pod).
func (d *doctorRun) readPluginRuntime() {
	url := d.pluginMetrics
	if url == "auto" {
		url = ""
		if _, port, err := net.SplitHostPort(d.cfg.MetricsAddress); err == nil && port != "" && port != "0" {
			url = "http://" + net.JoinHostPort("127.0.0.1", port) + "/metrics"
		}
	}
	if url == "" {
		return
	}
	data, err := fetch(url)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "nri_cpumanager_runtime_info{") && strings.HasSuffix(line, "} 1"):
			if n, v := labelValue(line, "name"), labelValue(line, "version"); n != "" {
				d.runtime, d.runtimeSource = runtimeInfo{n, v}, "the plugin's metrics, NRI's Configure"
			}
		case line == "nri_cpumanager_ready 1":
			d.runtimeConnected = true
		}
	}
	if d.runtime.name == "" {
		d.runtimeConnected = false
	}
}

// labelValue returns a label's value in a line of Prometheus's text
// format.
func labelValue(line, label string) string {
	m := regexp.MustCompile(`[{,]` + regexp.QuoteMeta(label) + `="((?:[^"\\]|\\.)*)"`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	v, err := strconv.Unquote(`"` + m[1] + `"`)
	if err != nil {
		return m[1]
	}
	return v
}

// containerdConfigSource returns containerd's configuration file and how
// doctor knows it: --containerd-config, the --config of containerd's
// process, k3s's or RKE2's; why is "" when it is containerd's default
// path assumed, containerd's command line not being visible. path is ""
// when the runtime is k3s's or RKE2's build and doctor does not see their
// files.
func (d *doctorRun) containerdConfigSource() (path, why string) {
	if d.containerdConfig != "" {
		return d.containerdConfig, "--containerd-config"
	}
	if p, ok := d.process("containerd"); ok {
		if c, ok := flagValue(p.args[1:], "config", "c"); ok {
			return c, "the --config of " + p.from
		}
		return defaultContainerdConfig, "containerd's default: " + p.from + " gives no --config"
	}
	if r := d.containerdLayout(); r.name != "" {
		c, _ := d.rancherContainerd(r)
		return c, r.name + "'s"
	}
	if isRancherContainerd(d.runtime.version) {
		return "", ""
	}
	return defaultContainerdConfig, ""
}

// containerdConfigPath is containerd's configuration file as far as
// doctor knows (containerdConfigSource).
func (d *doctorRun) containerdConfigPath() string {
	p, _ := d.containerdConfigSource()
	if p == "" {
		return defaultContainerdConfig
	}
	return p
}

// containerdSocketPath is containerd's CRI socket: --containerd-socket,
// the --address of its process, k3s's or RKE2's, else containerd's
// default.
func (d *doctorRun) containerdSocketPath() string {
	if d.containerdSocket != "" {
		return d.containerdSocket
	}
	if p, ok := d.process("containerd"); ok {
		if a, ok := flagValue(p.args[1:], "address", "a"); ok {
			return a
		}
		return defaultContainerdSocket
	}
	if r := d.distribution(); r.name != "" {
		if ext := d.rancherConfig(r).externalRuntime(); ext != "" {
			return ext
		}
		return rancherSocket
	}
	return defaultContainerdSocket
}

// containerdLayout is the distribution whose own containerd runs the
// pods: k3s's or RKE2's, unless their container-runtime-endpoint names
// another containerd (which reads its own configuration, kubeadm-style).
func (d *doctorRun) containerdLayout() distribution {
	r := d.distribution()
	if r.name != "" && d.rancherConfig(r).externalRuntime() != "" {
		return kubeadmStyle
	}
	return r
}

// containerd's default paths.
const (
	defaultContainerdConfig = "/etc/containerd/config.toml"
	defaultContainerdSocket = "/run/containerd/containerd.sock"
)

// ldflagsVersion finds the version containerd's release build stamps.
var ldflagsVersion = regexp.MustCompile(`containerd(?:/v2)?/version\.Version=([^\s'"]+)`)

// binaryVersion reads containerd's version from its binary's Go build
// information without running it (a host binary may not run in the
// plugin's image): the version the release build stamps with -ldflags,
// else the module version of a build from the module proxy.
func binaryVersion(path string) (string, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, s := range bi.Settings {
		if s.Key == "-ldflags" {
			if m := ldflagsVersion.FindStringSubmatch(s.Value); m != nil {
				return "containerd " + m[1], nil
			}
		}
	}
	if strings.Contains(bi.Main.Path, "containerd") && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return "containerd " + bi.Main.Version, nil
	}
	return "", fmt.Errorf("no version in its build information (module %s %s)", bi.Main.Path, bi.Main.Version)
}

var versionNumber = regexp.MustCompile(`v?(\d+)\.(\d+)`)

// parseVersion returns the major and minor of the first version in s, or
// -1, -1.
func parseVersion(s string) (int, int) {
	m := versionNumber.FindStringSubmatch(s)
	if m == nil {
		return -1, -1
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major, minor
}

// containerdConfig is containerd's configuration as containerd reads it:
// the main file, then each file it imports, later ones winning.
type containerdConfig struct {
	main    string // host path; "" when there is no file
	version int
	// files are the files read, main first, with their contents.
	files []tomlFile
	// assumed: the main file is containerd's default path, containerd's
	// command line not being visible; none says it is absent or empty.
	assumed, none bool
	// unseenImports are imports doctor could not see.
	unseenImports []string
}

type tomlFile struct {
	path string
	doc  map[string]any
}

// lookup returns the value of a key path in the merged configuration and
// the file that set it last.
func (c *containerdConfig) lookup(path ...string) (any, string) {
	var value any
	from := ""
	for _, f := range c.files {
		if v, ok := dig(f.doc, path...); ok {
			value, from = v, f.path
		}
	}
	return value, from
}

// dig follows a key path through nested tables.
func dig(doc map[string]any, path ...string) (any, bool) {
	var cur any = doc
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// loadContainerdConfig reads containerd's main configuration and its
// imports, reporting the imports and any drop-in left out of them; nil
// when doctor cannot see the file containerd reads.
func (d *doctorRun) loadContainerdConfig() *containerdConfig {
	path, why := d.containerdConfigSource()
	mountFix := "run doctor on the node, or mount the file read-only under the host root: the DaemonSet mounts containerd's config.toml and conf.d, each optional, at /host " +
		"(the chart's doctor.enabled, on by default: /etc/containerd's; doctor.distribution: k3s or rke2, or kustomize's components/k3s or components/rke2, for theirs)"
	if path == "" {
		d.report(statusWarning, "containerd", fmt.Sprintf("unknown: containerd %s is k3s's or RKE2's build, whose configuration (/var/lib/rancher/{k3s,rke2}/agent/etc/containerd/config.toml) is not visible here: "+
			"NRI, its socket, the drop-ins and the validator are not checked", d.runtime.version), mountFix)
		return nil
	}
	f := d.readHostFile(path)
	conf := &containerdConfig{main: path, assumed: why == ""}
	switch f.state {
	case fileUnseen:
		d.report(statusWarning, "containerd", fmt.Sprintf("unknown: containerd's configuration %s is not visible here: NRI, its socket, the drop-ins and the validator are not checked", path), mountFix)
		return nil
	case fileError:
		d.report(statusWarning, "containerd", fmt.Sprintf("unknown: cannot read %s: %v", path, f.err), mountFix)
		return nil
	case fileAbsent, fileEmpty:
		conf.none = true
		text := fmt.Sprintf("no %s (or it is empty): containerd runs with its defaults (NRI on in 2.x, nothing imported)", path)
		if f.state == fileEmpty {
			text = fmt.Sprintf("%s is empty (where the host has none, the DaemonSet's mount creates it empty): containerd runs with its defaults (NRI on in 2.x, nothing imported)", path)
		}
		if conf.assumed {
			text += ", if it reads that file (its command line is not visible here; k3s's and RKE2's read theirs)"
		}
		d.report(statusInfo, "containerd", text, "")
		d.checkDropIns(conf, nil)
		return conf
	}
	var doc map[string]any
	if err := toml.Unmarshal(f.data, &doc); err != nil {
		d.report(statusFail, "containerd", fmt.Sprintf("%s is not valid TOML: %v", path, err), "containerd does not start with it either: correct the file")
		return nil
	}
	conf.files = append(conf.files, tomlFile{path, doc})
	if v, ok := doc["version"].(int64); ok {
		conf.version = int(v)
	}
	var imported []string
	imports, _ := doc["imports"].([]any)
	for _, imp := range imports {
		pattern, _ := imp.(string)
		if pattern == "" {
			continue
		}
		if !filepath.IsAbs(pattern) {
			pattern = filepath.Join(filepath.Dir(path), pattern)
		}
		if !d.view.visible(filepath.Dir(pattern)) {
			conf.unseenImports = append(conf.unseenImports, pattern)
			d.report(statusWarning, "containerd", fmt.Sprintf("unknown: %s imports %s, not visible here: what it sets is not checked", path, pattern), mountFix)
			continue
		}
		matches, err := filepath.Glob(d.view.path(pattern))
		if err != nil {
			d.report(statusWarning, "containerd", fmt.Sprintf("import %q: %v", pattern, err), "")
			continue
		}
		slices.Sort(matches)
		for _, m := range matches {
			hostPath := m
			if root := filepath.Clean(d.view.root); root != "/" && root != "." {
				hostPath = "/" + strings.TrimPrefix(strings.TrimPrefix(m, root), "/")
			}
			data, err := os.ReadFile(m)
			if err != nil {
				d.report(statusWarning, "containerd", fmt.Sprintf("imported %s: %v", hostPath, err), "")
				continue
			}
			var idoc map[string]any
			if err := toml.Unmarshal(data, &idoc); err != nil {
				d.report(statusFail, "containerd", fmt.Sprintf("imported %s is not valid TOML: %v", hostPath, err), "correct the file")
				continue
			}
			imported = append(imported, hostPath)
			conf.files = append(conf.files, tomlFile{hostPath, idoc})
		}
	}
	whose := ""
	if why != "" && why != "--containerd-config" {
		whose = why + "; "
	} else if conf.assumed {
		whose = "containerd's default path, its command line not visible here; "
	}
	if len(imported) > 0 {
		d.report(statusInfo, "containerd", fmt.Sprintf("%s (%sversion %d) imports %s", path, whose, conf.version, strings.Join(imported, ", ")), "")
	} else if len(conf.unseenImports) == 0 {
		d.report(statusInfo, "containerd", fmt.Sprintf("%s (%sversion %d) imports nothing", path, whose, conf.version), "")
	}
	if r := d.containerdLayout(); r.name != "" {
		if _, templates := d.rancherContainerd(r); len(templates) > 0 {
			d.report(statusInfo, "containerd", fmt.Sprintf("%s writes %s from %s at every start: change that, not the file", r.name, path, strings.Join(templates, ", ")), "")
		}
	}
	d.checkDropIns(conf, imported)
	d.noteCgroupDriver(conf)
	return conf
}

// checkDropIns reports drop-ins in conf.d next to the main configuration
// that containerd does not import: what they say does not count, the
// fail-closed block included.
func (d *doctorRun) checkDropIns(conf *containerdConfig, imported []string) {
	dir := filepath.Join(filepath.Dir(conf.main), "conf.d")
	if d.dirState(dir) != fileRead {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(d.view.path(dir), "*.toml"))
	for _, m := range matches {
		hostPath := filepath.Join(dir, filepath.Base(m))
		if slices.Contains(imported, hostPath) {
			continue
		}
		status, what := statusWarning, "does not count"
		if data, err := os.ReadFile(m); err == nil && strings.Contains(string(data), nriPluginID) {
			status, what = statusFail, "configures NRI but does not count: its settings (the fail-closed validator included) are ignored"
		}
		fix := fmt.Sprintf("add imports = [%q] at the top of %s (before any table) and restart containerd", filepath.Join(dir, "*.toml"), conf.main)
		if conf.none {
			fix = fmt.Sprintf("create %s with version = 3 and imports = [%q], and restart containerd", conf.main, filepath.Join(dir, "*.toml"))
		}
		d.report(status, "containerd", fmt.Sprintf("drop-in %s is not imported by %s: it %s", hostPath, conf.main, what), fix)
	}
}

// noteCgroupDriver records runc's SystemdCgroup for the cgroup check.
func (d *doctorRun) noteCgroupDriver(conf *containerdConfig) {
	paths := [][]string{
		{"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "runc", "options", "SystemdCgroup"},
		{"plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "runc", "options", "SystemdCgroup"},
	}
	for _, p := range paths {
		if v, _ := conf.lookup(p...); v != nil {
			if b, ok := v.(bool); ok {
				d.containerdSystemd = &b
				return
			}
		}
	}
}

// checkNRI reports whether NRI is on, the socket containerd listens on
// against the one the plugin dials, and the fail-closed validator. NRI
// is on for sure when the runtime configured the plugin over NRI; from
// the files, only when the file that decides it was read.
func (d *doctorRun) checkNRI(conf *containerdConfig, major, minor int) {
	nriFix := "install deploy/containerd-nri.toml as a drop-in that config.toml imports (docs/install.md), or set disable = false in its NRI table; restart containerd"
	if r := d.containerdLayout(); r.name != "" {
		nriFix = fmt.Sprintf("put the NRI table with disable = false in %s's containerd template (config-v3.toml.tmpl next to its config.toml; docs/install.md, \"Platforms\"); restart %s", r.name, r.name)
	}
	if d.runtime.name != "" && d.runtimeConnected {
		d.report(statusOK, "NRI", fmt.Sprintf("enabled: %s %s configured the plugin over NRI", d.runtime.name, d.runtime.version), "")
	}
	disabled, disabledFrom := false, ""
	socket, socketFrom := "/var/run/nri/nri.sock", "the default"
	var validator map[string]any
	validatorFrom := ""
	if conf != nil {
		if v, from := conf.lookup("plugins", nriPluginID, "disable"); v != nil {
			disabled, _ = v.(bool)
			disabledFrom = from
		} else if major == 1 && !(d.runtime.name != "" && d.runtimeConnected) {
			disabled, disabledFrom = true, "containerd 1.x's default"
		}
		if v, from := conf.lookup("plugins", nriPluginID, "socket_path"); v != nil {
			if s, ok := v.(string); ok && s != "" {
				socket, socketFrom = s, from
			}
		}
		validator, validatorFrom = d.mergedValidator(conf)
	}
	proven := d.runtime.name != "" && d.runtimeConnected
	unseenImports := conf != nil && len(conf.unseenImports) > 0
	switch {
	case disabled && proven:
		d.report(statusFail, "NRI", fmt.Sprintf("disabled (disable = true, from %s): containerd runs with NRI now, not after its next start", disabledFrom), nriFix)
	case disabled:
		d.report(statusFail, "NRI", fmt.Sprintf("disabled (disable = true, from %s)", disabledFrom), nriFix)
	case proven:
	case conf == nil:
		d.report(statusWarning, "NRI", "unknown: whether NRI is enabled: the containerd configuration that decides it is not visible here", "see the containerd finding above")
	case unseenImports:
		d.report(statusWarning, "NRI", "unknown: whether NRI is enabled: an import of containerd's configuration is not visible here", "see the containerd finding above")
	case disabledFrom != "":
		d.report(statusOK, "NRI", fmt.Sprintf("enabled (disable = false, from %s); socket %s (%s)", disabledFrom, socket, socketFrom), "")
	case conf.assumed && conf.none:
		d.report(statusWarning, "NRI", fmt.Sprintf("unknown: no file sets it, and doctor cannot tell whether containerd reads %s (its command line is not visible here; k3s's and RKE2's read theirs)", conf.main),
			"run doctor on the node, or in the plugin's pod once the plugin is connected (the runtime's name tells)")
	case major < 0:
		d.report(statusWarning, "NRI", "unknown: no file sets it, and its default depends on containerd's version (on in 2.x, off in 1.7), which doctor does not know",
			"run doctor on the node, or give --containerd-socket or --containerd-binary")
	default:
		d.report(statusOK, "NRI", fmt.Sprintf("enabled (containerd %d.x's default: no file sets it); socket %s (%s)", major, socket, socketFrom), "")
	}
	socketKnown := socketFrom != "the default" || !(conf != nil && conf.assumed && conf.none)
	switch {
	case conf == nil || unseenImports || !socketKnown || socket == d.cfg.NRISocket:
	case d.runtimeConnected:
		// The plugin is connected: its socket is containerd's, mounted
		// where the pod has it.
		d.report(statusInfo, "NRI", fmt.Sprintf("containerd listens on %s, which the plugin, connected, reaches as %s (nriSocket; its pod's mount of the host's directory)", socket, d.cfg.NRISocket), "")
	default:
		d.report(statusFail, "NRI", fmt.Sprintf("containerd listens on %s, the plugin dials %s (nriSocket)", socket, d.cfg.NRISocket),
			"set nriSocket to "+socket+" in the plugin's configuration (the chart mounts its directory)")
	}
	if fi, err := os.Stat(d.cfg.NRISocket); err != nil {
		d.report(statusFail, "NRI", fmt.Sprintf("the plugin's socket %s: %v", d.cfg.NRISocket, err),
			"enable NRI and restart containerd; inside the plugin's pod the socket's directory is mounted from the host")
	} else if fi.Mode()&os.ModeSocket == 0 {
		d.report(statusFail, "NRI", fmt.Sprintf("%s exists but is not a socket", d.cfg.NRISocket), "remove it and restart containerd")
	} else {
		d.report(statusOK, "NRI", fmt.Sprintf("socket %s exists", d.cfg.NRISocket), "")
	}
	if conf == nil || unseenImports {
		return // the validator's tables are in files doctor does not see
	}
	d.checkRejections(validator, validatorFrom, major, minor)
	d.checkValidator(validator, validatorFrom)
}

// validatorRejections are NRI's default validator keys that reject what
// nri-cpumanager never adjusts; deploy/containerd-nri.toml turns them on.
var validatorRejections = []string{
	"reject_oci_hook_adjustment", "reject_namespace_adjustment", "reject_sysctl_adjustment",
	"reject_runtime_default_seccomp_adjustment", "reject_unconfined_seccomp_adjustment", "reject_custom_seccomp_adjustment",
}

// checkRejections reports whether containerd's default validator refuses
// the adjustments nri-cpumanager never makes (OCI hooks, namespaces,
// sysctls, seccomp), whoever makes them.
func (d *doctorRun) checkRejections(v map[string]any, from string, major, minor int) {
	enabled, _ := v["enable"].(bool)
	if enabled && major == 2 && minor < 4 {
		d.report(statusWarning, "validator", fmt.Sprintf("default_validator is set (%s), but containerd before 2.4 has no NRI default validator", from), "upgrade containerd to 2.4 or later, or remove the table")
		return
	}
	var off []string
	for _, key := range validatorRejections {
		if on, _ := v[key].(bool); !enabled || !on {
			off = append(off, key)
		}
	}
	if len(off) > 0 {
		d.report(statusWarning, "validator", fmt.Sprintf("containerd does not refuse %s: any plugin on its NRI socket may make these adjustments, which nri-cpumanager never makes", strings.Join(off, ", ")),
			"set them to true in the default_validator table with enable = true (deploy/containerd-nri.toml; docs/install.md, \"The validator's rejections\")")
		return
	}
	d.report(statusOK, "validator", fmt.Sprintf("containerd refuses OCI hook, namespace, sysctl and seccomp adjustments by any plugin (%s)", from), "")
}

// mergedValidator returns NRI's default_validator table as containerd
// reads it, and the files it comes from.
func (d *doctorRun) mergedValidator(conf *containerdConfig) (map[string]any, string) {
	out := map[string]any{}
	var from []string
	for _, f := range conf.files {
		v, ok := dig(f.doc, "plugins", nriPluginID, "default_validator")
		m, isMap := v.(map[string]any)
		if !ok || !isMap {
			continue
		}
		for k, val := range m {
			out[k] = val
		}
		from = append(from, f.path)
	}
	if len(from) == 0 {
		return nil, ""
	}
	return out, strings.Join(from, ", ")
}

// checkValidator reports whether containerd fails closed for the plugin.
func (d *doctorRun) checkValidator(v map[string]any, from string) {
	enabled, _ := v["enable"].(bool)
	if !enabled {
		d.report(statusInfo, "fail-closed", "off: containers created while the plugin is away run on every CPU (docs/operations.md, \"Failing closed\")", "")
		return
	}
	var required []string
	if list, ok := v["required_plugins"].([]any); ok {
		for _, r := range list {
			if s, ok := r.(string); ok {
				required = append(required, s)
			}
		}
	}
	if !slices.Contains(required, d.cfg.PluginName) {
		// The shipped drop-in's default: the validator's rejections on,
		// failing closed an opt-in.
		d.report(statusInfo, "fail-closed", fmt.Sprintf("off: the default validator is on (%s) but required_plugins %q does not name the plugin (%s): containers created while it is away run on every CPU (docs/operations.md, \"Failing closed\")",
			from, required, d.cfg.PluginName), fmt.Sprintf("to fail closed: required_plugins = [%q]", d.cfg.PluginName))
		return
	}
	annotation, _ := v["tolerate_missing_plugins_annotation"].(string)
	if annotation != tolerateMissingAnnotation {
		d.report(statusFail, "fail-closed", fmt.Sprintf("containerd requires %s (%s) but tolerate_missing_plugins_annotation is %q: the plugin's own pod, annotated %s, cannot start while the plugin is away",
			d.cfg.PluginName, from, annotation, tolerateMissingAnnotation),
			fmt.Sprintf("tolerate_missing_plugins_annotation = %q", tolerateMissingAnnotation))
		return
	}
	d.report(statusOK, "fail-closed", fmt.Sprintf("on: containerd refuses new containers while %s is away (%s); pods annotated %s are exempt", d.cfg.PluginName, from, tolerateMissingAnnotation), "")
}
