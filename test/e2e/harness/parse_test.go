package harness

import (
	"testing"

	"k8s.io/utils/cpuset"
)

func TestParseCPUsAllowed(t *testing.T) {
	tests := []struct {
		line    string
		want    cpuset.CPUSet
		wantErr bool
	}{
		{"Cpus_allowed_list:\t0-1\n", cpuset.New(0, 1), false},
		{"Cpus_allowed_list:\t3,5-7", cpuset.New(3, 5, 6, 7), false},
		{"Cpus_allowed_list:\t1", cpuset.New(1), false},
		{"Cpus_allowed:\t3", cpuset.CPUSet{}, true},
		{"", cpuset.CPUSet{}, true},
		{"Cpus_allowed_list:\tfoo", cpuset.CPUSet{}, true},
	}
	for _, tt := range tests {
		got, err := parseCPUsAllowed(tt.line)
		if (err != nil) != tt.wantErr || !got.Equals(tt.want) {
			t.Errorf("parseCPUsAllowed(%q) = %s, %v; want %s, error %v", tt.line, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseProcessesCPUsAllowed(t *testing.T) {
	self, command, err := parseProcessesCPUsAllowed("/proc/self/status:Cpus_allowed_list:\t0-3\n/proc/1/status:Cpus_allowed_list:\t2,5\n")
	if err != nil || !self.Equals(cpuset.New(0, 1, 2, 3)) || !command.Equals(cpuset.New(2, 5)) {
		t.Errorf("parseProcessesCPUsAllowed = %s, %s, %v; want 0-3, 2,5", self, command, err)
	}
	for _, out := range []string{
		"/proc/self/status:Cpus_allowed_list:\t0-3\n",                                       // one file
		"Cpus_allowed_list:\t0-3\nCpus_allowed_list:\t0-3\n",                                // no file names
		"/proc/self/status:Cpus_allowed_list:\t0-3\n/proc/1/status:Cpus_allowed_list:\tx\n", // not a list
		"",
	} {
		if _, _, err := parseProcessesCPUsAllowed(out); err == nil {
			t.Errorf("parseProcessesCPUsAllowed(%q) parsed", out)
		}
	}
}

func TestParseContainerInfo(t *testing.T) {
	info := map[string]string{"info": `{"sandboxID":"abc","pid":4242,"runtimeSpec":{"ociVersion":"1.2.0","linux":{"cgroupsPath":"/kubepods/podu1/c1","resources":{}}}}`}
	got, err := parseContainerInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	if got.Pid != 4242 || got.RuntimeSpec.Linux.CgroupsPath != "/kubepods/podu1/c1" {
		t.Errorf("parseContainerInfo = %+v", got)
	}
	if _, err := parseContainerInfo(map[string]string{}); err == nil {
		t.Error("a status without info parsed")
	}
	if _, err := parseContainerInfo(map[string]string{"info": "{"}); err == nil {
		t.Error("truncated info parsed")
	}
}

func TestIsShimOf(t *testing.T) {
	const addr = "/tmp/ctd-1/containerd.sock"
	tests := []struct {
		argv []string
		want bool
	}{
		{[]string{"/work/_output/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", addr}, true},
		{[]string{"containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", "/tmp/ctd-2/containerd.sock"}, false},
		{[]string{"/usr/bin/containerd", "-address", addr}, false},
		{[]string{"containerd-shim-runc-v2", "-address"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := isShimOf(tt.argv, addr); got != tt.want {
			t.Errorf("isShimOf(%q) = %v, want %v", tt.argv, got, tt.want)
		}
	}
}
