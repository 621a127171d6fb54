package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// documentedCommandSources returns the files whose commands
// TestDocumentedCommands runs: README.md, docs/, the chart's README and
// NOTES.
func documentedCommandSources(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	sources := []string{"README.md", "deploy/helm/nri-cpumanager/README.md", "deploy/helm/nri-cpumanager/templates/NOTES.txt"}
	for _, d := range docs {
		sources = append(sources, filepath.ToSlash(strings.TrimPrefix(d, filepath.Join("..", "..")+string(filepath.Separator))))
	}
	return sources
}

// notRunHere are the commands the docs show that a test machine cannot
// run, with why: each needs what a test has no fixture of.
var notRunHere = map[string]string{
	"run":                  "runs the plugin: needs containerd's NRI socket (make e2e runs it)",
	"validate-adjustments": "runs the validating plugin: needs containerd's NRI socket (make e2e runs it)",
	"probe":                "asks the running plugin's probe socket (make e2e runs the DaemonSet's probes)",
	"state":                "reads the checkpoint of a plugin that ran on the node (its own tests: state_test.go)",
	"export-kubelet":       "reads the checkpoint of a plugin that ran on the node (its own tests)",
	"simulate":             "replays a scenario file: test/scenarios' run in go test ./policy and ./test/integration",
}

// documentedCommand is one nri-cpumanager command line a document shows.
type documentedCommand struct {
	source string
	args   []string
	// inPod: run with kubectl exec in the plugin's pod.
	inPod bool
	// stdin, stdout are the files of its < and > redirections ("-" for
	// a pipe into it), "" for none.
	stdin, stdout string
}

// commandStart finds nri-cpumanager as a command word: at the start of a
// shell command, after sudo, after kubectl exec's --, after a pipe, or as
// a CI step's run:;
// its arguments up to a redirection (< or > and a space), a pipe, the
// next command or a placeholder (<command>: a synopsis, not a command).
var commandStart = regexp.MustCompile(`(?:^|\$ |sudo |-- |\| |; |&& |\$\(|- run: )nri-cpumanager((?: [^|;&#<>)]*)?)(?:(<|>|\|)\s+(\S*))?`)

// documentedCommands returns the nri-cpumanager command lines of a
// document's code blocks and inline code spans, continuation lines
// joined.
func documentedCommands(t *testing.T, source string, text string) []documentedCommand {
	t.Helper()
	var snippets []string
	for _, block := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(text, -1) {
		snippets = append(snippets, logicalLines(block[1])...)
	}
	prose := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, "")
	for _, span := range regexp.MustCompile("`((?:sudo )?nri-cpumanager [^`]+)`").FindAllStringSubmatch(prose, -1) {
		snippets = append(snippets, span[1])
	}
	if strings.HasSuffix(source, "NOTES.txt") {
		// The NOTES' commands are its indented lines.
		var indented []string
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "  ") {
				indented = append(indented, l)
			}
		}
		snippets = append(snippets, logicalLines(strings.Join(indented, "\n"))...)
	}
	var out []documentedCommand
	for _, s := range snippets {
		// What a pipe feeds in: the part before "| ... nri-cpumanager".
		for _, m := range commandStart.FindAllStringSubmatchIndex(s, -1) {
			args := strings.Fields(s[m[2]:m[3]])
			if len(args) == 0 {
				continue
			}
			c := documentedCommand{source: source, args: args, inPod: strings.Contains(s[:m[0]], " exec ")}
			if strings.Contains(s[:m[0]+len(strings.SplitN(s[m[0]:], "nri-cpumanager", 2)[0])], "| ") ||
				strings.HasSuffix(strings.TrimSpace(s[:m[0]]), "|") {
				c.stdin = "-"
			}
			if m[4] >= 0 {
				switch s[m[4]:m[5]] {
				case "<":
					c.stdin = s[m[6]:m[7]]
				case ">":
					c.stdout = s[m[6]:m[7]]
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// logicalLines joins a shell snippet's lines continued with \ or a
// trailing pipe, and drops comments.
func logicalLines(block string) []string {
	var lines []string
	cur := ""
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i] // a trailing comment
		}
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			continue
		}
		cur += " " + l
		if strings.HasSuffix(l, "\\") {
			cur = strings.TrimSuffix(cur, "\\")
			continue
		}
		if strings.HasSuffix(l, "|") {
			continue
		}
		lines = append(lines, strings.Join(strings.Fields(cur), " "))
		cur = ""
	}
	return append(lines, strings.Join(strings.Fields(cur), " "))
}

