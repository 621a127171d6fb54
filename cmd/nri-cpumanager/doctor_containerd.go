package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// checkContainerdVersion reports containerd's version: asked over its CRI
// socket when reachable, else read from its binary's build information.
// It returns the major and minor version, -1 when unknown.
func (d *doctorRun) checkContainerdVersion() (major, minor int) {
	version, source := "", ""
	var tried []string
	if v, err := criVersion(d.host(d.containerdSocket)); err == nil {
		version, source = v, "its CRI socket "+d.containerdSocket
	} else {
		tried = append(tried, fmt.Sprintf("socket %s: %v", d.containerdSocket, err))
	}
	if version == "" {
		candidates := []string{"/usr/bin/containerd", "/usr/local/bin/containerd"}
		if d.containerdBinary != "" {
			candidates = []string{d.containerdBinary}
		}
		for _, bin := range candidates {
			v, err := binaryVersion(d.host(bin))
			if err == nil {
				version, source = v, "its binary "+bin
				break
			}
			tried = append(tried, fmt.Sprintf("binary %s: %v", bin, err))
		}
	}
	if version == "" {
		d.report(statusInfo, "containerd", "version unknown: "+strings.Join(tried, "; "),
			"run doctor on the node itself, or give --host-root, --containerd-socket or --containerd-binary; containerd --version tells it too")
		return -1, -1
	}
	major, minor = parseVersion(version)
	text := fmt.Sprintf("%s (from %s)", version, source)
	switch {
	case major < 0:
		d.report(statusWarning, "containerd", text+": not a version this doctor can read", "")
	case major < 2:
		d.report(statusFail, "containerd", text+": the plugin needs containerd 2.x (NRI, UpdatePodSandbox for pod-level resizes)",
			"upgrade containerd to 2.x (tested: 2.4.2)")
	case major == 2 && minor < 3:
		d.report(statusWarning, "containerd", text+": UpdatePodSandbox (CRI UpdatePodSandboxResources), which pod-level resize admission needs, comes with containerd 2.3; "+
			"resizes are admitted container by container meanwhile", "upgrade containerd to 2.3 or later (tested: 2.4.2)")
	default:
		d.report(statusOK, "containerd", text, "")
	}
	return major, minor
}

