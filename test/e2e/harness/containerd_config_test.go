package harness

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestContainerdConfigKeepsEverythingInItsDirectory(t *testing.T) {
	l := containerdLayout{dir: "/tmp/ctd-42"}
	config := l.render(containerdSettings{logLevel: "debug", nriPluginRequestTimeout: 3 * time.Second})
	quoted := regexp.MustCompile(`(?m)^\s*([A-Za-z_]+) = ("[^"]*")$`)
	paths := map[string]string{}
	for _, m := range quoted.FindAllStringSubmatch(config, -1) {
		v, err := strconv.Unquote(m[2])
		if err != nil {
			t.Fatalf("bad string %s: %v", m[2], err)
		}
		if strings.HasPrefix(v, "/") {
			paths[m[1]] = v
		}
	}
	for _, key := range []string{"root", "state", "address", "path", "socket_path", "plugin_path", "plugin_config_path", "Root"} {
		p, ok := paths[key]
		if !ok {
			t.Errorf("config sets no path for %s:\n%s", key, config)
			continue
		}
		if !strings.HasPrefix(p, l.dir+"/") {
			t.Errorf("%s = %s is outside %s", key, p, l.dir)
		}
	}
	for _, want := range []string{
		"version = 3",
		`sandbox = "` + PauseImage + `"`,
		`snapshotter = "native"`,
		"restrict_oom_score_adj = true",
		"disable = false",
		`plugin_request_timeout = "3s"`,
		`level = "debug"`,
	} {
		if !strings.Contains(config, want) {
			t.Errorf("config lacks %q:\n%s", want, config)
		}
	}
	if strings.Contains(config, "plugin_registration_timeout") {
		t.Errorf("config overrides the registration timeout it was not given:\n%s", config)
	}
	if strings.Contains(config, "default_validator") {
		t.Errorf("config enables the NRI validator it was not asked for:\n%s", config)
	}
}

func TestContainerdConfigNRIValidator(t *testing.T) {
	l := containerdLayout{dir: "/tmp/ctd-42"}
	for _, tc := range []struct {
		name      string
		validator NRIValidator
		want      string
	}{
		{"required plugins", NRIValidator{
			RequiredPlugins:           []string{"cpumanager", "90-other"},
			TolerateMissingAnnotation: "tolerate-missing-nri-plugins.example.com",
		}, "[plugins.'io.containerd.nri.v1.nri'.default_validator]\n" +
			"  enable = true\n" +
			"  required_plugins = [\"cpumanager\", \"90-other\"]\n" +
			"  tolerate_missing_plugins_annotation = \"tolerate-missing-nri-plugins.example.com\"\n"},
		{"rejections only", NRIValidator{Reject: []string{"reject_oci_hook_adjustment", "reject_sysctl_adjustment"}},
			"[plugins.'io.containerd.nri.v1.nri'.default_validator]\n" +
				"  enable = true\n" +
				"  reject_oci_hook_adjustment = true\n" +
				"  reject_sysctl_adjustment = true\n\n"},
	} {
		config := l.render(containerdSettings{nriValidator: &tc.validator})
		if !strings.Contains(config, tc.want) {
			t.Errorf("%s: config lacks\n%s\nin\n%s", tc.name, tc.want, config)
		}
	}
}

func TestCheckSocketPaths(t *testing.T) {
	if err := (containerdLayout{dir: "/tmp/ctd-1234567890"}).checkSocketPaths(); err != nil {
		t.Errorf("short directory refused: %v", err)
	}
	long := "/tmp/" + strings.Repeat("x", 90)
	if err := (containerdLayout{dir: long}).checkSocketPaths(); err == nil {
		t.Errorf("directory of %d bytes accepted; its sockets cannot be bound", len(long))
	}
}

func TestContainerdConfigSystemdCgroup(t *testing.T) {
	l := containerdLayout{dir: "/tmp/ctd-42"}
	options := regexp.MustCompile(`(?s)\[plugins\.'io\.containerd\.cri\.v1\.runtime'\.containerd\.runtimes\.runc\.options\]\n(.*)`)
	for _, systemd := range []bool{false, true} {
		m := options.FindStringSubmatch(l.render(containerdSettings{systemdCgroup: systemd}))
		if m == nil {
			t.Fatal("no runc options table")
		}
		if got := strings.Contains(m[1], "SystemdCgroup = true"); got != systemd {
			t.Errorf("systemdCgroup %v: runc options\n%s", systemd, m[1])
		}
	}
}