// defaultInstallConfig returns the configuration file the default install
// gives the plugin (deploy/configmap.yaml's config.yaml).
func defaultInstallConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil || cm.Data["config.yaml"] == "" {
		t.Fatalf("deploy/configmap.yaml has no config.yaml: %v", err)
	}
	return cm.Data["config.yaml"]
}

// healthyConfigz is a kubelet's /configz on a healthy node: the kubelet's
// defaults (no CPU reserved) with the systemd cgroup driver.
const healthyConfigz = `{"kubeletconfig":{"enableServer":true,"cgroupDriver":"systemd","cpuManagerPolicy":"none","cpuManagerReconcilePeriod":"10s",` +
	`"memoryManagerPolicy":"None","topologyManagerPolicy":"none","topologyManagerScope":"container","maxPods":110}}`

// TestDocumentedCommands runs every nri-cpumanager command the docs and
// the chart's NOTES show whose prerequisites a test machine has, on a
// healthy node of a default install: the host files the DaemonSet mounts
// (the kubeadm layout, containerd with deploy/containerd-nri.toml
// imported), the plugin's metrics naming containerd 2.4, the kubelet's
// /configz where a command pipes it in. Each must pass (exit 0): a command
// the docs show for checking a healthy node that fails is a false alarm
// on every node. A command with --host-root runs as in the plugin's pod
// (the host's files only, no process); one without as on the node (the
// kubelet's and containerd's processes too). The pod's /sys, cgroup tree
// and NRI socket are the fixture's. Commands of notRunHere are listed,
// not run; any other command fails the test until it is run or listed.
func TestDocumentedCommands(t *testing.T) {
	var commands []documentedCommand
	for _, src := range documentedCommandSources(t) {
		data, err := os.ReadFile(filepath.Join("..", "..", src))
		if err != nil {
			t.Fatal(err)
		}
		commands = append(commands, documentedCommands(t, src, string(data))...)
	}
	fx := newDocFixture(t)
	ran := map[string]int{}
	done := map[string]bool{}
	for _, c := range commands {
		sub := c.args[0]
		if _, skip := notRunHere[sub]; skip {
			continue
		}
		if !slices.Contains(commandsList(), sub) && !isHelp(sub) && !strings.HasPrefix(sub, "-") {
			t.Errorf("%s shows nri-cpumanager %s, which is no command", c.source, strings.Join(c.args, " "))
			continue
		}
		ran[sub]++
		key := fmt.Sprint(c.inPod, c.args, c.stdin)
		if done[key] {
			continue // the same command shown elsewhere
		}
		done[key] = true
		t.Run(c.source+": "+strings.Join(c.args, " "), func(t *testing.T) {
			status, out := fx.run(t, c)
			if c.inPod && c.args[0] == "doctor" && c.stdin == "-" && !strings.Contains(out, "\nno problem found.\n") {
				// With the kubelet's /configz, doctor sees all it checks.
				t.Errorf("%s shows nri-cpumanager %s: on a healthy node it should find nothing to warn about:\n%s", c.source, strings.Join(c.args, " "), out)
			}
			if status != exitOK {
				t.Errorf("%s shows nri-cpumanager %s: exit status %d on a healthy node of a default install:\n%s", c.source, strings.Join(c.args, " "), status, out)
			}
		})
	}
	// What the docs and the NOTES must keep showing, and this test run.
	for _, sub := range []string{"doctor", "validate-config", "topology", "version"} {
		if ran[sub] == 0 {
			t.Errorf("no documented nri-cpumanager %s found: the extraction is broken or the docs dropped it", sub)
		}
	}
	notes := 0
	for _, c := range commands {
		if strings.HasSuffix(c.source, "NOTES.txt") && c.args[0] == "doctor" {
			notes++
		}
	}
	if notes == 0 {
		t.Error("the chart's NOTES show no nri-cpumanager doctor command")
	}
}

