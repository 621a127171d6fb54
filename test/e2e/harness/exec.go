package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"
)

// defaultExecTimeout bounds Exec.
const defaultExecTimeout = 10 * time.Second

// ExecResult is the outcome of a command run in a container.
type ExecResult struct {
	Stdout, Stderr string
	ExitCode       int32
}

// ExecSync runs cmd in the container through CRI ExecSync and returns its
// output and exit code; timeout bounds the command (at least a second, the
// CRI granularity).
func (c *Container) ExecSync(ctx context.Context, timeout time.Duration, cmd ...string) (ExecResult, error) {
	seconds := int64(timeout / time.Second)
	if seconds < 1 {
		seconds = 1
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+5*time.Second)
	defer cancel()
	resp, err := c.Pod.cri.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: c.ID, Cmd: cmd, Timeout: seconds})
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec %q in %s: %w", cmd, c, err)
	}
	return ExecResult{Stdout: string(resp.GetStdout()), Stderr: string(resp.GetStderr()), ExitCode: resp.GetExitCode()}, nil
}

// Exec runs cmd in the container (10 s at most) and returns its standard
// output; a non-zero exit status is an error quoting the standard error.
func (c *Container) Exec(ctx context.Context, cmd ...string) (string, error) {
	res, err := c.ExecSync(ctx, defaultExecTimeout, cmd...)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return res.Stdout, fmt.Errorf("exec %q in %s: exit status %d: %s", cmd, c, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return res.Stdout, nil
}

// CPUsAllowed returns the CPUs a new process in the container may run on:
// Cpus_allowed_list of a grep started inside it.
func (c *Container) CPUsAllowed(ctx context.Context) (cpuset.CPUSet, error) {
	return c.cpusAllowedOf(ctx, "/proc/self/status")
}

// InitCPUsAllowed returns the CPUs the container's own command (pid 1 of its
// PID namespace) may run on, which shows whether a change reached processes
// that were already running. With SharePIDNamespace, pid 1 is the pod's
// pause process instead.
func (c *Container) InitCPUsAllowed(ctx context.Context) (cpuset.CPUSet, error) {
	return c.cpusAllowedOf(ctx, "/proc/1/status")
}

// ProcessesCPUsAllowed returns, from one exec (seconds each in an
// emulated guest), what CPUsAllowed and InitCPUsAllowed return: the CPUs a
// new process in the container (the grep that reads both) and the
// container's own command may run on.
func (c *Container) ProcessesCPUsAllowed(ctx context.Context) (newProcess, command cpuset.CPUSet, err error) {
	out, err := c.Exec(ctx, "grep", "Cpus_allowed_list", selfStatus, initStatus)
	if err != nil {
		return cpuset.CPUSet{}, cpuset.CPUSet{}, err
	}
	newProcess, command, err = parseProcessesCPUsAllowed(out)
	if err != nil {
		return cpuset.CPUSet{}, cpuset.CPUSet{}, fmt.Errorf("in %s: %w", c, err)
	}
	return newProcess, command, nil
}

// The status files ProcessesCPUsAllowed reads: the grep's own and the
// container's command's.
const selfStatus, initStatus = "/proc/self/status", "/proc/1/status"

// parseProcessesCPUsAllowed parses the output of a grep of
// Cpus_allowed_list in selfStatus and initStatus ("FILE:Cpus_allowed_list:\tLIST"
// lines).
func parseProcessesCPUsAllowed(out string) (self, command cpuset.CPUSet, err error) {
	found := map[string]cpuset.CPUSet{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		file, rest, ok := strings.Cut(line, ":")
		if !ok || (file != selfStatus && file != initStatus) {
			return cpuset.CPUSet{}, cpuset.CPUSet{}, fmt.Errorf("grep of Cpus_allowed_list: unexpected line %q", line)
		}
		set, err := parseCPUsAllowed(rest)
		if err != nil {
			return cpuset.CPUSet{}, cpuset.CPUSet{}, fmt.Errorf("%s: %w", file, err)
		}
		found[file] = set
	}
	self, okSelf := found[selfStatus]
	command, okCommand := found[initStatus]
	if !okSelf || !okCommand {
		return cpuset.CPUSet{}, cpuset.CPUSet{}, fmt.Errorf("grep of Cpus_allowed_list: not both %s and %s in %q", selfStatus, initStatus, out)
	}
	return self, command, nil
}

func (c *Container) cpusAllowedOf(ctx context.Context, statusFile string) (cpuset.CPUSet, error) {
	out, err := c.Exec(ctx, "grep", "Cpus_allowed_list", statusFile)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	set, err := parseCPUsAllowed(out)
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("%s in %s: %w", statusFile, c, err)
	}
	return set, nil
}

// ProcessCPUsAllowed returns the CPUs a host process may run on, from its
// /proc status (for a container whose image has no shell: see PID).
func ProcessCPUsAllowed(pid int) (cpuset.CPUSet, error) {
	file := fmt.Sprintf("/proc/%d/status", pid)
	status, err := os.ReadFile(file)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Cpus_allowed_list:") {
			return parseCPUsAllowed(line)
		}
	}
	return cpuset.CPUSet{}, fmt.Errorf("no Cpus_allowed_list in %s", file)
}

// parseCPUsAllowed parses a "Cpus_allowed_list:\t0-3,6" line.
func parseCPUsAllowed(line string) (cpuset.CPUSet, error) {
	key, value, ok := strings.Cut(strings.TrimSpace(line), ":")
	if !ok || key != "Cpus_allowed_list" {
		return cpuset.CPUSet{}, fmt.Errorf("unexpected status line %q", line)
	}
	set, err := cpuset.Parse(strings.TrimSpace(value))
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("parse Cpus_allowed_list %q: %w", value, err)
	}
	return set, nil
}
