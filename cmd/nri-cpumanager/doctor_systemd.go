package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// systemdUnitDirs are where systemd looks for units, the first winning.
var systemdUnitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// systemdKubeletArgs returns the kubelet's arguments as systemd starts
// it: kubelet.service with its drop-ins (kubeadm's 10-kubeadm.conf), the
// last ExecStart, its $VARIABLES from Environment= and the
// EnvironmentFile= files (kubeadm's /var/lib/kubelet/kubeadm-flags.env,
// the packages' /etc/default/kubelet or /etc/sysconfig/kubelet). ok is
// false when no unit is visible; known is false when a file they name is
// not visible.
func (d *doctorRun) systemdKubeletArgs() (args []string, from string, known, ok bool) {
	var files []string
	for _, dir := range systemdUnitDirs {
		if !d.view.visible(dir) {
			return nil, "", false, false
		}
	}
	for _, dir := range systemdUnitDirs {
		if f := d.readHostFile(filepath.Join(dir, "kubelet.service")); f.state == fileRead {
			files = append(files, f.path)
			break
		}
	}
	// Drop-ins: every kubelet.service.d/*.conf, a name in an earlier
	// directory hiding the same name in a later one, in name order.
	dropIns := map[string]string{}
	for _, dir := range systemdUnitDirs {
		matches, _ := filepath.Glob(d.view.path(filepath.Join(dir, "kubelet.service.d", "*.conf")))
		for _, m := range matches {
			if _, seen := dropIns[filepath.Base(m)]; !seen {
				dropIns[filepath.Base(m)] = filepath.Join(dir, "kubelet.service.d", filepath.Base(m))
			}
		}
	}
	names := make([]string, 0, len(dropIns))
	for n := range dropIns {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		files = append(files, dropIns[n])
	}
	if len(files) == 0 {
		return nil, "", false, false
	}
	env := map[string]string{}
	var execStart string
	known = true
	sources := slices.Clone(files)
	for _, f := range files {
		data, err := os.ReadFile(d.view.path(f))
		if err != nil {
			known = false
			continue
		}
		for _, kv := range systemdServiceEntries(data) {
			switch kv[0] {
			case "ExecStart":
				execStart = kv[1] // an empty one resets
			case "Environment":
				for _, word := range splitQuoted(kv[1]) {
					if k, v, ok := strings.Cut(word, "="); ok {
						env[k] = v
					}
				}
			case "EnvironmentFile":
				path, optional := strings.CutPrefix(kv[1], "-")
				ef := d.readHostFile(path)
				switch ef.state {
				case fileRead:
					for k, v := range envFile(ef.data) {
						env[k] = v
					}
					sources = append(sources, path)
				case fileAbsent, fileEmpty:
					if !optional {
						known = false
					}
				default:
					known = false
				}
			}
		}
	}
	if execStart == "" {
		return nil, "", false, false
	}
	words := splitQuoted(strings.TrimLeft(execStart, "-@:+!"))
	for i, w := range words {
		if i == 0 {
			continue // the program
		}
		if name, whole := strings.CutPrefix(w, "$"); whole && !strings.HasPrefix(name, "{") {
			args = append(args, strings.Fields(env[name])...) // $VAR: split into words
			continue
		}
		args = append(args, os.Expand(w, func(k string) string { return env[k] }))
	}
	return args, "systemd: " + strings.Join(sources, ", "), known, true
}

// systemdServiceEntries returns the key=value lines of a unit file's
// [Service] section, in order, continuation lines joined.
func systemdServiceEntries(data []byte) [][2]string {
	var out [][2]string
	section := ""
	var pending string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			if k, v, ok := strings.Cut(line, "="); ok {
				out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
			}
		}
	}
	return out
}

// envFile reads an environment file's KEY=VALUE lines.
func envFile(data []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
}

// splitQuoted splits on white space, keeping what double or single
// quotes enclose together (without the quotes).
func splitQuoted(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote, inWord = r, true
		case quote == 0 && (r == ' ' || r == '\t'):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