// commandsList names the commands of main.go.
func commandsList() []string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}

// docFixture is a healthy node of a default install, as the plugin's pod
// sees it (pod: the host files the DaemonSet mounts, no process) and as
// the node itself does (node: the kubelet's and containerd's processes
// too), with the default install's configuration file and a capture of
// the node's topology.
type docFixture struct {
	pod, node    *doctorNode
	cfg, capture string
}

func newDocFixture(t *testing.T) *docFixture {
	t.Helper()
	fx := &docFixture{pod: newDoctorNode(t), node: newBareDoctorNode(t)}
	fx.node.sys = fx.pod.sys
	shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "containerd-nri.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*doctorNode{fx.pod, fx.node} {
		n.host("/etc/containerd/config.toml", "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n"+systemdRunc)
		n.host("/etc/containerd/conf.d/nri.toml", strings.ReplaceAll(string(shipped), "/var/run/nri/nri.sock", n.ns))
		n.host("/var/lib/kubelet/config.yaml", kubeletNone)
		if err := os.MkdirAll(filepath.Join(n.root, "etc/kubernetes/kubelet.conf.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		n.pluginMetrics("containerd", "v2.4.2", true)
	}
	fx.node.kubeadm()
	dir := t.TempDir()
	fx.cfg = filepath.Join(dir, "config.yaml")
	fx.pod.write(fx.cfg, defaultInstallConfig(t))
	var captured bytes.Buffer
	if status := run([]string{"topology", "--json", "--sysfs-root", fx.pod.sys}, &captured, &captured); status != exitOK {
		t.Fatalf("topology --json on the fixture: %d\n%s", status, captured.String())
	}
	fx.capture = filepath.Join(dir, "topology.json")
	fx.pod.write(fx.capture, captured.String())
	return fx
}

// run runs a documented command on the fixture, its paths replaced with
// the fixture's, and returns its status and output.
func (fx *docFixture) run(t *testing.T, c documentedCommand) (int, string) {
	t.Helper()
	n := fx.node
	if c.inPod {
		n = fx.pod
	}
	// The documented paths, as the fixture has them.
	replace := func(a string) string {
		switch {
		case a == "/host":
			return n.root
		case strings.HasSuffix(a, "config.yaml") && !strings.Contains(a, "kubelet"):
			return fx.cfg
		case strings.HasSuffix(a, ".json") && !strings.Contains(a, "kubelet"):
			return fx.capture
		}
		return a
	}
	var args []string
	for _, a := range c.args {
		if strings.Contains(a, "{{") || strings.Contains(a, "<") {
			t.Fatalf("an argument the test cannot fill in: %q", a)
		}
		args = append(args, replace(a))
	}
	input := ""
	switch {
	case c.stdin == "-" && args[0] == "doctor":
		input = healthyConfigz // kubectl get --raw .../configz | ...
	case c.stdin == "-":
		input = defaultInstallConfig(t) // a configuration piped in
	case c.stdin != "":
		data, err := os.ReadFile(replace(c.stdin))
		if err != nil {
			t.Fatalf("%s < %s: %v", strings.Join(c.args, " "), c.stdin, err)
		}
		input = string(data)
	}
	help := slices.ContainsFunc(args, isHelp)
	switch sub := args[0]; {
	case help:
	case sub == "doctor":
		if !slices.Contains(args, "--host-root") {
			// In the pod, /host is the fixture's root; on the node, / is.
			args = append(args, "--host-root", n.root)
		}
		args = append(args, "--plugin-metrics", n.metrics, "--nri-socket", n.ns, "--sysfs-root", n.sys, "--cgroupfs-root", n.cgroups)
	case sub == "topology" || sub == "validate-config" && !slices.Contains(args, "--topology"):
		args = append(args, "--sysfs-root", n.sys)
	}
	defer setStdin(input)()
	var out bytes.Buffer
	status := run(args, &out, &out)
	return status, strings.Join(args, " ") + "\n" + out.String()
}

// setStdin makes the package's standard input read text, and returns
// what restores it.
func setStdin(text string) func() {
	saved := stdin
	stdin = strings.NewReader(text)
	return func() { stdin = saved }
}
