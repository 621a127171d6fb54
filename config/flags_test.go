package config

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"
)

func newFlagSet() (*flag.FlagSet, *Flags) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, RegisterFlags(fs)
}

func TestFlagsOverrideOnlyWhatIsGiven(t *testing.T) {
	file, err := Parse([]byte("logLevel: warn\nreservedCPUCount: 2\nalignMemory: true\nstateDir: /from/file\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		check func(*Config) bool
	}{
		{"no flags keeps the file", nil, func(c *Config) bool { return Diff(file, c).Empty() }},
		{"nri socket", []string{"--nri-socket=/run/n.sock"}, func(c *Config) bool { return c.NRISocket == "/run/n.sock" }},
		{"plugin name", []string{"--plugin-name", "pinner"}, func(c *Config) bool { return c.PluginName == "pinner" }},
		{"plugin index", []string{"--plugin-index=10"}, func(c *Config) bool { return c.PluginIndex == "10" }},
		{"state dir", []string{"--state-dir=/tmp/st"}, func(c *Config) bool { return c.StateDir == "/tmp/st" }},
		{"sysfs root", []string{"--sysfs-root=testdata/sys"}, func(c *Config) bool { return c.SysfsRoot == "testdata/sys" }},
		{"cgroupfs root", []string{"--cgroupfs-root=/cg"}, func(c *Config) bool { return c.CgroupfsRoot == "/cg" }},
		{"no cgroupfs root: no verification", []string{"--cgroupfs-root="}, func(c *Config) bool { return c.CgroupfsRoot == "" }},
		{"reserved CPUs replace the file's count", []string{"--reserved-cpus=0-1"}, func(c *Config) bool {
			return c.ReservedSystemCPUs.Equals(cpuset.New(0, 1)) && c.ReservedCPUCount == 0
		}},
		{"metrics off", []string{"--metrics-address="}, func(c *Config) bool { return c.MetricsAddress == "" }},
		{"Kubernetes API and topology export", []string{"--kubernetes-api=true", "--node-resource-topology=true"}, func(c *Config) bool {
			return c.KubernetesAPI && c.NodeResourceTopology.Enabled && !c.NodeResourceTopology.RemoveOnExit
		}},
		{"debug endpoint off", []string{"--debug-address="}, func(c *Config) bool { return c.DebugAddress == "" }},
		{"log level", []string{"--log-level=trace"}, func(c *Config) bool { return c.LogLevel == logrus.TraceLevel }},
		{"import off", []string{"--kubelet-checkpoint="}, func(c *Config) bool { return c.KubeletCheckpoint == "" }},
		{"last of a repeated flag wins", []string{"--log-level=debug", "--log-level=error"}, func(c *Config) bool {
			return c.LogLevel == logrus.ErrorLevel
		}},
		{"unflagged keys keep the file's values", []string{"--log-level=debug"}, func(c *Config) bool {
			return c.AlignMemory && c.ReservedCPUCount == 2 && c.StateDir == "/from/file"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, flags := newFlagSet()
			if err := fs.Parse(tt.args); err != nil {
				t.Fatalf("Parse(%v): %v", tt.args, err)
			}
			got, err := flags.Apply(file)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !tt.check(got) {
				t.Errorf("flags %v gave %+v", tt.args, got)
			}
			if file.LogLevel != logrus.WarnLevel || file.ReservedCPUCount != 2 {
				t.Errorf("Apply changed its input: %+v", file)
			}
		})
	}
}

func TestFlagsRejectBadValues(t *testing.T) {
	tests := []struct {
		arg  string
		want string
	}{
		{"--plugin-index=1", `invalid value "1" for flag -plugin-index: "1" is not two digits 00-99`},
		{"--plugin-name=a b", `invalid value "a b" for flag -plugin-name: "a b" has the character ' '`},
		{"--nri-socket=", `invalid value "" for flag -nri-socket: "" is not a path`},
		{"--reserved-cpus=x", `invalid value "x" for flag -reserved-cpus: "x" is not a CPU list`},
		{"--metrics-address=9101", `invalid value "9101" for flag -metrics-address: "9101" is not host:port`},
		{"--log-level=loud", `invalid value "loud" for flag -log-level: "loud" is not one of trace, debug, info, warn, error`},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			fs, _ := newFlagSet()
			err := fs.Parse([]string{tt.arg})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%s) error = %v, want it to contain %q", tt.arg, err, tt.want)
			}
		})
	}
}

func TestFlagsApplyChecksTheWhole(t *testing.T) {
	fs, flags := newFlagSet()
	if err := fs.Parse([]string{"--state-dir=/var/lib/kubelet", "--kubelet-checkpoint=/var/lib/kubelet/cpu_manager_state"}); err != nil {
		t.Fatal(err)
	}
	_, err := flags.Apply(Default())
	want := `stateDir: "/var/lib/kubelet" holds kubeletCheckpoint "/var/lib/kubelet/cpu_manager_state"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Apply error = %v, want it to contain %q", err, want)
	}
}

func TestFlagsUsageNamesKeyAndDefault(t *testing.T) {
	fs, _ := newFlagSet()
	var out strings.Builder
	fs.SetOutput(&out)
	fs.PrintDefaults()
	for _, want := range []string{
		"-nri-socket path",
		`overrides config key nriSocket, default "/var/run/nri/nri.sock"`,
		"-reserved-cpus list",
		`overrides config key reservedSystemCPUs, default "0"`,
		`overrides config key logLevel, default "info"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}
