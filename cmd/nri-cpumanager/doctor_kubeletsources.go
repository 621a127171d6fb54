package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// kubeletView is the kubelet's configuration as doctor could put it
// together, the way the kubelet does: its --config file, then each
// drop-in of its --config-dir (*.conf, in lexical order, subdirectories
// included, each a KubeletConfiguration merged over the result as a JSON
// merge patch: maps merge key by key, lists and scalars replace), then
// its command-line flags. Or the kubelet's own account of it, /configz.
type kubeletView struct {
	config *kubeletConfig
	// policyFrom is the source that set cpuManagerPolicy last; "" when
	// none did (the kubelet's default, none).
	policyFrom string
	// read are the sources read, in the kubelet's order.
	read []string
	// unseen are the sources that count and could not be read, each
	// with why.
	unseen []string
	// problems are what the kubelet would not start with.
	problems []string
	// complete: the kubelet's command line is known and every source it
	// names was read, or the configuration is the kubelet's /configz.
	complete bool
}

// kubeletConfigCandidates are where kubelets' configuration files usually
// are, looked at when the kubelet's command line is not known: kubeadm's,
// then other distributions' (EKS, GKE, AKS).
var kubeletConfigCandidates = []string{
	"/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet-config.yaml", "/etc/kubernetes/kubelet/config.yaml",
	"/etc/kubernetes/kubelet/config.json", "/home/kubernetes/kubelet-config.yaml", "/etc/default/kubeletconfig.json",
}

// kubeletDropInCandidates are the drop-in directories looked at when the
// kubelet's command line is not known: the one Kubernetes' documentation
// uses, and EKS's.
var kubeletDropInCandidates = []string{"/etc/kubernetes/kubelet.conf.d", "/etc/kubernetes/kubelet/config.json.d"}

// loadKubelet puts the kubelet's configuration together from what the
// run can see.
func (d *doctorRun) loadKubelet() *kubeletView {
	v := &kubeletView{}
	var main []byte
	mainFrom := ""
	switch path := d.kubeletConfig; {
	case path == "-" || strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://"):
		var data []byte
		var err error
		source := path
		if path == "-" {
			data, err = io.ReadAll(stdin)
			source = "standard input"
		} else {
			data, err = fetch(path)
		}
		if err != nil {
			if path == "-" {
				err = fmt.Errorf("%s: %w", source, err)
			}
			v.unseen = append(v.unseen, err.Error())
			return v
		}
		if kc, ok := parseConfigz(data); ok {
			v.config, v.read, v.complete, v.policyFrom = kc, []string{source + " (the kubelet's /configz: its configuration as it runs)"}, true, source
			return v
		}
		main, mainFrom = data, source
	}
	args, argsFrom, argsKnown, why := d.kubeletArgs(v)

	// The configuration file.
	if mainFrom == "" {
		path, named := d.kubeletConfig, d.kubeletConfig != ""
		fromArgs := false
		if !named {
			path, named = flagValue(args, "config")
			fromArgs = named
		}
		switch {
		case named:
			f := d.readHostFile(path)
			switch f.state {
			case fileUnseen:
				v.unseen = append(v.unseen, path+" (not visible here)")
			case fileAbsent, fileEmpty:
				what := "does not exist"
				if f.state == fileEmpty {
					what = "is empty"
				}
				if fromArgs {
					v.problems = append(v.problems, fmt.Sprintf("the kubelet's --config %s %s: the kubelet does not start with it (%s)", path, what, argsFrom))
				} else {
					v.unseen = append(v.unseen, fmt.Sprintf("%s %s", path, what))
				}
			case fileError:
				v.unseen = append(v.unseen, fmt.Sprintf("%s: %v", path, f.err))
			default:
				if kubeletArgs, ok := rancherKubeletArgList(f.data); ok && !fromArgs {
					// k3s's or RKE2's configuration file given for the
					// kubelet's: its kubelet-arg are the kubelet's flags.
					args = append(args, kubeletArgs...)
					argsFrom = path
					v.read = append(v.read, path)
					break
				}
				main, mainFrom = f.data, path
			}
		case !argsKnown && d.distribution().name == "":
			// k3s and RKE2 give the kubelet a --config only through
			// kubelet-arg, read above: the usual paths are not theirs.
			main, mainFrom = d.usualKubeletConfig(v)
		}
	}
	base := map[string]any{}
	if main != nil {
		doc, err := kubeletConfigJSON(main)
		switch {
		case err != nil:
			v.problems = append(v.problems, fmt.Sprintf("%s: %v", mainFrom, err))
		default:
			base = doc
			v.read = append(v.read, mainFrom)
			if _, ok := doc["cpuManagerPolicy"]; ok {
				v.policyFrom = mainFrom
			}
		}
	}

	// The drop-in directory.
	dir, dirNamed := d.kubeletConfigDir, d.kubeletConfigDir != ""
	dirFromArgs := false
	if !dirNamed {
		dir, dirNamed = flagValue(args, "config-dir")
		dirFromArgs = dirNamed
	}
	if !dirNamed && !argsKnown {
		dir = d.usualKubeletDropIns(v)
	}
	if dir != "" {
		switch d.dirState(dir) {
		case fileUnseen:
			v.unseen = append(v.unseen, "drop-ins of "+dir+" (not visible here)")
		case fileAbsent:
			if dirFromArgs {
				v.problems = append(v.problems, fmt.Sprintf("the kubelet's --config-dir %s does not exist: the kubelet does not start with it (%s)", dir, argsFrom))
			} else if dirNamed {
				v.unseen = append(v.unseen, dir+" does not exist")
			}
		default:
			base = d.mergeKubeletDropIns(v, dir, base)
		}
	}

	kc := &kubeletConfig{}
	if data, err := json.Marshal(base); err == nil {
		_ = json.Unmarshal(data, kc) // the fields doctor reads; a mistyped one stays empty
	}
	// The flags win over the files, as the kubelet re-applies them.
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		set, known := kubeletFlags[name]
		if !known {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				continue
			}
			value = args[i+1]
			i++
		}
		set(kc, value)
		v.read = append(v.read, fmt.Sprintf("flag %s=%s (%s)", name, value, argsFrom))
		if name == "--cpu-manager-policy" {
			v.policyFrom = "flag " + name + " (" + argsFrom + ")"
		}
	}
	if len(v.read) > 0 || argsKnown {
		v.config = kc
	}
	if !argsKnown {
		v.unseen = append(v.unseen, "the kubelet's command line ("+why+")")
	}
	v.complete = argsKnown && len(v.unseen) == 0 && len(v.problems) == 0
	return v
}

