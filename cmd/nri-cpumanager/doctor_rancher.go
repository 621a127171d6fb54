package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
)

// rancherConfig is k3s's or RKE2's configuration as they read it: their
// config.yaml, then each file of config.yaml.d (*.yaml and *.yml, in
// lexical order), a key's later value replacing the earlier one, a key
// written with a trailing + appending to it (k3s's configfilearg).
type rancherConfig struct {
	values map[string]any
	// read are the files read, unseen those that count and were not
	// visible.
	read, unseen []string
	// problems are files k3s or RKE2 would not start with.
	problems []string
}

// rancherConfig returns the distribution's configuration, read once per
// run: containerd's checks need its data-dir and
// container-runtime-endpoint before the kubelet's read its kubelet-arg.
func (d *doctorRun) rancherConfig(r distribution) *rancherConfig {
	if d.rancher == nil {
		d.rancher = d.loadRancherConfig(r)
	}
	return d.rancher
}

// externalRuntime returns the CRI socket k3s or RKE2 is told to use
// instead of their own containerd (container-runtime-endpoint, the
// unix:// prefix removed); "" when they run their own.
func (rc *rancherConfig) externalRuntime() string {
	endpoints := rc.strings("container-runtime-endpoint")
	if len(endpoints) == 0 {
		return ""
	}
	return strings.TrimPrefix(endpoints[len(endpoints)-1], "unix://")
}

// loadRancherConfig reads the distribution's configuration files.
func (d *doctorRun) loadRancherConfig(r distribution) *rancherConfig {
	rc := &rancherConfig{values: map[string]any{}}
	files := []hostFile{d.readHostFile(r.config)}
	dir := r.config + ".d"
	switch d.dirState(dir) {
	case fileUnseen:
		rc.unseen = append(rc.unseen, dir)
	case fileRead:
		entries, err := os.ReadDir(d.view.path(dir))
		if err != nil {
			rc.problems = append(rc.problems, fmt.Sprintf("%s: %v", dir, err))
		}
		for _, e := range entries { // ReadDir sorts by name
			name := strings.ToLower(e.Name())
			if e.IsDir() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
				continue
			}
			files = append(files, d.readHostFile(filepath.Join(dir, e.Name())))
		}
	}
	for _, f := range files {
		switch f.state {
		case fileUnseen:
			rc.unseen = append(rc.unseen, f.path)
			continue
		case fileError:
			rc.problems = append(rc.problems, fmt.Sprintf("%s: %v", f.path, f.err))
			continue
		case fileAbsent, fileEmpty:
			continue
		}
		var doc yamlv2.MapSlice
		if err := yamlv2.Unmarshal(f.data, &doc); err != nil {
			rc.problems = append(rc.problems, fmt.Sprintf("%s is not valid YAML: %v", f.path, err))
			continue
		}
		rc.read = append(rc.read, f.path)
		for _, item := range doc {
			key := fmt.Sprint(item.Key)
			appendTo := strings.HasSuffix(key, "+")
			key = strings.TrimSuffix(key, "+")
			if old, ok := rc.values[key]; ok && appendTo {
				rc.values[key] = append(rancherList(old), rancherList(item.Value)...)
			} else {
				rc.values[key] = item.Value
			}
		}
	}
	return rc
}

// rancherList is a value as a list, as k3s appends it.
func rancherList(v any) []any {
	switch v := v.(type) {
	case []any:
		return v
	case nil:
		return nil
	case string:
		return []any{v}
	default:
		if s := strings.TrimSpace(fmt.Sprint(v)); s != "" {
			return []any{s}
		}
		return nil
	}
}

// strings returns a key's values as strings (one for a scalar).
func (rc *rancherConfig) strings(key string) []string {
	var out []string
	for _, v := range rancherList(rc.values[key]) {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// dataDir is the distribution's data directory: data-dir, else its
// default.
func (rc *rancherConfig) dataDir(r distribution) string {
	if dirs := rc.strings("data-dir"); len(dirs) > 0 && dirs[len(dirs)-1] != "" {
		return dirs[len(dirs)-1]
	}
	return r.dataDir
}

// rancherKubeletArgs are the kubelet's arguments on a k3s or RKE2 node as
// its configuration makes them: the drop-in directory they always pass
// (<data-dir>/agent/etc/kubelet.conf.d, where they write their own
// defaults), then each kubelet-arg of the configuration files, then those
// of k3s's own command line (cmdline, nil when not seen), later ones
// winning as for the kubelet.
func rancherKubeletArgs(rc *rancherConfig, r distribution, cmdline []string) []string {
	args := []string{"--config-dir=" + rc.dataDir(r) + "/agent/etc/kubelet.conf.d"}
	kubeletArgs := rc.strings("kubelet-arg")
	for i := 0; i < len(cmdline); i++ {
		if v, ok := strings.CutPrefix(cmdline[i], "--kubelet-arg="); ok {
			kubeletArgs = append(kubeletArgs, v)
		} else if cmdline[i] == "--kubelet-arg" && i+1 < len(cmdline) {
			kubeletArgs = append(kubeletArgs, cmdline[i+1])
			i++
		}
	}
	for _, a := range kubeletArgs {
		args = append(args, "--"+strings.TrimLeft(a, "-"))
	}
	return args
}

// rancherContainerd is the configuration file k3s's or RKE2's containerd
// reads (generated at every start) and the templates it is generated
// from, when there is one.
func (d *doctorRun) rancherContainerd(r distribution) (config string, templates []string) {
	dir := d.rancherConfig(r).dataDir(r) + "/agent/etc/containerd"
	for _, t := range []string{"config-v3.toml.tmpl", "config.toml.tmpl"} {
		if f := d.readHostFile(filepath.Join(dir, t)); f.state == fileRead || f.state == fileEmpty {
			templates = append(templates, f.path)
		}
	}
	return filepath.Join(dir, "config.toml"), templates
}

// isRancherContainerd reports whether a containerd version is a build of
// k3s or RKE2 (v2.0.5-k3s1), whose configuration is theirs.
func isRancherContainerd(version string) bool {
	return strings.Contains(version, "-k3s")
}