// criVersion asks the CRI runtime on socket for its name and version.
func criVersion(socket string) (string, error) {
	fi, err := os.Stat(socket)
	if err != nil {
		return "", err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return "", fmt.Errorf("not a socket")
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), doctorTimeout)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", err
	}
	return resp.GetRuntimeName() + " " + resp.GetRuntimeVersion(), nil
}

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
// imports, reporting the imports and any drop-in left out of them.
func (d *doctorRun) loadContainerdConfig() *containerdConfig {
	conf := &containerdConfig{}
	data, err := d.readHost(d.containerdConfig)
	if dir := filepath.Dir(d.containerdConfig); os.IsNotExist(err) && !dirExists(d.host(dir)) {
		// Not even its directory: not the host's files (the plugin's pod
		// without the doctor's mount), or no containerd here.
		d.report(statusWarning, "containerd", fmt.Sprintf("%s is not visible under host root %s: containerd's configuration and drop-ins are not checked", dir, d.hostRoot),
			"run doctor on the node, or in the plugin's pod with --host-root /host and the host's /etc/containerd mounted (the chart's doctor.enabled, deploy/components/doctor)")
		return nil
	}
	if os.IsNotExist(err) {
		d.report(statusInfo, "containerd", fmt.Sprintf("no %s: containerd runs with its defaults (NRI on in 2.x, nothing imported)", d.containerdConfig), "")
		d.checkDropIns(conf, nil)
		return conf
	}
	if err != nil {
		d.report(statusWarning, "containerd", fmt.Sprintf("cannot read %s: %v", d.containerdConfig, err),
			"run doctor on the node, or mount the host's /etc/containerd at <host root>/etc/containerd (the chart's doctor.enabled)")
		return nil
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		d.report(statusFail, "containerd", fmt.Sprintf("%s is not valid TOML: %v", d.containerdConfig, err), "containerd does not start with it either: correct the file")
		return nil
	}
	conf.main = d.containerdConfig
	conf.files = append(conf.files, tomlFile{d.containerdConfig, doc})
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
			pattern = filepath.Join(filepath.Dir(d.containerdConfig), pattern)
		}
		matches, err := filepath.Glob(d.host(pattern))
		if err != nil {
			d.report(statusWarning, "containerd", fmt.Sprintf("import %q: %v", pattern, err), "")
			continue
		}
		slices.Sort(matches)
		for _, m := range matches {
			hostPath := m
			if d.hostRoot != "/" && d.hostRoot != "" {
				hostPath = "/" + strings.TrimPrefix(strings.TrimPrefix(m, filepath.Clean(d.hostRoot)), "/")
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
	if len(imported) > 0 {
		d.report(statusInfo, "containerd", fmt.Sprintf("%s (version %d) imports %s", d.containerdConfig, conf.version, strings.Join(imported, ", ")), "")
	} else {
		d.report(statusInfo, "containerd", fmt.Sprintf("%s (version %d) imports nothing", d.containerdConfig, conf.version), "")
	}
	d.checkDropIns(conf, imported)
	d.noteCgroupDriver(conf)
	return conf
}

// checkDropIns reports drop-ins in conf.d next to the main configuration
// that containerd does not import: what they say does not count, the
// fail-closed block included.
func (d *doctorRun) checkDropIns(conf *containerdConfig, imported []string) {
	dir := filepath.Join(filepath.Dir(d.containerdConfig), "conf.d")
	matches, _ := filepath.Glob(filepath.Join(d.host(dir), "*.toml"))
	for _, m := range matches {
		hostPath := filepath.Join(dir, filepath.Base(m))
		if slices.Contains(imported, hostPath) {
			continue
		}
		status, what := statusWarning, "does not count"
		if data, err := os.ReadFile(m); err == nil && strings.Contains(string(data), nriPluginID) {
			status, what = statusFail, "configures NRI but does not count: its settings (the fail-closed validator included) are ignored"
		}
		fix := fmt.Sprintf("add imports = [%q] at the top of %s (before any table) and restart containerd", filepath.Join(dir, "*.toml"), d.containerdConfig)
		if conf.main == "" {
			fix = fmt.Sprintf("create %s with version = 3 and imports = [%q], and restart containerd", d.containerdConfig, filepath.Join(dir, "*.toml"))
		}
		d.report(status, "containerd", fmt.Sprintf("drop-in %s is not imported by %s: it %s", hostPath, d.containerdConfig, what), fix)
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
// against the one the plugin dials, and the fail-closed validator.
func (d *doctorRun) checkNRI(conf *containerdConfig, major, minor int) {
	disabled, disabledFrom := false, ""
	socket, socketFrom := "/var/run/nri/nri.sock", "the default"
	var validator map[string]any
	validatorFrom := ""
	if conf != nil {
		if v, from := conf.lookup("plugins", nriPluginID, "disable"); v != nil {
			disabled, _ = v.(bool)
			disabledFrom = from
		} else if major == 1 {
			disabled, disabledFrom = true, "containerd 1.x's default"
		}
		if v, from := conf.lookup("plugins", nriPluginID, "socket_path"); v != nil {
			if s, ok := v.(string); ok && s != "" {
				socket, socketFrom = s, from
			}
		}
		validator, validatorFrom = d.mergedValidator(conf)
	}
	switch {
	case disabled:
		d.report(statusFail, "NRI", fmt.Sprintf("disabled (disable = true, from %s)", disabledFrom),
			"install deploy/containerd-nri.toml as a drop-in that config.toml imports (docs/install.md), or set disable = false in its NRI table; restart containerd")
	case disabledFrom != "":
		d.report(statusOK, "NRI", fmt.Sprintf("enabled (disable = false, from %s); socket %s (%s)", disabledFrom, socket, socketFrom), "")
	default:
		d.report(statusOK, "NRI", fmt.Sprintf("enabled (containerd 2.x's default: no file sets it); socket %s (%s)", socket, socketFrom), "")
	}
	if conf != nil && socket != d.cfg.NRISocket {
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
	if conf != nil {
		d.checkRejections(validator, validatorFrom, major, minor)
	}
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
		d.report(statusWarning, "fail-closed", fmt.Sprintf("the default validator is on (%s) but required_plugins %q does not name the plugin (%s)", from, required, d.cfg.PluginName),
			fmt.Sprintf("required_plugins = [%q]", d.cfg.PluginName))
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