// kubeletArgs finds the kubelet's command-line arguments: its process's
// (on the node itself), the ones k3s and RKE2 make from their
// configuration, or the ones systemd gives it (kubeadm's unit and its
// environment files). known says whether they are all of them; why says
// what is missing when not.
func (d *doctorRun) kubeletArgs(v *kubeletView) (args []string, from string, known bool, why string) {
	if p, ok := d.process("kubelet"); ok {
		return p.args[1:], p.from, true, ""
	}
	if r := d.distribution(); r.name != "" {
		rc := d.rancherConfig(r)
		v.read = append(v.read, rc.read...)
		v.unseen = append(v.unseen, rc.unseen...)
		v.problems = append(v.problems, rc.problems...)
		var cmdline []string
		from = r.name + "'s kubelet-arg"
		p, running := hostProcess{}, false
		for _, name := range []string{"k3s", "rke2"} {
			if p, running = d.process(name); running {
				break
			}
		}
		if running {
			cmdline = p.args[1:]
			from += ", " + p.from
		}
		why = "no " + r.name + " process visible here: its own command-line flags are not seen"
		return rancherKubeletArgs(rc, r, cmdline), from, running && len(rc.unseen) == 0, why
	}
	if args, from, known, ok := d.systemdKubeletArgs(); ok {
		return args, from, known, "an environment file of its systemd unit is not visible here"
	}
	return nil, "", false, "no kubelet process nor its systemd unit visible here"
}

// usualKubeletConfig reads the first of the usual configuration files
// that is there, for a kubelet whose command line is not known; in the
// plugin's pod, a file mounted under the host root that is nothing else
// doctor knows is taken as the kubelet's (the chart's
// doctor.kubeletConfig, mounted where it is on the host).
func (d *doctorRun) usualKubeletConfig(v *kubeletView) ([]byte, string) {
	candidates := slices.Clone(kubeletConfigCandidates)
	for _, m := range d.view.mounts {
		if fi, err := os.Stat(d.view.path(m)); err == nil && fi.Mode().IsRegular() && !d.knownSource(m) && !slices.Contains(candidates, m) {
			candidates = append(candidates, m)
		}
	}
	var unseen, empty []string
	for _, c := range candidates {
		f := d.readHostFile(c)
		switch f.state {
		case fileRead:
			return f.data, c
		case fileUnseen:
			unseen = append(unseen, c)
		case fileEmpty:
			empty = append(empty, c)
		}
	}
	what := "the kubelet's configuration file"
	if len(empty) > 0 {
		what += ": " + strings.Join(empty, ", ") + " empty (where the host has no file, the DaemonSet's mount creates it empty)"
	}
	if len(unseen) == len(candidates) {
		v.unseen = append(v.unseen, what+" (none of the usual paths visible here)")
	} else if len(unseen) > 0 {
		v.unseen = append(v.unseen, fmt.Sprintf("%s (none at the usual paths doctor sees; %d others not visible here)", what, len(unseen)))
	} else {
		v.unseen = append(v.unseen, what+" (none at the usual paths)")
	}
	return nil, ""
}

