package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// hostView is what a run sees of the host's files under its host root:
// the whole file system (on the node itself, in kubectl debug node's pod,
// a copy of a node's files), or only the paths mounted one by one (the
// DaemonSet's pod: /host/etc/containerd/config.toml and the others). A
// path it does not see is unknown, never absent: doctor says so and
// concludes nothing from it.
type hostView struct {
	root  string
	whole bool
	// mounts are the host paths mounted under root, when not whole.
	mounts []string
}

// newHostView looks at how the host root is mounted: "/" is the node; a
// root that is itself a mount point is a host's whole file system; mount
// points below it are the paths mounted one by one, and nothing else of
// the host is there; no mount at all, a copy of a host's files.
// A root that does not exist shows nothing.
func newHostView(root string) hostView {
	root = filepath.Clean(root)
	v := hostView{root: root, whole: true}
	if root == "/" {
		return v
	}
	if _, err := os.Stat(root); err != nil {
		v.whole = false
		return v
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return v
	}
	isMount, below := mountsAt(data, root)
	if !isMount && len(below) > 0 {
		v.whole, v.mounts = false, below
	}
	return v
}

// mountsAt says whether root is a mount point in mountinfo, and which
// host paths are mounted below it.
func mountsAt(mountinfo []byte, root string) (isMount bool, below []string) {
	base := strings.TrimSuffix(root, "/")
	for _, point := range mountPoints(mountinfo) {
		rel, ok := strings.CutPrefix(point, base)
		switch {
		case point == root:
			isMount = true
		case ok && strings.HasPrefix(rel, "/"):
			below = append(below, rel)
		}
	}
	return isMount, below
}

// defaultHostRoot is where doctor finds the host's files without
// --host-root: startHostRoot where something is mounted there (the
// plugin's pod, kubectl debug node's), else / (the node itself).
func defaultHostRoot() string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "/"
	}
	if isMount, below := mountsAt(data, startHostRoot); isMount || len(below) > 0 {
		return startHostRoot
	}
	return "/"
}

// mountPoints returns the mount points of /proc/self/mountinfo (its fifth
// field, octal escapes decoded).
func mountPoints(mountinfo []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, unescapeMountinfo(fields[4]))
	}
	return out
}

// unescapeMountinfo decodes the \ooo escapes mountinfo writes for spaces,
// tabs, newlines and backslashes.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// path is where a host path is for this process.
func (v hostView) path(p string) string {
	if v.root == "" || v.root == "/" {
		return p
	}
	return filepath.Join(v.root, p)
}

// visible reports whether the run sees the host path p: everything in a
// whole view, else what is mounted at p or above it.
func (v hostView) visible(p string) bool {
	if v.whole {
		return true
	}
	for _, m := range v.mounts {
		if under(p, m) {
			return true
		}
	}
	return false
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// What a run knows of a host file.
type fileState int

const (
	// fileUnseen: not visible to this run (not mounted).
	fileUnseen fileState = iota
	// fileAbsent: visible, and not there.
	fileAbsent
	// fileEmpty: there and empty. The DaemonSet's FileOrCreate mounts
	// create a missing file empty, so this is what a file the host does
	// not have looks like in the plugin's pod.
	fileEmpty
	// fileRead: read.
	fileRead
	// fileError: there, and reading it failed.
	fileError
)

// hostFile is one host file as a run saw it.
type hostFile struct {
	path  string
	state fileState
	data  []byte
	err   error
}

// readHostFile reads a host file, saying what could be known of it.
func (d *doctorRun) readHostFile(p string) hostFile {
	f := hostFile{path: p}
	if !d.view.visible(p) {
		f.state = fileUnseen
		return f
	}
	data, err := os.ReadFile(d.view.path(p))
	switch {
	case os.IsNotExist(err):
		f.state = fileAbsent
	case err != nil:
		f.state, f.err = fileError, err
	case len(bytes.TrimSpace(data)) == 0:
		f.state = fileEmpty
	default:
		f.state, f.data = fileRead, data
	}
	return f
}

// dirState says whether a host directory is unseen, absent or there.
func (d *doctorRun) dirState(p string) fileState {
	if !d.view.visible(p) {
		return fileUnseen
	}
	if dirExists(d.view.path(p)) {
		return fileRead
	}
	return fileAbsent
}

// hostProcess is a process of the host and its command line.
type hostProcess struct {
	from string   // its cmdline file, as a host path
	args []string // its command line, args[0] the program
}

// name is the base name of the process's program.
func (p hostProcess) name() string { return filepath.Base(p.args[0]) }

// processes lists the host's processes with a command line, from the
// host's /proc: on the node itself, or in a pod that shares the host's
// process namespace. Nil when /proc is not visible (the plugin's pod).
func (d *doctorRun) processes() []hostProcess {
	if d.procs != nil || !d.view.visible("/proc") {
		return d.procs
	}
	d.procs = []hostProcess{}
	files, _ := filepath.Glob(d.view.path("/proc/[0-9]*/cmdline"))
	slices.SortFunc(files, func(a, b string) int {
		na, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		nb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return na - nb
	})
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		d.procs = append(d.procs, hostProcess{from: "/proc/" + filepath.Base(filepath.Dir(f)) + "/cmdline", args: args})
	}
	return d.procs
}