// usualKubeletDropIns returns the first of the usual drop-in directories
// that is there (or, in the plugin's pod, a directory mounted under the
// host root that is nothing else doctor knows), for a kubelet whose
// command line is not known; "" when none is.
func (d *doctorRun) usualKubeletDropIns(v *kubeletView) string {
	candidates := slices.Clone(kubeletDropInCandidates)
	for _, m := range d.view.mounts {
		if dirExists(d.view.path(m)) && !d.knownSource(m) && !slices.Contains(candidates, m) {
			candidates = append(candidates, m)
		}
	}
	var unseen []string
	for _, c := range candidates {
		switch d.dirState(c) {
		case fileRead:
			return c
		case fileUnseen:
			unseen = append(unseen, c)
		}
	}
	if len(unseen) > 0 {
		v.unseen = append(v.unseen, "drop-ins of "+strings.Join(unseen, " or ")+" (not visible here)")
	}
	return ""
}

// knownSource reports whether a host path is one doctor reads as
// something other than the kubelet's files: containerd's configuration
// and drop-ins, k3s's and RKE2's configuration.
func (d *doctorRun) knownSource(p string) bool {
	for _, prefix := range []string{"/etc/containerd", "/etc/rancher", "/var/lib/rancher", "/etc/systemd", "/usr/lib/systemd", "/lib/systemd", "/run", "/var/run", "/usr/bin", "/usr/local/bin"} {
		if under(p, prefix) {
			return true
		}
	}
	return under(p, filepath.Dir(d.containerdConfigPath()))
}

// mergeKubeletDropIns merges the drop-ins of dir over base as the kubelet
// does, and returns the result.
func (d *doctorRun) mergeKubeletDropIns(v *kubeletView, dir string, base map[string]any) map[string]any {
	var files []string
	root := d.view.path(dir)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && filepath.Ext(e.Name()) == ".conf" {
			files = append(files, filepath.Join(dir, strings.TrimPrefix(p, root)))
		}
		return nil
	})
	if err != nil {
		v.problems = append(v.problems, fmt.Sprintf("the kubelet's drop-in directory %s: %v", dir, err))
		return base
	}
	if len(files) == 0 {
		v.read = append(v.read, dir+" (no drop-in)")
		return base
	}
	var merged any = base
	for _, f := range files {
		hf := d.readHostFile(f)
		if hf.state != fileRead {
			v.problems = append(v.problems, fmt.Sprintf("drop-in %s is empty or unreadable: the kubelet does not start with it", f))
			continue
		}
		doc, err := kubeletConfigJSON(hf.data)
		if err != nil {
			v.problems = append(v.problems, fmt.Sprintf("drop-in %s: %v: the kubelet does not start with it", f, err))
			continue
		}
		merged = mergePatch(merged, doc)
		v.read = append(v.read, f)
		if _, ok := doc["cpuManagerPolicy"]; ok {
			v.policyFrom = f
		}
	}
	m, _ := merged.(map[string]any)
	return m
}

// mergePatch applies an RFC 7386 JSON merge patch, as the kubelet merges
// a drop-in (jsonpatch.MergePatch): objects merge key by key, null
// deletes, anything else replaces.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	out := map[string]any{}
	if t, ok := target.(map[string]any); ok {
		for k, v := range t {
			out[k] = v
		}
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

// kubeletConfigJSON reads a KubeletConfiguration (YAML or JSON) as the
// kubelet does: apiVersion kubelet.config.k8s.io/v1beta1 and kind
// KubeletConfiguration, or it refuses the file.
func kubeletConfigJSON(data []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(j, &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("not a KubeletConfiguration")
	}
	if doc["kind"] != "KubeletConfiguration" || doc["apiVersion"] != "kubelet.config.k8s.io/v1beta1" {
		return nil, fmt.Errorf("not a KubeletConfiguration (apiVersion %v, kind %v; want kubelet.config.k8s.io/v1beta1, KubeletConfiguration)", doc["apiVersion"], doc["kind"])
	}
	return doc, nil
}

// parseConfigz reads the kubelet's /configz answer
// ({"kubeletconfig": {...}}).
func parseConfigz(data []byte) (*kubeletConfig, bool) {
	var wrapped struct {
		KubeletConfig *kubeletConfig `json:"kubeletconfig"`
	}
	if err := yaml.Unmarshal(data, &wrapped); err != nil || wrapped.KubeletConfig == nil {
		return nil, false
	}
	return wrapped.KubeletConfig, true
}

// rancherKubeletArgList returns the kubelet-arg list of a k3s or RKE2
// configuration file as flags; false when the file is not one.
func rancherKubeletArgList(data []byte) ([]string, bool) {
	var head struct {
		Kind       string    `json:"kind"`
		KubeletArg *[]string `json:"kubelet-arg"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil || head.Kind != "" || head.KubeletArg == nil {
		return nil, false
	}
	var out []string
	for _, a := range *head.KubeletArg {
		out = append(out, "--"+strings.TrimLeft(a, "-"))
	}
	return out, true
}