// process returns the first host process whose program is named name.
func (d *doctorRun) process(name string) (hostProcess, bool) {
	for _, p := range d.processes() {
		if p.name() == name {
			return p, true
		}
	}
	return hostProcess{}, false
}

// flagValue returns the value of a command-line flag given as --name=v,
// --name v (and -name, which Go's and pflag's long forms accept), the
// last one winning, as for the kubelet and containerd. Any of names may
// be given.
func flagValue(args []string, names ...string) (string, bool) {
	value, found := "", false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		name, v, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !slices.Contains(names, name) {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				continue
			}
			v = args[i+1]
			i++
		}
		value, found = v, true
	}
	return value, found
}

// A distribution whose node layout doctor knows: kubeadm-style nodes
// (containerd's own paths, the kubelet's files where kubeadm puts them),
// k3s and RKE2 (their configuration file, data directory and containerd).
type distribution struct {
	name string // "" for kubeadm-style
	// config is k3s's or RKE2's configuration file (config.yaml, with
	// its config.yaml.d), dataDir their data directory's default.
	config, dataDir string
}

var (
	kubeadmStyle = distribution{}
	k3s          = distribution{name: "k3s", config: "/etc/rancher/k3s/config.yaml", dataDir: "/var/lib/rancher/k3s"}
	rke2         = distribution{name: "RKE2", config: "/etc/rancher/rke2/config.yaml", dataDir: "/var/lib/rancher/rke2"}
)

// rancherSocket is the CRI socket of k3s's and RKE2's containerd.
const rancherSocket = "/run/k3s/containerd/containerd.sock"

// distribution tells which layout the node has: from its processes (k3s
// runs the kubelet inside its own process; RKE2's kubelet and their
// containerd take paths under their data directory), else from which of
// their files are there.
func (d *doctorRun) distribution() distribution {
	if d.distro != nil {
		return *d.distro
	}
	found := kubeadmStyle
	defer func() { d.distro = &found }()
	for _, p := range d.processes() {
		switch {
		case p.name() == "k3s" || p.name() == "k3s-server" || p.name() == "k3s-agent":
			found = k3s
			return found
		case p.name() == "rke2":
			found = rke2
			return found
		case p.name() == "kubelet" || p.name() == "containerd":
			for _, r := range []distribution{k3s, rke2} {
				if strings.Contains(strings.Join(p.args, " "), r.dataDir+"/") {
					found = r
					return found
				}
			}
		}
	}
	for _, r := range []distribution{k3s, rke2} {
		for _, p := range []string{r.config, r.config + ".d", r.dataDir + "/agent/etc/containerd/config.toml", r.dataDir + "/agent/etc/kubelet.conf.d"} {
			if d.view.visible(p) {
				if _, err := os.Stat(d.view.path(p)); err == nil {
					found = r
					return found
				}
			}
		}
	}
	return found
}

// String says what the view is, for doctor's first line.
func (v hostView) String() string {
	if v.whole {
		return "the host's whole file system"
	}
	return "only what is mounted there: " + strings.Join(v.mounts, ", ")
}
